//! What the controller tells people: its self-metrics (collected with the
//! adapter's own on `/metrics`) and `/debug/scalers`, one JSON entry per policy
//! saying where it stands and why the last decision was taken or refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{Histogram, IntCounterVec, IntGauge};
use serde::Serialize;

use gpuscale_signals::exposition::{self, Family};

const LEADER: Family = Family::new(
    "gpuscale_scale_to_zero_leader",
    "Whether this replica holds the scale-to-zero Lease and acts (1) or stands by (0).",
    &[],
);
const PARKS: Family = Family::new(
    "gpuscale_scale_to_zero_parks_total",
    "Targets parked at 0 replicas.",
    &["namespace", "target"],
);
const WAKES: Family = Family::new(
    "gpuscale_scale_to_zero_wakes_total",
    "Parked targets woken on activation.",
    &["namespace", "target"],
);
const REFUSALS: Family = Family::new(
    "gpuscale_scale_to_zero_refusals_total",
    "Parks refused, by reason.",
    &["reason"],
);
const PARKED: Family = Family::new(
    "gpuscale_scale_to_zero_parked",
    "1 while the target is parked at 0 replicas by a policy.",
    &["namespace", "target"],
);
const WAKE_LATENCY: Family = Family::new(
    "gpuscale_scale_to_zero_wake_latency_seconds",
    "Seconds from activation seen to the scale patch accepted.",
    &[],
);
const SLEEPING: Family = Family::new(
    "gpuscale_scale_to_zero_sleeping_pods",
    "Pods of the target the sleep stage last saw Sleeping (present for a policy with sleep).",
    &["namespace", "target"],
);
const POLICIES: Family = Family::new(
    "gpuscale_scale_to_zero_policies",
    "Policies this replica acts on, by phase (Error: not acted on, see the policy's status).",
    &["phase"],
);
const WAKING_SINCE: Family = Family::new(
    "gpuscale_scale_to_zero_waking_since_seconds",
    "Unix time of the wake of a target that has had no Ready pod since.",
    &["namespace", "target"],
);

const CONFLICTS: Family = Family::new(
    "gpuscale_scale_to_zero_conflicts",
    "1 while a policy acts on nothing because something else scales its target (owner_kind: ScaleToZeroPolicy, ScaledObject, HorizontalPodAutoscaler).",
    &["namespace", "policy", "owner_kind"],
);

const ACTIVATION_UNKNOWN_SINCE: Family = Family::new(
    "gpuscale_scale_to_zero_activation_unknown_since_seconds",
    "Unix time since which the policy's activation rule has read unknown, present while it does.",
    &["namespace", "target"],
);

const INVALID: Family = Family::new(
    "gpuscale_scale_to_zero_invalid_policies",
    "Policies that cannot be read (each has a Warning Event InvalidPolicy naming the field) and are not acted on.",
    &[],
);

/// Reasons of a policy that another owner keeps from acting.
const CONFLICT_REASONS: &[&str] = &["Conflict", "OwnerConflict"];

/// Phases counted by `gpuscale_scale_to_zero_policies`, always all shown.
const PHASES: &[&str] = &["Active", "Parked", "Waking", "Error"];

const WAKE_BUCKETS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0];

const NONE: &[&str] = &[];

/// One policy as `/debug/scalers` shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    pub namespace: String,
    pub name: String,
    pub target: String,
    pub phase: String,
    pub idle: String,
    pub activation: String,
    /// Seconds the idle window has held, while one is open.
    pub idle_for_seconds: Option<i64>,
    /// Unix seconds of the wake, while the target has no Ready pod since.
    pub waking_since: Option<i64>,
    pub reason: String,
    pub message: String,
    /// Unix seconds of the decision.
    pub time: i64,
}

