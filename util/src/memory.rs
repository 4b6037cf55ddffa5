//! A daemon's resident memory (docs/performance.md, "Resident memory"):
//! glibc's allocator is set up before any thread starts, and once start-up
//! is over the memory only start-up touched is given back. The exporter
//! and the adapter both call it first thing in `main`.

use std::time::Duration;

use tracing::{debug, info};

/// glibc gives each thread that allocates its own arena, and after a large
/// block is freed it raises its mmap threshold so later large buffers (the
/// exporter's 100–250 KB snapshots, the adapter's Prometheus answers and
/// Kubernetes lists) come from the heap and stay resident. One arena (each
/// daemon allocates from one or two workers and a few helper threads,
/// never contended for long) and a fixed threshold keep the resident set
/// small; a few more mmap calls cost nothing measurable.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called first in main, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 * 1024);
    }
}

/// Runs [`release_startup_memory`] once start-up is over (`startup` after
/// now), on a thread of its own that then ends (a worker would stall
/// requests while the kernel reclaims; a pooled blocking thread would stay
/// resident for a while).
pub fn release_after_startup(startup: Duration) {
    let started = std::thread::Builder::new()
        .name("release".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            std::thread::sleep(startup);
            release_startup_memory();
        });
    if let Err(e) = started {
        debug!(error = %e, "cannot start the thread that releases start-up memory");
    }
}

/// Gives back what start-up alone used: free heap pages (`malloc_trim`),
/// and the read-only file pages (code and constants of the binary and its
/// libraries, NVML's in the exporter) that this process alone maps, which the
/// kernel reclaims (`MADV_PAGEOUT`); those a collection or a scrape still
/// runs are read back on their next use. Pages shared with other processes
/// are left alone by the kernel. Logs the resident set before and after.
pub fn release_startup_memory() {
    let before = resident_kib();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
    let advised = page_out_read_only_files();
    info!(
        rss_before_kib = before,
        rss_after_kib = resident_kib(),
        advised_kib = advised / 1024,
        "released start-up memory"
    );
}

/// `VmRSS` of this process in KiB (0 where /proc cannot say; only logged).
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes of read-only file mappings advised to be paged out.
#[cfg(target_os = "linux")]
fn page_out_read_only_files() -> usize {
    let maps = match std::fs::read_to_string("/proc/self/maps") {
        Ok(m) => m,
        Err(e) => {
            debug!(error = %e, "cannot read /proc/self/maps; start-up pages stay");
            return 0;
        }
    };
    let mut advised = 0;
    for (start, len) in read_only_file_ranges(&maps) {
        // SAFETY: the range is a whole mapping of this process, read-only
        // and backed by a file: paging it out keeps its contents (clean
        // pages are read back from the file, others kept or swapped).
        let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
        if rc != 0 {
            // Before Linux 5.4, or a sandbox without it: nothing to release.
            debug!(error = %std::io::Error::last_os_error(), "MADV_PAGEOUT refused; start-up pages stay");
            break;
        }
        advised += len;
    }
    advised
}

#[cfg(not(target_os = "linux"))]
fn page_out_read_only_files() -> usize {
    0
}

/// The (start, length) of each mapping in a `/proc/<pid>/maps` text that
/// is backed by a file and not writable.
fn read_only_file_ranges(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next()?, f.next()?);
            let path = f.nth(3)?;
            if !path.starts_with('/') || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end - start))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_only_file_mappings_are_paged_out() {
        let maps = "\
55d0a0000000-55d0a0100000 r--p 00000000 fd:01 123 /usr/local/bin/gpuscale-exporter
55d0a0100000-55d0a0800000 r-xp 00100000 fd:01 123 /usr/local/bin/gpuscale-exporter
55d0a0900000-55d0a0910000 rw-p 00900000 fd:01 123 /usr/local/bin/gpuscale-exporter
55d0a1000000-55d0a1200000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000021000 rw-p 00000000 00:00 0
7f0000100000-7f0000200000 r-xp 00000000 fd:01 456 /usr/lib/libnvidia-ml.so.1 (deleted)
7fff00000000-7fff00002000 r-xp 00000000 00:00 0 [vdso]
garbage line
";
        assert_eq!(
            read_only_file_ranges(maps),
            [
                (0x55d0a0000000, 0x100000),
                (0x55d0a0100000, 0x700000),
                (0x7f0000100000, 0x100000)
            ]
        );
    }

    #[test]
    fn the_resident_set_is_read() {
        assert!(resident_kib() > 0);
    }
}
