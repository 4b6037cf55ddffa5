//! The samples as the views show them: GPUs with their MIG instances and
//! holders, and the workloads that hold them. A value no series gave is
//! `None` (shown as `-`), never 0.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::expo::Sample;

mod workloads;

#[derive(Debug, Serialize)]
pub struct Snapshot {
    pub source: String,
    pub gpus: Vec<Gpu>,
    pub workloads: Vec<Workload>,
    /// Families the source served no series of.
    pub missing: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Gpu {
    pub node: String,
    pub gpu: String,
    pub uuid: String,
    pub model: Option<String>,
    pub utilization: Option<f64>,
    pub sm_active: Option<f64>,
    pub tensor_active: Option<f64>,
    pub dram_active: Option<f64>,
    /// Where the SM/tensor/DRAM activity comes from (`gpu_activity_source_info`:
    /// `gpm`, `dcgm`, `none`).
    pub activity_source: Option<String>,
    pub memory_used_bytes: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    pub power_watts: Option<f64>,
    pub power_limit_watts: Option<f64>,
    pub temperature_celsius: Option<f64>,
    pub throttle: Vec<String>,
    pub ecc_uncorrected: Option<f64>,
    pub xid: Vec<String>,
    pub price_usd_per_hour: Option<f64>,
    pub holders: Vec<Holder>,
    pub mig: Vec<Mig>,
}

#[derive(Debug, Default, Serialize)]
pub struct Mig {
    pub mig_uuid: String,
    pub gpu_instance_id: Option<String>,
    pub profile: Option<String>,
    pub memory_used_bytes: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    pub sm_active: Option<f64>,
    pub holders: Vec<Holder>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Holder {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
    pub workload: Option<String>,
    pub workload_kind: Option<String>,
    pub memory_used_bytes: Option<f64>,
    pub sm_utilization: Option<f64>,
    /// This holder's part of the device's VRAM in use, on a shared device.
    pub memory_share: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Workload {
    pub namespace: String,
    pub workload: String,
    pub kind: Option<String>,
    pub pods: usize,
    /// GPUs and MIG instances held, each counted once.
    pub devices: usize,
    /// Mean SM (or GPU) utilization over the devices held.
    pub activity: Option<f64>,
    /// The class of `namespace_workload:gpu_bottleneck:sum` holding most
    /// of the workload's GPUs.
    pub bottleneck: Option<String>,
    pub cost_usd_per_hour: Option<f64>,
    pub cost_usd_per_million_tokens: Option<f64>,
    pub parked: Option<bool>,
    /// Scale to zero: `parked`, `waking`, `sleeping` (`sleeping n/m`: n of
    /// its m pods asleep) or `awake`; `None` where no
    /// controller acts on the workload (or none is scraped).
    pub state: Option<String>,
}

/// What to keep.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub node: Option<String>,
    pub node_pool: Option<String>,
    pub namespace: Option<String>,
}

/// Samples by family.
struct Families<'a>(BTreeMap<&'a str, Vec<&'a Sample>>);

impl<'a> Families<'a> {
    fn of(&self, name: &str) -> &[&'a Sample] {
        self.0.get(name).map_or(&[], Vec::as_slice)
    }

    /// The value of `name` for the device (or MIG instance) `key`.
    fn value(&self, name: &str, uuid: &str, mig: Option<&str>) -> Option<f64> {
        self.of(name)
            .iter()
            .find(|s| s.label("uuid") == Some(uuid) && s.label("mig_uuid") == mig)
            .map(|s| s.value)
    }
}

/// Builds the views of `samples` read from `source`, which serves
/// `families` (those it served no series of are `missing`).
pub fn build(source: &str, families: &[&str], samples: &[Sample], filter: &Filter) -> Snapshot {
    let mut by: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by.entry(s.name.as_str()).or_default().push(s);
    }
    let f = Families(by);
    let missing = families
        .iter()
        .filter(|n| f.of(n).is_empty())
        .map(|n| (*n).to_string())
        .collect();
    let pools = node_pools(&f);
    let mut gpus: Vec<Gpu> = devices(&f)
        .into_iter()
        .map(|(node, gpu, uuid)| device(&f, node, gpu, uuid))
        .filter(|g| keep(g, filter, &pools))
        .collect();
    gpus.sort_by(|a, b| (&a.node, index(&a.gpu)).cmp(&(&b.node, index(&b.gpu))));
    let workloads = workloads::workloads(&f, &gpus, filter);
    Snapshot {
        source: source.to_string(),
        gpus,
        workloads,
        missing,
    }
}

fn index(gpu: &str) -> (usize, &str) {
    (gpu.parse().unwrap_or(usize::MAX), gpu)
}

fn node_pools(f: &Families) -> BTreeMap<String, String> {
    f.of("gpu_node_info")
        .iter()
        .filter_map(|s| Some((s.label("node")?.into(), s.label("node_pool")?.into())))
        .collect()
}

fn keep(g: &Gpu, filter: &Filter, pools: &BTreeMap<String, String>) -> bool {
    let node = filter.node.as_ref().is_none_or(|n| *n == g.node);
    let pool = filter
        .node_pool
        .as_ref()
        .is_none_or(|p| pools.get(&g.node) == Some(p));
    let ns = filter.namespace.as_ref().is_none_or(|ns| {
        let held = |h: &Holder| h.namespace == *ns;
        g.holders.iter().any(held) || g.mig.iter().any(|m| m.holders.iter().any(held))
    });
    node && pool && ns
}

/// Every (node, gpu, uuid) any device family names.
fn devices<'a>(f: &Families<'a>) -> BTreeSet<(&'a str, &'a str, &'a str)> {
    let names = [
        "gpu_info",
        "gpu_memory_total_bytes",
        "gpu_utilization_ratio",
    ];
    names
        .iter()
        .flat_map(|n| f.of(n).iter())
        .filter_map(|s| Some((s.label("node")?, s.label("gpu")?, s.label("uuid")?)))
        .collect()
}

