//! The placement plan: small workloads that can share one GPU, only within
//! one cluster, one node pool and one tier; time-sliced (never production
//! unless opted in) when their utilization p95 sum stays under the ceiling
//! and their memory needs fit, or as MIG instances in a valid layout. The
//! GPU they share may be any type of the table (docs/right-sizing.md,
//! "Placement plan").

use std::collections::BTreeMap;

use serde::Serialize;

use crate::assess::{Assessment, Confidence, Recommendation, dram_or_duty};
use crate::bottleneck::Bottleneck;
use crate::policy::Policy;
use crate::recommend::smallest_profile;
use crate::tables::{GpuType, MigProfile, Tables, mig_layout};
use crate::thresholds as t;
use crate::vllm;

/// Workloads that share one GPU.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub cluster: String,
    pub node_pool: Option<String>,
    pub tier: String,
    pub gpu_type: String,
    /// `time_slicing` or `mig`.
    pub sharing: &'static str,
    pub workloads: Vec<String>,
    /// Memory needs × headroom, summed (GiB), against the GPU's.
    pub memory_gib: f64,
    pub gpu_memory_gib: f64,
    /// Utilization p95 summed, scaled to the GPU's bandwidth.
    pub utilization: f64,
    /// Each member's MIG instance and its first memory slice, in member
    /// order, where a valid layout exists.
    pub mig_layout: Option<Vec<String>>,
    /// What the members' GPUs cost now, and the shared GPU (USD/h).
    pub cost_now_usd_per_hour: f64,
    pub price_usd_per_hour: f64,
    pub gpus_freed: u32,
    pub saving_usd_per_month: f64,
    /// What the members' own advice would save instead.
    pub alone_saving_usd_per_month: f64,
    pub why: String,
    /// A cheaper GPU type for the group that the cluster has no node of:
    /// conditional on adding one, never in the totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub if_added: Option<Alternative>,
}

/// The group on a type the cluster has no node of.
#[derive(Debug, Clone, Serialize)]
pub struct Alternative {
    pub gpu_type: String,
    pub sharing: &'static str,
    pub price_usd_per_hour: f64,
    pub saving_usd_per_month: f64,
    /// What it needs that the advisor did not see.
    pub needs: String,
}

struct Item {
    index: usize,
    memory: f64,
    need: f64,
    util: f64,
    sm: f64,
    dram: Option<f64>,
    bandwidth: f64,
    needs_fp8: bool,
    price: f64,
    /// Its cost per hour after its own type advice (a MIG slice alone
    /// still holds a GPU: it is no saving until the GPU is shared).
    alone: f64,
}

fn candidate(tables: &Tables, a: &Assessment) -> Option<Item> {
    if a.confidence == Confidence::Insufficient || a.whole_gpus != Some(1) || a.too_small {
        return None;
    }
    if !matches!(
        a.bottleneck,
        Bottleneck::Idle
            | Bottleneck::Balanced
            | Bottleneck::HostInput
            | Bottleneck::NoGpm
            | Bottleneck::BalancedProxy
            | Bottleneck::HostInputProxy
    ) {
        return None;
    }
    let cur = tables.gpu(a.model.as_deref()?)?;
    let price = a.price_usd_per_hour?;
    let own = a
        .recommendations
        .iter()
        .filter(|r| r.kind == "gpu_type" && r.needs.is_none())
        .map(|r| r.saving_usd_per_month)
        .fold(0.0, f64::max);
    let util = a.utilization_p95.or(a.sm_active_p95)?;
    Some(Item {
        index: 0,
        memory: a.memory_need_gib? * t::MEMORY_HEADROOM,
        need: a.memory_need_gib?,
        util,
        sm: a.sm_active_p95.unwrap_or(util),
        dram: dram_or_duty(a),
        bandwidth: cur.bandwidth_gbps,
        needs_fp8: cur.fp8 && a.tensor_active_p95.is_none_or(|x| x >= t::FP8_TENSOR),
        price,
        alone: price - own / t::HOURS_PER_MONTH,
    })
}

/// How members fit on one GPU of type `c`.
struct Fit<'a> {
    sharing: &'static str,
    profiles: Option<Vec<&'a MigProfile>>,
    layout: Option<Vec<u32>>,
    utilization: f64,
}

/// Slower GPUs take longer for the same work: activity scales with the
/// bandwidth ratio (the decode-speed estimate), never down.
fn slow(x: &Item, c: &GpuType) -> f64 {
    (x.bandwidth / c.bandwidth_gbps).max(1.0)
}

