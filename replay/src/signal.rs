//! The signal path between the service and a policy: what a scaling
//! decision can know, and when. Through Prometheus a policy reads the
//! value of the last scrape before its reader's last poll (the adapter's
//! cache, or KEDA's own query); the activator's wake skips both.

use std::collections::VecDeque;

use crate::sim::{Policy, Signals};

/// How a policy's reads reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Path {
    /// Prometheus `scrape_interval`, seconds (at least 1).
    pub scrape: i64,
    /// The reader's poll of Prometheus, seconds (the adapter's
    /// `--poll-interval`; 1 for a reader that queries at each decision).
    pub poll: i64,
    /// A request holder in front of the service wakes it at the first held
    /// request, in the next step (no scrape, no poll).
    pub direct_wake: bool,
}

impl Path {
    /// The second whose values a reader sees at `now`: the last scrape at or
    /// before the reader's last poll.
    pub fn seen_at(&self, now: i64) -> i64 {
        let polled = now - now.rem_euclid(self.poll.max(1));
        polled - polled.rem_euclid(self.scrape.max(1))
    }
}

/// A policy behind a signal path.
pub struct Signalled<P> {
    pub inner: P,
    pub path: Path,
    history: VecDeque<Signals>,
}

impl<P: Policy> Signalled<P> {
    pub fn new(inner: P, path: Path) -> Self {
        Self {
            inner,
            path,
            history: VecDeque::new(),
        }
    }

    /// The delayed reads; replica counts come from the Kubernetes API,
    /// current.
    fn delayed(&mut self, s: &Signals) -> Signals {
        self.history.push_back(*s);
        let at = self.path.seen_at(s.now);
        while self.history.len() > 1 && self.history.get(1).is_some_and(|h| h.now <= at) {
            self.history.pop_front();
        }
        let old = self.history.front().copied().unwrap_or(*s);
        Signals {
            in_flight: old.in_flight,
            rate_1m: old.rate_1m,
            ..*s
        }
    }
}

impl<P: Policy> Policy for Signalled<P> {
    fn name(&self) -> String {
        if self.path.direct_wake {
            format!("{} + activator", self.inner.name())
        } else {
            self.inner.name()
        }
    }
    fn initial(&self) -> i32 {
        self.inner.initial()
    }
    fn step(&mut self, s: &Signals) -> i32 {
        let seen = self.delayed(s);
        let want = self.inner.step(&seen);
        // The activator patches 0 → 1 itself; it never scales down.
        if self.path.direct_wake && s.replicas == 0 && want == 0 && s.in_flight > 0.0 {
            return 1;
        }
        want
    }
}
