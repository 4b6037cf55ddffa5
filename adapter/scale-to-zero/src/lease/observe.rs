//! When a Lease may be taken, judged as client-go does: on this replica's
//! monotonic clock, from the last time it saw the record change. The
//! holder's `renewTime` is another machine's wall clock and is never
//! compared with ours, so skew between nodes cannot expire a live Lease.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The parts of a Lease whose change shows its holder is alive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// `None` when nobody holds it (absent or released: empty).
    pub holder: Option<String>,
    pub renew_time: Option<MicroTime>,
    pub acquire_time: Option<MicroTime>,
    pub transitions: i32,
    /// The holder's own `leaseDurationSeconds` (1 after a release).
    pub duration: Option<Duration>,
    pub resource_version: Option<String>,
}

impl Record {
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time,
            acquire_time: spec.acquire_time,
            transitions: spec.lease_transitions.unwrap_or(0),
            duration: spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

/// The record as last seen and when it last changed.
#[derive(Debug, Default)]
pub struct Observer {
    last: Option<(Record, Instant)>,
}

impl Observer {
    /// Notes `record` as read at `now`; the clock restarts only on a change.
    pub fn observe(&mut self, record: Record, now: Instant) {
        if self.last.as_ref().is_none_or(|(seen, _)| *seen != record) {
            self.last = Some((record, now));
        }
    }

    /// Whether another replica may take the Lease at `now`: nobody holds
    /// it, or it has not changed for the holder's duration (`fallback`
    /// when the record gives none) since this replica saw it change.
    pub fn takeable(&self, now: Instant, fallback: Duration) -> bool {
        let Some((record, changed)) = &self.last else {
            return true;
        };
        if record.holder.is_none() {
            return true;
        }
        now.saturating_duration_since(*changed) >= record.duration.unwrap_or(fallback)
    }

    /// The record as last seen.
    pub fn last(&self) -> Option<&Record> {
        self.last.as_ref().map(|(r, _)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(by: &str, version: &str) -> Record {
        Record {
            holder: Some(by.into()),
            duration: Some(Duration::from_secs(15)),
            resource_version: Some(version.into()),
            ..Record::default()
        }
    }

    const FALLBACK: Duration = Duration::from_secs(15);

    #[test]
    fn a_lease_is_takeable_only_after_its_duration_without_a_change() {
        let t0 = Instant::now();
        let mut seen = Observer::default();
        seen.observe(held("a", "1"), t0);
        assert!(!seen.takeable(t0 + Duration::from_secs(14), FALLBACK));
        assert!(seen.takeable(t0 + Duration::from_secs(15), FALLBACK));
    }

    #[test]
    fn a_renewal_restarts_the_clock_and_an_unchanged_read_does_not() {
        let t0 = Instant::now();
        let mut seen = Observer::default();
        seen.observe(held("a", "1"), t0);
        seen.observe(held("a", "1"), t0 + Duration::from_secs(10));
        assert!(seen.takeable(t0 + Duration::from_secs(15), FALLBACK));
        seen.observe(held("a", "2"), t0 + Duration::from_secs(10));
        assert!(!seen.takeable(t0 + Duration::from_secs(24), FALLBACK));
        assert!(seen.takeable(t0 + Duration::from_secs(25), FALLBACK));
    }

    /// The holder's `renewTime` an hour in the past or the future (its
    /// clock skewed) does not matter: only our monotonic clock does.
    #[test]
    fn renew_time_from_a_skewed_clock_is_ignored() {
        let t0 = Instant::now();
        let skewed = |secs| Record {
            renew_time: Some(MicroTime(
                k8s_openapi::jiff::Timestamp::from_second(secs).expect("timestamp"),
            )),
            ..held("a", "1")
        };
        for renewed in [1_000, 1_000_000_000, 4_000_000_000] {
            let mut seen = Observer::default();
            seen.observe(skewed(renewed), t0);
            assert!(!seen.takeable(t0 + Duration::from_secs(1), FALLBACK));
        }
    }

    #[test]
    fn a_released_or_unseen_lease_is_takeable_at_once() {
        let t0 = Instant::now();
        let mut seen = Observer::default();
        assert!(seen.takeable(t0, FALLBACK), "never read");
        seen.observe(
            Record {
                holder: None,
                ..held("", "3")
            },
            t0,
        );
        assert!(seen.takeable(t0, FALLBACK));
    }

    #[test]
    fn a_lease_without_a_duration_uses_ours() {
        let t0 = Instant::now();
        let mut seen = Observer::default();
        seen.observe(
            Record {
                duration: None,
                ..held("a", "1")
            },
            t0,
        );
        assert!(!seen.takeable(t0 + Duration::from_secs(2), Duration::from_secs(3)));
        assert!(seen.takeable(t0 + Duration::from_secs(3), Duration::from_secs(3)));
    }
}