fn mig_fit<'a>(
    tables: &'a Tables,
    c: &GpuType,
    ms: &[&Item],
) -> Option<(Vec<&'a MigProfile>, Vec<u32>)> {
    let profiles: Vec<&MigProfile> = ms
        .iter()
        .map(|x| {
            let dram = x.dram.map(|d| d * x.bandwidth / c.bandwidth_gbps);
            smallest_profile(tables, c, x.need, x.sm * slow(x, c), dram)
        })
        .collect::<Option<_>>()?;
    let layout = mig_layout(&profiles)?;
    Some((profiles, layout))
}

fn fit<'a>(tables: &'a Tables, c: &GpuType, ms: &[&Item], time_slice: bool) -> Option<Fit<'a>> {
    if ms.iter().any(|x| x.needs_fp8) && !c.fp8 {
        return None;
    }
    let utilization: f64 = ms.iter().map(|x| x.util * slow(x, c)).sum();
    let mig = mig_fit(tables, c, ms);
    let dram: f64 = ms
        .iter()
        .filter_map(|x| x.dram.map(|d| d * x.bandwidth))
        .sum();
    let sliced = time_slice
        && ms.iter().map(|x| x.memory).sum::<f64>() <= c.memory_gib
        && utilization <= t::ACTIVITY_CEILING
        && dram <= t::ACTIVITY_CEILING * c.bandwidth_gbps;
    let (profiles, layout) = match mig {
        Some((p, l)) => (Some(p), Some(l)),
        None => (None, None),
    };
    match (sliced, &layout) {
        (true, _) => Some(Fit {
            sharing: "time_slicing",
            profiles,
            layout,
            utilization,
        }),
        (false, Some(_)) => Some(Fit {
            sharing: "mig",
            profiles,
            layout,
            utilization,
        }),
        (false, None) => None,
    }
}

/// Which types a group may go to: those of its cluster, or any.
type There<'a> = &'a dyn Fn(&GpuType) -> bool;

/// The cheapest type of the table the members fit on, of those `there`.
fn cheapest<'a>(
    tables: &'a Tables,
    ms: &[&Item],
    time_slice: bool,
    there: There,
) -> Option<(&'a GpuType, Fit<'a>)> {
    let mut types: Vec<&GpuType> = tables.gpus.gpus.iter().filter(|c| there(c)).collect();
    types.sort_by(|a, b| a.price_usd_per_hour.total_cmp(&b.price_usd_per_hour));
    types
        .into_iter()
        .find_map(|c| fit(tables, c, ms, time_slice).map(|f| (c, f)))
}

struct Bin {
    members: Vec<usize>,
    /// USD/h: the member's own cost alone, else the shared GPU's price.
    cost: f64,
}

/// First-fit decreasing by memory: an item joins the bin it adds least
/// cost to, and only if that is less than it costs alone.
fn pack(tables: &Tables, items: &[Item], time_slice: bool, there: There) -> Vec<Bin> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|a, b| items[*b].memory.total_cmp(&items[*a].memory));
    let mut bins: Vec<Bin> = Vec::new();
    for i in order {
        let it = &items[i];
        let mut best: Option<(usize, f64)> = None;
        for (b, bin) in bins.iter().enumerate() {
            let ms: Vec<&Item> = bin.members.iter().map(|m| &items[*m]).chain([it]).collect();
            if let Some((c, _)) = cheapest(tables, &ms, time_slice, there) {
                let add = c.price_usd_per_hour - bin.cost;
                if add < it.alone - 1e-9 && best.is_none_or(|(_, a)| add < a) {
                    best = Some((b, c.price_usd_per_hour));
                }
            }
        }
        match best {
            Some((b, price)) => {
                bins[b].members.push(i);
                bins[b].cost = price;
            }
            None => bins.push(Bin {
                members: vec![i],
                cost: it.alone,
            }),
        }
    }
    bins
}

