//! The policies of one comparison, built from the same knobs.

use crate::idle::IdleSignal;
use crate::model::Service;
use crate::policy::{Gpuscale, Hpa, Keda, Static};
use crate::signal::{Path, Signalled};
use crate::sim::{Outcome, Policy, replay};
use crate::trace::Arrival;

/// The tunable parameters (`--sweep` varies one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knobs {
    /// HPA target: in-flight requests per replica.
    pub hpa_target: f64,
    pub max_replicas: i32,
    /// KEDA and gpuscale: wake when in-flight requests are above this.
    pub activation: f64,
    /// KEDA `cooldownPeriod`, seconds.
    pub cooldown: u64,
    /// gpuscale `idleFor`, seconds.
    pub idle_for: u64,
    /// gpuscale `minUpDuration`, seconds.
    pub min_up: u64,
    /// What gpuscale idles on.
    pub idle_signal: IdleSignal,
    /// gpuscale controller's resync, seconds.
    pub sync: u64,
    /// Prometheus `scrape_interval`, seconds.
    pub scrape: u64,
    /// The adapter's `--poll-interval` of Prometheus, seconds.
    pub adapter_poll: u64,
    /// KEDA `pollingInterval`, seconds.
    pub keda_polling: u64,
}

impl Knobs {
    pub fn defaults(svc: &Service) -> Self {
        Self {
            hpa_target: f64::from(svc.max_seqs) * 0.75,
            max_replicas: 64,
            activation: 0.0,
            cooldown: 300,
            idle_for: 300,
            min_up: 0,
            idle_signal: IdleSignal::Rate,
            sync: 15,
            scrape: 30,
            adapter_poll: 5,
            keda_polling: 30,
        }
    }

    /// Through Prometheus and a reader polling every `poll` seconds.
    fn path(&self, poll: u64, direct_wake: bool) -> Path {
        Path {
            scrape: self.scrape as i64,
            poll: poll as i64,
            direct_wake,
        }
    }

    /// The HPA reads the adapter's cache.
    pub fn hpa(&self) -> Signalled<Hpa> {
        let hpa = Hpa::new(self.hpa_target, 1, self.max_replicas);
        Signalled::new(hpa, self.path(self.adapter_poll, false))
    }

    /// KEDA queries Prometheus at each `pollingInterval`; its HPA reads
    /// KEDA's metrics server, which queries at each HPA sync.
    pub fn keda(&self) -> Signalled<Keda> {
        let hpa = Hpa::new(self.hpa_target, 1, self.max_replicas);
        let mut keda = Keda::new(hpa, self.activation, self.cooldown as i64);
        keda.polling = self.keda_polling.max(1) as i64;
        Signalled::new(keda, self.path(1, false))
    }

    /// gpuscale's controller and the HPA read the adapter's cache; with the
    /// activator, the wake from zero comes from the request path (and the
    /// controller may idle on the activator's own count). `None` for the
    /// activator's signal without the activator.
    pub fn gpuscale(&self, activator: bool) -> Option<Signalled<Gpuscale>> {
        if self.idle_signal.needs_activator() && !activator {
            return None;
        }
        let hpa = Hpa::new(self.hpa_target, 1, self.max_replicas);
        let rules = Gpuscale::rules(self.idle_for, self.activation, self.min_up);
        let g = Gpuscale::new(hpa, rules, self.idle_signal, self.sync as i64);
        Some(Signalled::new(g, self.path(self.adapter_poll, activator)))
    }
}

/// Every policy over one trace (gpuscale without the activator is left out
/// when it idles on the activator's count, which it cannot read).
pub fn compare(svc: &Service, arrivals: &[Arrival], k: &Knobs) -> Vec<Outcome> {
    let demand = svc.demand_per_minute(arrivals);
    let mut sorted = demand.clone();
    sorted.sort_unstable();
    let peak = sorted.last().copied().unwrap_or(1);
    let p95 = sorted
        .get(((sorted.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(1);
    let mut policies: Vec<Box<dyn Policy>> = vec![
        Box::new(Static {
            label: "static at peak",
            replicas: peak as i32,
        }),
        Box::new(Static {
            label: "static at p95",
            replicas: p95 as i32,
        }),
        Box::new(k.hpa()),
        Box::new(k.keda()),
    ];
    for activator in [false, true] {
        if let Some(g) = k.gpuscale(activator) {
            policies.push(Box::new(g));
        }
    }
    policies
        .iter_mut()
        .map(|p| replay(svc, arrivals, p.as_mut()))
        .collect()
}
