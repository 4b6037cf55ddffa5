//! Doubling retry delays: one shape for every loop that reconnects (NVML,
//! the XID listener, the kubelet and the pod watch).

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        let first = first.min(max);
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The delay to wait after this failure; the next one doubles, up to `max`.
    pub fn next_delay(&mut self) -> Duration {
        let now = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        now
    }

    /// After a success the next failure waits `first` again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_starts_over_after_a_success() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(250), ms(1500));
        let seen: Vec<_> = (0..5).map(|_| b.next_delay()).collect();
        assert_eq!(seen, [ms(250), ms(500), ms(1000), ms(1500), ms(1500)]);
        b.reset();
        assert_eq!(b.next_delay(), ms(250));
        // A first delay above the cap is the cap.
        assert_eq!(Backoff::new(ms(900), ms(100)).next_delay(), ms(100));
    }
}