/// The groups of two or more, each recommended to its members, who keep
/// their own advice beside it.
pub fn plan(tables: &Tables, policy: &Policy, all: &mut [Assessment]) -> Vec<Group> {
    let mut parts: BTreeMap<(String, Option<String>, String), Vec<Item>> = BTreeMap::new();
    for (i, a) in all.iter().enumerate() {
        if let Some(mut item) = candidate(tables, a) {
            item.index = i;
            let key = (
                a.workload.cluster.clone(),
                a.node_pool.clone(),
                a.tier.clone(),
            );
            parts.entry(key).or_default().push(item);
        }
    }
    let mut groups = Vec::new();
    for ((cluster, pool, tier), items) in parts {
        let time_slice = policy.may_time_slice(&tier);
        // Packing uses the types the cluster has nodes of; a cheaper one
        // it has none of is shown beside the group, conditional.
        let here = |c: &GpuType| tables.sites.needs(&cluster, &c.name).is_none();
        for bin in pack(tables, &items, time_slice, &here) {
            if bin.members.len() < 2 {
                continue;
            }
            let ms: Vec<&Item> = bin.members.iter().map(|m| &items[*m]).collect();
            if let Some((c, f)) = cheapest(tables, &ms, time_slice, &here) {
                let mut g = group(all, &ms, c, &f, (&cluster, &pool, &tier));
                g.if_added = cheapest(tables, &ms, time_slice, &|_| true)
                    .filter(|(o, _)| o.price_usd_per_hour < c.price_usd_per_hour)
                    .and_then(|(o, of)| {
                        Some(Alternative {
                            gpu_type: o.name.clone(),
                            sharing: of.sharing,
                            price_usd_per_hour: o.price_usd_per_hour,
                            saving_usd_per_month: (g.cost_now_usd_per_hour - o.price_usd_per_hour)
                                * t::HOURS_PER_MONTH,
                            needs: tables.sites.needs(&cluster, &o.name)?,
                        })
                    });
                recommend(all, &ms, c, &f, &g, groups.len());
                groups.push(g);
            }
        }
    }
    groups
}

fn group(
    all: &[Assessment],
    ms: &[&Item],
    c: &GpuType,
    f: &Fit,
    at: (&String, &Option<String>, &String),
) -> Group {
    let names: Vec<String> = ms
        .iter()
        .map(|x| all[x.index].workload.to_string())
        .collect();
    let now: f64 = ms.iter().map(|x| x.price).sum();
    let alone: f64 = ms.iter().map(|x| x.price - x.alone).sum();
    let layout = f.profiles.as_ref().zip(f.layout.as_ref()).map(|(p, l)| {
        p.iter()
            .zip(l)
            .map(|(p, s)| format!("{}@{s}", p.profile))
            .collect::<Vec<_>>()
    });
    let memory: f64 = ms.iter().map(|x| x.memory).sum();
    let why = match f.sharing {
        "time_slicing" => format!(
            "time-sliced: memory needs x {} sum to {memory:.1} of {:.1} GiB; utilization p95 sums to {:.0} % <= {:.0} % (scaled to its bandwidth)",
            t::MEMORY_HEADROOM,
            c.memory_gib,
            f.utilization * 100.0,
            t::ACTIVITY_CEILING * 100.0
        ),
        _ => format!(
            "MIG: tier {} is not time-sliced; each member in its smallest slice, a valid layout",
            at.2
        ),
    };
    Group {
        cluster: at.0.clone(),
        node_pool: at.1.clone(),
        tier: at.2.clone(),
        gpu_type: c.name.clone(),
        sharing: f.sharing,
        workloads: names,
        memory_gib: memory,
        gpu_memory_gib: c.memory_gib,
        utilization: f.utilization,
        mig_layout: layout,
        cost_now_usd_per_hour: now,
        price_usd_per_hour: c.price_usd_per_hour,
        gpus_freed: ms.len() as u32 - 1,
        saving_usd_per_month: (now - c.price_usd_per_hour) * t::HOURS_PER_MONTH,
        alone_saving_usd_per_month: alone * t::HOURS_PER_MONTH,
        why,
        if_added: None,
    }
}

fn recommend(all: &mut [Assessment], ms: &[&Item], c: &GpuType, f: &Fit, g: &Group, gi: usize) {
    for (k, x) in ms.iter().enumerate() {
        let a = &mut all[x.index];
        let me = a.workload.to_string();
        let others: Vec<&str> = g
            .workloads
            .iter()
            .filter(|w| **w != me)
            .map(String::as_str)
            .collect();
        let slice = f.profiles.as_ref().map(|p| p[k]);
        let settings = a.vllm.as_ref().map(|v| match (f.sharing, slice) {
            ("mig", Some(p)) => vllm::flags(v, p.memory_gib, 1.0),
            _ => vllm::flags(
                v,
                c.memory_gib,
                x.memory / (c.memory_gib * v.gpu_memory_utilization),
            ),
        });
        let how = match (f.sharing, slice) {
            ("mig", Some(p)) => format!("as MIG {}", p.profile),
            _ => "time-sliced".to_string(),
        };
        a.recommendations.push(Recommendation {
            kind: "colocate",
            action: format!(
                "group {}: share one {} with {} ({how})",
                gi + 1,
                c.name,
                others.join(", ")
            ),
            why: g.why.clone(),
            saving_usd_per_month: 0.0,
            settings,
            group: Some(gi),
            check: None,
            needs: None,
        });
    }
}