/// What is kept per (namespace, target) or policy: their families are
/// built at scrape ([`exposition::Snapshot`] says why).
#[derive(Default)]
struct Inner {
    parks: BTreeMap<(String, String), u64>,
    wakes: BTreeMap<(String, String), u64>,
    parked: BTreeMap<(String, String), bool>,
    /// Pods seen Sleeping, by (namespace, target) of a policy with `sleep`.
    sleeping: BTreeMap<(String, String), usize>,
    policies: BTreeMap<(String, String), PolicyReport>,
    /// Since when activation has read unknown, by (namespace, target).
    activation_unknown: BTreeMap<(String, String), i64>,
    /// Policies in conflict: the other owner's kind, by (namespace, policy).
    conflicts: BTreeMap<(String, String), &'static str>,
}

/// The controller's counters and per-policy reports.
pub struct Report {
    inner: Mutex<Inner>,
    leader: IntGauge,
    invalid: IntGauge,
    refusals: IntCounterVec,
    wake_latency: Histogram,
    descs: Vec<Desc>,
}

impl Default for Report {
    fn default() -> Self {
        let descs = [
            &PARKS,
            &WAKES,
            &PARKED,
            &SLEEPING,
            &POLICIES,
            &WAKING_SINCE,
            &CONFLICTS,
            &ACTIVATION_UNKNOWN_SINCE,
        ];
        Self {
            inner: Mutex::default(),
            leader: LEADER.gauge().with_label_values(NONE),
            invalid: INVALID.gauge().with_label_values(NONE),
            refusals: REFUSALS.counter(),
            wake_latency: WAKE_LATENCY.histogram(WAKE_BUCKETS).with_label_values(NONE),
            descs: descs.iter().map(|f| f.desc()).collect(),
        }
    }
}

fn key(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_string(), name.to_string())
}

