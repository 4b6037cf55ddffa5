//! Retry delays: doubling from a first delay up to a cap, with jitter, so
//! that clients that failed together (every node's exporter when the API
//! server restarts) do not all retry at the same instant.

use std::hash::BuildHasher;
use std::time::Duration;

/// The delay after the `failures`-th failure in a row (counting from 1):
/// `first` doubled for each earlier one, at most `max`; before jitter.
pub fn step(first: Duration, max: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    first.saturating_mul(1 << doublings).min(max)
}

/// `d` spread evenly over `[d/2, d]`: never longer than asked, at least
/// half of it.
pub fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    let span = u64::try_from((d - half).as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(random() % span.saturating_add(1))
}

/// A fresh `RandomState` is keyed anew each time: randomness enough for
/// jitter without a dependency.
fn random() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(0u8)
}

/// The retry delays of one loop.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// A first delay above `max` is `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first: first.min(max),
            max,
            failures: 0,
        }
    }

    /// The delay to wait after this failure: [`step`] with [`jitter`].
    pub fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        jitter(step(self.first, self.max, self.failures))
    }

    /// After a success the next failure waits about `first` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn steps_double_up_to_the_cap() {
        let seen: Vec<_> = (1..=5).map(|n| step(ms(250), ms(1500), n)).collect();
        assert_eq!(seen, [ms(250), ms(500), ms(1000), ms(1500), ms(1500)]);
        assert_eq!(step(ms(250), ms(1500), 0), ms(250));
        assert_eq!(step(ms(250), ms(1500), u32::MAX), ms(1500));
        assert_eq!(step(ms(1), Duration::MAX, u32::MAX), ms(1 << 31));
        assert_eq!(step(Duration::MAX, Duration::MAX, 40), Duration::MAX);
    }

    #[test]
    fn jitter_stays_in_the_upper_half_and_varies() {
        let d = ms(1000);
        let seen: Vec<_> = (0..200).map(|_| jitter(d)).collect();
        assert!(seen.iter().all(|j| (ms(500)..=d).contains(j)), "{seen:?}");
        assert!(seen.iter().any(|j| *j != seen[0]), "no spread");
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
        assert!(jitter(Duration::MAX) >= Duration::MAX / 2);
    }

    #[test]
    fn backoff_grows_and_starts_over_after_a_success() {
        let mut b = Backoff::new(ms(250), ms(1500));
        for want in [ms(250), ms(500), ms(1000), ms(1500), ms(1500)] {
            let got = b.next_delay();
            assert!(got <= want && got >= want / 2, "{got:?} for {want:?}");
        }
        b.reset();
        assert!(b.next_delay() <= ms(250));
        assert!(Backoff::new(ms(900), ms(100)).next_delay() <= ms(100));
    }
}
