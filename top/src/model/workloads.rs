//! The workload view: what each workload holds (from the devices), and
//! what a Prometheus with the rules of `alerts/` knows about it: its
//! bottleneck class, cost per hour and per million tokens, and the
//! scale-to-zero controller's state of it.

use std::collections::{BTreeMap, BTreeSet};

use super::{Families, Filter, Gpu, Holder, Mig, Workload};

type Key = (String, String);

pub(super) fn workloads(f: &Families, gpus: &[Gpu], filter: &Filter) -> Vec<Workload> {
    let mut acc: BTreeMap<Key, Acc> = BTreeMap::new();
    for g in gpus {
        held(&mut acc, &g.holders, g.utilization, g.price_usd_per_hour);
        let share = |m: &Mig| match (m.memory_total_bytes, g.memory_total_bytes) {
            (Some(a), Some(b)) if b > 0.0 => g.price_usd_per_hour.map(|p| p * a / b),
            _ => None,
        };
        for m in &g.mig {
            held(&mut acc, &m.holders, m.sm_active, share(m));
        }
    }
    scale_to_zero(f, &mut acc);
    sleeping(f, &mut acc);
    rules(f, &mut acc);
    acc.into_iter()
        .filter(|((ns, _), _)| filter.namespace.as_ref().is_none_or(|n| n == ns))
        .filter(|(_, a)| a.devices > 0 || a.state.is_some())
        .map(|((namespace, workload), a)| a.finish(namespace, workload))
        .collect()
}

/// The series' (namespace, target) with the target's kind dropped
/// (`Deployment/vllm` → `vllm`).
fn target(s: &crate::expo::Sample) -> Option<(&str, &str)> {
    let (ns, target) = (s.label("namespace")?, s.label("target")?);
    Some((ns, target.rsplit('/').next().unwrap_or(target)))
}

/// Parked (`gpuscale_scale_to_zero_parked` at 1), waking (a
/// `gpuscale_scale_to_zero_waking_since_seconds`: woken, no Ready pod yet),
/// else awake when the controller lists the target (or `sleeping`: see
/// [`sleeping`]).
fn scale_to_zero(f: &Families, acc: &mut BTreeMap<Key, Acc>) {
    for s in f.of("gpuscale_scale_to_zero_parked") {
        let Some((ns, name)) = target(s) else {
            continue;
        };
        let a = acc.entry((ns.into(), name.into())).or_default();
        a.parked = Some(s.value > 0.0);
        a.state
            .get_or_insert(if s.value > 0.0 { "parked" } else { "awake" });
    }
    for s in f.of("gpuscale_scale_to_zero_waking_since_seconds") {
        if let Some((ns, name)) = target(s) {
            let a = acc.entry((ns.into(), name.into())).or_default();
            if a.parked != Some(true) {
                a.state = Some("waking");
            }
        }
    }
}

/// The pods the controller's sleep stage saw asleep
/// (`gpuscale_scale_to_zero_sleeping_pods`), where there are any.
fn sleeping(f: &Families, acc: &mut BTreeMap<Key, Acc>) {
    for s in f.of("gpuscale_scale_to_zero_sleeping_pods") {
        if let Some((ns, name)) = target(s)
            && s.value > 0.0
        {
            acc.entry((ns.into(), name.into())).or_default().sleeping = Some(s.value);
        }
    }
}

/// The recording rules' figures of each workload; a rule's cost per hour
/// (allocation shares, MIG slices) wins over the split made here.
fn rules(f: &Families, acc: &mut BTreeMap<Key, Acc>) {
    let key = |s: &crate::expo::Sample| {
        Some((
            s.label("namespace")?.to_string(),
            s.label("workload")?.to_string(),
        ))
    };
    for s in f.of("namespace_workload:gpu_bottleneck:sum") {
        if let (Some(k), Some(class)) = (key(s), s.label("bottleneck"))
            && let Some(a) = acc.get_mut(&k)
        {
            *a.bottleneck.entry(class.to_string()).or_default() += s.value;
        }
    }
    for s in f.of("namespace_workload:gpu_cost_usd_per_hour:sum") {
        if let Some(a) = key(s).and_then(|k| acc.get_mut(&k)) {
            a.rule_cost = Some(a.rule_cost.unwrap_or(0.0) + s.value);
        }
    }
    for s in f.of("namespace_workload:gpu_cost_usd_per_million_tokens:ratio") {
        if let Some(a) = key(s).and_then(|k| acc.get_mut(&k)) {
            a.cost_per_mtok = Some(s.value);
        }
    }
}

#[derive(Default)]
struct Acc {
    kind: Option<String>,
    pods: BTreeSet<String>,
    devices: usize,
    activity: Vec<f64>,
    cost: Option<f64>,
    cost_unknown: bool,
    rule_cost: Option<f64>,
    cost_per_mtok: Option<f64>,
    /// GPUs per bottleneck class.
    bottleneck: BTreeMap<String, f64>,
    parked: Option<bool>,
    state: Option<&'static str>,
    /// Pods asleep, when the controller says some are.
    sleeping: Option<f64>,
}

impl Acc {
    fn finish(self, namespace: String, workload: String) -> Workload {
        let state = self.state();
        // The class holding most of the workload's GPUs (ties: by name).
        let bottleneck = self
            .bottleneck
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(c, _)| c.clone());
        Workload {
            namespace,
            workload,
            kind: self.kind,
            pods: self.pods.len(),
            devices: self.devices,
            activity: (!self.activity.is_empty())
                .then(|| self.activity.iter().sum::<f64>() / self.activity.len() as f64),
            bottleneck,
            cost_usd_per_hour: self.rule_cost.or(self.cost.filter(|_| !self.cost_unknown)),
            cost_usd_per_million_tokens: self.cost_per_mtok,
            parked: self.parked,
            state,
        }
    }

    /// An awake workload with pods asleep is `sleeping`, or `sleeping n/m`
    /// when n of its m pods are.
    fn state(&self) -> Option<String> {
        let awake = self.state.is_none_or(|s| s == "awake");
        match self.sleeping.filter(|_| awake) {
            Some(n) if (n as usize) < self.pods.len() => {
                Some(format!("sleeping {n}/{}", self.pods.len()))
            }
            Some(_) => Some("sleeping".into()),
            None => self.state.map(str::to_string),
        }
    }
}

/// Adds one device's holders to their workloads; a shared device's price
/// is split evenly between its holders.
fn held(
    acc: &mut BTreeMap<Key, Acc>,
    holders: &[Holder],
    activity: Option<f64>,
    price: Option<f64>,
) {
    let mut seen = BTreeSet::new();
    for h in holders {
        let name = h.workload.clone().unwrap_or_else(|| h.pod.clone());
        let a = acc.entry((h.namespace.clone(), name.clone())).or_default();
        a.kind = a.kind.take().or(h.workload_kind.clone());
        a.pods.insert(h.pod.clone());
        match price {
            Some(p) => *a.cost.get_or_insert(0.0) += p / holders.len() as f64,
            None => a.cost_unknown = true,
        }
        if seen.insert(name) {
            a.devices += 1;
            if let Some(x) = activity.or(h.sm_utilization) {
                a.activity.push(x);
            }
        }
    }
}