impl Report {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A replica that stands by acts on nothing, so it reports no policy:
    /// a stale `Waking` there would raise an alert for the leader's work.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(leader.into());
        self.with(|i| {
            if !leader {
                i.policies.clear();
                i.parked.clear();
                i.sleeping.clear();
                i.conflicts.clear();
                i.activation_unknown.clear();
            }
        });
    }

    pub fn parked(&self, namespace: &str, target: &str) {
        self.with(|i| {
            *i.parks.entry(key(namespace, target)).or_default() += 1;
            i.parked.insert(key(namespace, target), true);
        });
    }

    /// A wake, `latency` seconds after activation was seen.
    pub fn woken(&self, namespace: &str, target: &str, latency: f64) {
        self.with(|i| {
            *i.wakes.entry(key(namespace, target)).or_default() += 1;
            i.parked.insert(key(namespace, target), false);
        });
        self.wake_latency.observe(latency);
    }

    pub fn refused(&self, reason: &'static str) {
        self.refusals.with_label_values(&[reason]).inc();
    }

    /// A policy that acts on nothing because a `owner_kind` scales its
    /// target; cleared by its next report with another reason.
    pub fn conflict(&self, namespace: &str, policy: &str, owner_kind: &'static str) {
        self.with(|i| i.conflicts.insert(key(namespace, policy), owner_kind));
    }

    /// How many of `target`'s pods sleep now (None: its policy has no
    /// `sleep` stage, so no series).
    pub fn sleeping(&self, namespace: &str, target: &str, pods: Option<usize>) {
        self.with(|i| match pods {
            Some(n) => i.sleeping.insert(key(namespace, target), n),
            None => i.sleeping.remove(&key(namespace, target)),
        });
    }

    /// Since when `target`'s activation has read unknown (None: it reads).
    pub fn activation_unknown(&self, namespace: &str, target: &str, since: Option<i64>) {
        self.with(|i| match since {
            Some(t) => i.activation_unknown.insert(key(namespace, target), t),
            None => i.activation_unknown.remove(&key(namespace, target)),
        });
    }

    /// Records a policy's state; `parked` follows its phase.
    pub fn policy(&self, report: PolicyReport) {
        self.with(|i| {
            let target = key(&report.namespace, &report.target);
            i.parked.insert(target, report.phase == "Parked");
            if !CONFLICT_REASONS.contains(&report.reason.as_str()) {
                i.conflicts.remove(&key(&report.namespace, &report.name));
            }
            i.policies
                .insert(key(&report.namespace, &report.name), report);
        });
    }

    /// Drops the policies `keep` rejects (deleted ones): the controller
    /// never reconciles a deleted object, so its last report would stay.
    pub fn retain(&self, keep: impl Fn(&str, &str) -> bool) {
        self.with(|i| {
            let gone: Vec<(String, String)> = i
                .policies
                .keys()
                .filter(|(ns, name)| !keep(ns, name))
                .cloned()
                .collect();
            for k in gone {
                i.conflicts.remove(&k);
                if let Some(r) = i.policies.remove(&k) {
                    i.parked.remove(&key(&k.0, &r.target));
                    i.sleeping.remove(&key(&k.0, &r.target));
                    i.activation_unknown.remove(&key(&k.0, &r.target));
                }
            }
        });
    }

    /// `/debug/scalers`.
    pub fn debug_json(&self) -> String {
        let leader = self.leader.get() == 1;
        self.with(|i| {
            let policies: Vec<&PolicyReport> = i.policies.values().collect();
            serde_json::json!({"leader": leader, "policies": policies}).to_string()
        })
    }

    /// How many policies cannot be read now (`invalid`).
    pub fn set_invalid(&self, n: usize) {
        self.invalid.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Every family of the controller.
    pub fn families(&self) -> Vec<MetricFamily> {
        let mut out = self.leader.collect();
        out.extend(self.invalid.collect());
        out.extend(self.refusals.collect());
        out.extend(self.wake_latency.collect());
        self.with(|i| {
            out.push(by_target(&PARKS, MetricType::COUNTER, counts(&i.parks)));
            out.push(by_target(&WAKES, MetricType::COUNTER, counts(&i.wakes)));
            let parked = i.parked.iter().map(|(k, p)| (k, f64::from(u8::from(*p))));
            out.push(by_target(&PARKED, MetricType::GAUGE, parked));
            let sleeping = i.sleeping.iter().map(|(k, n)| (k, *n as f64));
            out.push(by_target(&SLEEPING, MetricType::GAUGE, sleeping));
            out.extend(phases(i));
            let mut conflicts = CONFLICTS.snapshot(MetricType::GAUGE);
            for ((ns, policy), kind) in &i.conflicts {
                conflicts.push(&[ns, policy, kind], 1.0);
            }
            out.push(conflicts.done());
            let unknown = i.activation_unknown.iter().map(|(k, t)| (k, *t as f64));
            out.push(by_target(
                &ACTIVATION_UNKNOWN_SINCE,
                MetricType::GAUGE,
                unknown,
            ));
        });
        out
    }

    /// The families above in the text format.
    pub fn render(&self) -> String {
        exposition::encode(self.families())
    }

    /// What registers the controller's families in the adapter's registry.
    pub fn collector(report: Arc<Self>) -> impl Collector + Clone {
        Collected(report)
    }

    /// A leader with one policy in each family, for docs and tests.
    pub fn described() -> Self {
        Self::one_waking("ns", "t", 0.1, 1)
    }

    /// A leader that parked `target`, woke it `latency` seconds after
    /// activation at `since` (Unix seconds), with one refusal on the way.
    fn one_waking(namespace: &str, target: &str, latency: f64, since: i64) -> Self {
        let r = Self::default();
        r.set_leader(true);
        r.parked(namespace, target);
        r.woken(namespace, target, latency);
        r.refused("MinUpDuration");
        r.conflict(namespace, "other", "ScaledObject");
        r.activation_unknown(namespace, target, Some(since));
        r.sleeping(namespace, target, Some(0));
        r.policy(PolicyReport {
            namespace: namespace.into(),
            name: target.into(),
            target: target.into(),
            phase: "Waking".into(),
            idle: String::new(),
            activation: String::new(),
            idle_for_seconds: None,
            waking_since: Some(since),
            reason: "Woken".into(),
            message: String::new(),
            time: since + 1,
        });
        r
    }
}

