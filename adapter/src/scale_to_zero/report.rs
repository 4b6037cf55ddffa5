//! What the controller tells people: its self-metrics (appended to the
//! adapter's `/metrics`) and `/debug/scalers`, one JSON entry per policy
//! saying where it stands and why the last decision was taken or refused.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use serde::Serialize;

/// Self-metric families, as documented in docs/scale-to-zero.md.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    ("gpuscale_scale_to_zero_leader", "gauge", ""),
    (
        "gpuscale_scale_to_zero_parks_total",
        "counter",
        "namespace,target",
    ),
    (
        "gpuscale_scale_to_zero_wakes_total",
        "counter",
        "namespace,target",
    ),
    ("gpuscale_scale_to_zero_refusals_total", "counter", "reason"),
    ("gpuscale_scale_to_zero_parked", "gauge", "namespace,target"),
    (
        "gpuscale_scale_to_zero_wake_latency_seconds",
        "histogram",
        "",
    ),
    ("gpuscale_scale_to_zero_policies", "gauge", "phase"),
    (
        "gpuscale_scale_to_zero_waking_since_seconds",
        "gauge",
        "namespace,target",
    ),
];

/// Phases counted by `gpuscale_scale_to_zero_policies`, always all shown.
const PHASES: &[&str] = &["Active", "Parked", "Waking", "Error"];

const WAKE_BUCKETS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0];

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

#[derive(Default)]
struct Inner {
    leader: bool,
    parks: BTreeMap<(String, String), u64>,
    wakes: BTreeMap<(String, String), u64>,
    refusals: BTreeMap<&'static str, u64>,
    parked: BTreeMap<(String, String), bool>,
    wake_buckets: Vec<u64>,
    wake_sum: f64,
    wake_count: u64,
    policies: BTreeMap<(String, String), PolicyReport>,
}

/// The controller's counters and per-policy reports.
#[derive(Default)]
pub struct Report {
    inner: Mutex<Inner>,
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
        self.with(|i| {
            i.leader = leader;
            if !leader {
                i.policies.clear();
                i.parked.clear();
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
            if i.wake_buckets.is_empty() {
                i.wake_buckets = vec![0; WAKE_BUCKETS.len()];
            }
            for (n, b) in i.wake_buckets.iter_mut().zip(WAKE_BUCKETS) {
                if latency <= *b {
                    *n += 1;
                }
            }
            i.wake_sum += latency;
            i.wake_count += 1;
        });
    }

    pub fn refused(&self, reason: &'static str) {
        self.with(|i| *i.refusals.entry(reason).or_default() += 1);
    }

    /// Records a policy's state; `parked` follows its phase.
    pub fn policy(&self, report: PolicyReport) {
        self.with(|i| {
            let target = key(&report.namespace, &report.target);
            i.parked.insert(target, report.phase == "Parked");
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
                if let Some(r) = i.policies.remove(&k) {
                    i.parked.remove(&key(&k.0, &r.target));
                }
            }
        });
    }

    /// `/debug/scalers`.
    pub fn debug_json(&self) -> String {
        self.with(|i| {
            let leader = i.leader;
            let policies: Vec<&PolicyReport> = i.policies.values().collect();
            serde_json::json!({"leader": leader, "policies": policies}).to_string()
        })
    }

    /// The families above in the text format.
    pub fn render(&self) -> String {
        self.with(|i| {
            let mut out = String::new();
            let head = |out: &mut String, name: &str, kind: &str, help: &str| {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            };
            head(
                &mut out,
                FAMILIES[0].0,
                "gauge",
                "Whether this replica holds the scale-to-zero Lease and acts (1) or stands by (0).",
            );
            let _ = writeln!(out, "{} {}", FAMILIES[0].0, u8::from(i.leader));
            for (family, help, map) in [
                (FAMILIES[1].0, "Targets parked at 0 replicas.", &i.parks),
                (
                    FAMILIES[2].0,
                    "Parked targets woken on activation.",
                    &i.wakes,
                ),
            ] {
                head(&mut out, family, "counter", help);
                for ((ns, t), n) in map {
                    let _ = writeln!(
                        out,
                        "{family}{{namespace=\"{}\",target=\"{}\"}} {n}",
                        esc(ns),
                        esc(t)
                    );
                }
            }
            let family = FAMILIES[3].0;
            head(&mut out, family, "counter", "Parks refused, by reason.");
            for (reason, n) in &i.refusals {
                let _ = writeln!(out, "{family}{{reason=\"{reason}\"}} {n}");
            }
            let family = FAMILIES[4].0;
            head(
                &mut out,
                family,
                "gauge",
                "1 while the target is parked at 0 replicas by a policy.",
            );
            for ((ns, t), parked) in &i.parked {
                let _ = writeln!(
                    out,
                    "{family}{{namespace=\"{}\",target=\"{}\"}} {}",
                    esc(ns),
                    esc(t),
                    u8::from(*parked)
                );
            }
            let family = FAMILIES[5].0;
            head(
                &mut out,
                family,
                "histogram",
                "Seconds from activation seen to the scale patch accepted.",
            );
            for (b, n) in WAKE_BUCKETS
                .iter()
                .zip(i.wake_buckets.iter().chain(std::iter::repeat(&0)))
            {
                let _ = writeln!(out, "{family}_bucket{{le=\"{b}\"}} {n}");
            }
            let _ = writeln!(out, "{family}_bucket{{le=\"+Inf\"}} {}", i.wake_count);
            let _ = writeln!(
                out,
                "{family}_sum {}\n{family}_count {}",
                i.wake_sum, i.wake_count
            );
            render_phases(&mut out, i);
            out
        })
    }
}

/// Policies by phase, and the wake time of each target still waking (the
/// `GPUScaleToZeroStuckWaking` alert compares it with `time()`, so a new
/// leader, which reads the wake time from the status, keeps the clock).
fn render_phases(out: &mut String, i: &Inner) {
    let family = FAMILIES[6].0;
    let _ = writeln!(
        out,
        "# HELP {family} Policies this replica acts on, by phase (Error: not acted on, see the policy's status).\n# TYPE {family} gauge"
    );
    for phase in PHASES {
        let n = i.policies.values().filter(|p| p.phase == *phase).count();
        let _ = writeln!(out, "{family}{{phase=\"{phase}\"}} {n}");
    }
    let family = FAMILIES[7].0;
    let _ = writeln!(
        out,
        "# HELP {family} Unix time of the wake of a target that has had no Ready pod since.\n# TYPE {family} gauge"
    );
    for p in i.policies.values() {
        if let Some(t) = p.waking_since {
            let _ = writeln!(
                out,
                "{family}{{namespace=\"{}\",target=\"{}\"}} {t}",
                esc(&p.namespace),
                esc(&p.target)
            );
        }
    }
}

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_with_its_type() {
        let r = Report::default();
        r.set_leader(true);
        r.parked("inference", "chat");
        r.woken("inference", "chat", 0.7);
        r.refused("MinUpDuration");
        r.policy(PolicyReport {
            namespace: "inference".into(),
            name: "chat".into(),
            target: "chat".into(),
            phase: "Waking".into(),
            idle: String::new(),
            activation: String::new(),
            idle_for_seconds: None,
            waking_since: Some(1_790_000_000),
            reason: "Woken".into(),
            message: String::new(),
            time: 1_790_000_001,
        });
        let text = r.render();
        for (name, kind, _) in FAMILIES {
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
        r.set_leader(false);
        assert!(
            !r.render().contains("waking_since_seconds{"),
            "a standby reports no policy"
        );
    }
}
