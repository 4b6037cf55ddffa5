//! What gpuscale's controller idles a target on: a setting of its policy
//! (the idle rule's metric), as users have it. Through Prometheus any
//! series the adapter can query; with the activator in the path also the
//! activator's own count, read from the activator itself.

use crate::sim::Signals;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub enum IdleSignal {
    /// Requests per second over the last minute through Prometheus
    /// (`rate(…[1m])`): every request keeps it above 0 for a minute.
    #[default]
    Rate,
    /// Requests in flight (running and waiting) through Prometheus: the
    /// value of the last scrape before the adapter's poll, so a request
    /// that starts and ends between two scrapes is never seen (as KEDA
    /// sees it).
    InFlight,
    /// The activator's own count of the requests open through it (held or
    /// forwarded and not yet answered), read from the activator at each
    /// controller sync: exact at that instant, no scrape, no poll. Needs
    /// the activator in the path.
    Activator,
}

impl IdleSignal {
    pub const ALL: [IdleSignal; 3] = [Self::Rate, Self::InFlight, Self::Activator];

    /// The idle read at this step (`s` as the policy's signal path lets it
    /// see: Prometheus reads delayed, the activator's current).
    pub fn read(self, s: &Signals) -> f64 {
        match self {
            Self::Rate => s.rate_1m,
            Self::InFlight => s.in_flight,
            Self::Activator => s.in_flight_now,
        }
    }

    /// Only a policy with the activator in the path can read it.
    pub fn needs_activator(self) -> bool {
        self == Self::Activator
    }

    /// The name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rate => "rate",
            Self::InFlight => "in-flight",
            Self::Activator => "activator",
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("{s:?}: expected rate, in-flight or activator"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::Knobs;
    use crate::model::Service;
    use crate::sim::Policy as _;

    /// One request in flight during seconds 40 to 44, between two 30 s
    /// scrapes; the rate over a minute counts it until second 100.
    fn at(now: i64) -> Signals {
        let in_flight = if (40..45).contains(&now) { 1.0 } else { 0.0 };
        Signals {
            now,
            in_flight,
            in_flight_now: in_flight,
            rate_1m: if (40..=100).contains(&now) {
                1.0 / 60.0
            } else {
                0.0
            },
            replicas: 1,
            ready: 1,
        }
    }

    /// The first second gpuscale (idleFor 0, sync 15, from second 46, the
    /// request over) asks for zero replicas, with or without the
    /// Prometheus path's delay.
    fn parks_at(signal: IdleSignal, activator: bool, delayed: bool) -> Option<i64> {
        let mut k = Knobs::defaults(&Service::default());
        k.idle_for = 0;
        k.idle_signal = signal;
        let mut g = k.gpuscale(activator)?;
        if !delayed {
            // An instant scrape and poll: the policy alone.
            g.path.scrape = 1;
            g.path.poll = 1;
        }
        (46..300).find(|&now| g.step(&at(now)) == 0)
    }

    #[test]
    fn each_idle_signal_sees_a_short_request_for_its_own_time() {
        // Undelayed: the count is 0 at the first sync, the rate after 100.
        assert_eq!(parks_at(IdleSignal::InFlight, false, false), Some(60));
        assert_eq!(parks_at(IdleSignal::Rate, false, false), Some(105));
        // Through a 30 s scrape: the in-flight scrapes (30, 60) never saw
        // the request (nor would KEDA's); the rate stays above 0 until the
        // scrape at 120.
        assert_eq!(parks_at(IdleSignal::InFlight, false, true), Some(60));
        assert_eq!(parks_at(IdleSignal::Rate, false, true), Some(120));
        // The activator's count is read current at each sync.
        assert_eq!(parks_at(IdleSignal::Activator, true, true), Some(60));
        assert_eq!(parks_at(IdleSignal::Activator, false, true), None);
    }

    fn signals() -> Signals {
        Signals {
            now: 60,
            in_flight: 2.0,
            in_flight_now: 0.0,
            rate_1m: 0.5,
            replicas: 1,
            ready: 1,
        }
    }

    #[test]
    fn each_signal_reads_its_own_value() {
        let s = signals();
        assert_eq!(IdleSignal::Rate.read(&s), 0.5);
        assert_eq!(IdleSignal::InFlight.read(&s), 2.0);
        assert_eq!(IdleSignal::Activator.read(&s), 0.0);
    }

    #[test]
    fn names_round_trip_and_bad_names_are_errors() {
        for v in IdleSignal::ALL {
            assert_eq!(IdleSignal::parse(v.name()), Ok(v));
        }
        let e = IdleSignal::parse("qps").unwrap_err();
        assert!(e.contains("qps") && e.contains("in-flight"), "{e}");
        assert!(IdleSignal::Activator.needs_activator());
        assert!(!IdleSignal::InFlight.needs_activator());
    }
}
