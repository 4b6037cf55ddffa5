//! File descriptors kept back for what must work under a connection
//! flood: probes and `/metrics` (64 connections at most), the Kubernetes
//! API client and the upstream connections of requests being forwarded.

/// Descriptors never given to proxy connections.
pub const RESERVE: u64 = 256;

/// The proxy's connection cap within a descriptor limit of `nofile`: each
/// proxy connection may need a second descriptor for its upstream.
pub fn cap(wanted: usize, nofile: u64) -> usize {
    let room = nofile.saturating_sub(RESERVE) / 2;
    wanted
        .min(usize::try_from(room).unwrap_or(usize::MAX))
        .max(1)
}

/// Raises the soft descriptor limit to the hard one and returns it; None
/// when it cannot be read.
pub fn limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only write to and read `r`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut r) } != 0 {
        return None;
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } == 0 {
            r.rlim_cur = r.rlim_max;
        }
    }
    Some(r.rlim_cur)
}

/// `--max-connections`, lowered (with a log line) to leave the reserve.
pub fn max_connections(wanted: usize) -> usize {
    let Some(nofile) = limit() else {
        tracing::warn!("cannot read the file-descriptor limit; --max-connections kept as given");
        return wanted;
    };
    let capped = cap(wanted, nofile);
    if capped < wanted {
        tracing::warn!(
            wanted,
            capped,
            nofile,
            reserve = RESERVE,
            "--max-connections lowered to leave file descriptors for probes, /metrics, the Kubernetes API and upstream connections"
        );
    }
    capped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_and_an_upstream_each() {
        assert_eq!(cap(20_000, 1_048_576), 20_000);
        assert_eq!(cap(20_000, 20_400), (20_400 - 256) / 2);
        assert_eq!(cap(20_000, 1024), 384);
        assert_eq!(cap(20_000, 100), 1);
    }
}