fn device(f: &Families, node: &str, gpu: &str, uuid: &str) -> Gpu {
    let v = |name: &str| f.value(name, uuid, None);
    let on = |s: &&&Sample| s.label("uuid") == Some(uuid);
    let info = f.of("gpu_info").iter().find(on);
    let throttle = f
        .of("gpu_clock_event_active")
        .iter()
        .filter(|s| on(s) && s.value > 0.0)
        .filter_map(|s| s.label("reason"))
        .filter(|r| *r != "gpu_idle")
        .map(str::to_string)
        .collect();
    let ecc =
        f.of("gpu_ecc_errors_total").iter().filter(on).filter(|s| {
            s.label("type") == Some("uncorrected") && s.label("scope") == Some("volatile")
        });
    let xid = f
        .of("gpu_xid_errors_total")
        .iter()
        .filter(|s| on(s) && s.value > 0.0)
        .filter_map(|s| s.label("xid"))
        .map(str::to_string)
        .collect();
    Gpu {
        node: node.into(),
        gpu: gpu.into(),
        uuid: uuid.into(),
        model: info.and_then(|s| s.label("model")).map(str::to_string),
        utilization: v("gpu_utilization_ratio"),
        sm_active: v("gpu_sm_active_ratio"),
        tensor_active: v("gpu_tensor_active_ratio"),
        dram_active: v("gpu_dram_active_ratio"),
        activity_source: f
            .of("gpu_activity_source_info")
            .iter()
            .find(on)
            .and_then(|s| s.label("source"))
            .map(str::to_string),
        memory_used_bytes: v("gpu_memory_used_bytes"),
        memory_total_bytes: v("gpu_memory_total_bytes"),
        power_watts: v("gpu_power_usage_watts"),
        power_limit_watts: v("gpu_power_limit_watts"),
        temperature_celsius: v("gpu_temperature_celsius"),
        throttle,
        ecc_uncorrected: ecc.map(|s| s.value).reduce(f64::max),
        xid,
        price_usd_per_hour: v("gpu_price_usd_per_hour"),
        holders: holders(f, uuid, None),
        mig: migs(f, uuid),
    }
}

fn migs(f: &Families, uuid: &str) -> Vec<Mig> {
    let mut out: Vec<Mig> = f
        .of("gpu_mig_info")
        .iter()
        .filter(|s| s.label("uuid") == Some(uuid))
        .filter_map(|s| {
            let mig = s.label("mig_uuid")?;
            let v = |name: &str| f.value(name, uuid, Some(mig));
            Some(Mig {
                mig_uuid: mig.into(),
                gpu_instance_id: s.label("gpu_instance_id").map(str::to_string),
                profile: s.label("profile").map(str::to_string),
                memory_used_bytes: v("gpu_mig_memory_used_bytes"),
                memory_total_bytes: v("gpu_mig_memory_total_bytes"),
                sm_active: v("gpu_mig_sm_active_ratio"),
                holders: holders(f, uuid, Some(mig)),
            })
        })
        .collect();
    let gi = |m: &Mig| {
        m.gpu_instance_id
            .as_deref()
            .map_or(usize::MAX, |g| index(g).0)
    };
    out.sort_by_key(gi);
    out
}

/// The pods holding the device: allocations (kubelet) and pods with
/// memory on it (processes), each pod once.
fn holders(f: &Families, uuid: &str, mig: Option<&str>) -> Vec<Holder> {
    let here = |s: &&&Sample| s.label("uuid") == Some(uuid) && s.label("mig_uuid") == mig;
    let mut out: BTreeMap<(String, String), Holder> = BTreeMap::new();
    for name in ["gpu_pod_allocation", "gpu_pod_memory_used_bytes"] {
        for s in f.of(name).iter().filter(here) {
            let (Some(ns), Some(pod)) = (s.label("namespace"), s.label("pod")) else {
                continue;
            };
            let h = out
                .entry((ns.into(), pod.into()))
                .or_insert_with(|| Holder {
                    namespace: ns.into(),
                    pod: pod.into(),
                    container: None,
                    workload: s.label("workload").map(str::to_string),
                    workload_kind: s.label("workload_kind").map(str::to_string),
                    memory_used_bytes: None,
                    sm_utilization: None,
                    memory_share: None,
                });
            h.container = h
                .container
                .take()
                .or(s.label("container").map(str::to_string));
        }
    }
    let of = |name: &str, h: &Holder| {
        f.of(name)
            .iter()
            .filter(here)
            .find(|s| s.label("namespace") == Some(&h.namespace) && s.label("pod") == Some(&h.pod))
            .map(|s| s.value)
    };
    let mut list: Vec<Holder> = out.into_values().collect();
    for h in &mut list {
        h.memory_used_bytes = of("gpu_pod_memory_used_bytes", h);
        h.sm_utilization = of("gpu_pod_sm_utilization_ratio", h);
    }
    if list.len() > 1 {
        let total: f64 = list.iter().filter_map(|h| h.memory_used_bytes).sum();
        for h in &mut list {
            h.memory_share = h
                .memory_used_bytes
                .filter(|_| total > 0.0)
                .map(|m| m / total);
        }
    }
    list
}