#[derive(Clone)]
struct Collected(Arc<Report>);

impl Collector for Collected {
    fn desc(&self) -> Vec<&Desc> {
        let vecs = [
            self.0.leader.desc(),
            self.0.invalid.desc(),
            self.0.refusals.desc(),
        ];
        let vecs = vecs.into_iter().flatten();
        let own = self.0.descs.iter();
        vecs.chain(self.0.wake_latency.desc()).chain(own).collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.0.families()
    }
}

fn counts(m: &BTreeMap<(String, String), u64>) -> impl Iterator<Item = (&(String, String), f64)> {
    m.iter().map(|(k, n)| (k, *n as f64))
}

fn by_target<'a>(
    f: &Family,
    kind: MetricType,
    values: impl Iterator<Item = (&'a (String, String), f64)>,
) -> MetricFamily {
    let mut s = f.snapshot(kind);
    for ((ns, target), v) in values {
        s.push(&[ns, target], v);
    }
    s.done()
}

/// Policies by phase, and the wake time of each target still waking (the
/// `GPUScaleToZeroStuckWaking` alert compares it with `time()`, so a new
/// leader, which reads the wake time from the status, keeps the clock).
fn phases(i: &Inner) -> [MetricFamily; 2] {
    let mut policies = POLICIES.snapshot(MetricType::GAUGE);
    for phase in PHASES {
        let n = i.policies.values().filter(|p| p.phase == *phase).count();
        policies.push(&[phase], n as f64);
    }
    let mut waking = WAKING_SINCE.snapshot(MetricType::GAUGE);
    for p in i.policies.values() {
        if let Some(t) = p.waking_since {
            waking.push(&[&p.namespace, &p.target], t as f64);
        }
    }
    [policies.done(), waking.done()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_with_its_type() {
        let r = Report::one_waking("inference", "chat", 0.7, 1_790_000_000);
        let text = r.render();
        let families = [
            (LEADER, "gauge"),
            (PARKS, "counter"),
            (WAKES, "counter"),
            (REFUSALS, "counter"),
            (PARKED, "gauge"),
            (SLEEPING, "gauge"),
            (WAKE_LATENCY, "histogram"),
            (POLICIES, "gauge"),
            (WAKING_SINCE, "gauge"),
            (CONFLICTS, "gauge"),
            (ACTIVATION_UNKNOWN_SINCE, "gauge"),
        ];
        for (Family { name, .. }, kind) in families {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}")),
                "{name}\n{text}"
            );
        }
        assert!(text.contains("gpuscale_scale_to_zero_leader 1"));
        assert!(text.contains(
            "gpuscale_scale_to_zero_parks_total{namespace=\"inference\",target=\"chat\"} 1"
        ));
        assert!(text.contains("gpuscale_scale_to_zero_wake_latency_seconds_bucket{le=\"1\"} 1"));
        assert!(text.contains("gpuscale_scale_to_zero_wake_latency_seconds_bucket{le=\"0.5\"} 0"));
        assert!(text.contains("gpuscale_scale_to_zero_policies{phase=\"Waking\"} 1"));
        assert!(text.contains("gpuscale_scale_to_zero_policies{phase=\"Parked\"} 0"));
        assert!(text.contains(
            "gpuscale_scale_to_zero_waking_since_seconds{namespace=\"inference\",target=\"chat\"} 1790000000"
        ));
        assert!(text.contains(
            "gpuscale_scale_to_zero_conflicts{namespace=\"inference\",policy=\"other\",owner_kind=\"ScaledObject\"} 1"
        ));
        assert!(text.contains(
            "gpuscale_scale_to_zero_sleeping_pods{namespace=\"inference\",target=\"chat\"} 0"
        ));
        r.sleeping("inference", "chat", None);
        assert!(
            !r.render().contains("sleeping_pods{"),
            "no sleep stage, no series"
        );
        r.set_leader(false);
        assert!(
            !r.render().contains("waking_since_seconds{"),
            "a standby reports no policy"
        );
    }
}
