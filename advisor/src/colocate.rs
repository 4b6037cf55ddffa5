//! Co-location: small workloads that fit together on one GPU of their type
//! (time-slicing, or a MIG layout), and how many GPUs that frees.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::assess::{Assessment, Confidence, Recommendation};
use crate::bottleneck::Bottleneck;
use crate::recommend::smallest_profile;
use crate::tables::{GpuType, Tables};
use crate::thresholds as t;

/// Workloads that fit on one GPU.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub gpu_type: String,
    pub workloads: Vec<String>,
    /// Peak VRAM with headroom, summed (GiB), against the GPU's.
    pub memory_gib: f64,
    pub gpu_memory_gib: f64,
    /// p95 SM activity (or utilization) summed.
    pub activity: f64,
    /// A MIG layout holding each member in its smallest profile, if one fits.
    pub mig_layout: Option<Vec<String>>,
    pub gpus_freed: u32,
    pub saving_usd_per_month: f64,
}

struct Item {
    index: usize,
    memory: f64,
    activity: f64,
    price: f64,
}

fn candidate(a: &Assessment) -> Option<(String, Item)> {
    if a.confidence == Confidence::Insufficient || a.whole_gpus != Some(1) {
        return None;
    }
    if !matches!(
        a.bottleneck,
        Bottleneck::Idle | Bottleneck::Balanced | Bottleneck::HostInput | Bottleneck::NoGpm
    ) {
        return None;
    }
    Some((
        a.gpu_type.clone()?,
        Item {
            index: 0,
            memory: a.vram_peak_gib? * t::MEMORY_HEADROOM,
            activity: a.sm_active_p95.or(a.utilization_p95)?,
            price: a.price_usd_per_hour?,
        },
    ))
}

/// First-fit decreasing by memory, per GPU type; groups of two or more are
/// recommended (to every member) and returned.
pub fn plan(tables: &Tables, all: &mut [Assessment]) -> Vec<Group> {
    let mut by_type: BTreeMap<String, Vec<Item>> = BTreeMap::new();
    for (i, a) in all.iter().enumerate() {
        if let Some((ty, mut item)) = candidate(a) {
            item.index = i;
            by_type.entry(ty).or_default().push(item);
        }
    }
    let mut groups = Vec::new();
    for (ty, mut items) in by_type {
        let Some(gpu) = tables.gpus.gpus.iter().find(|g| g.name == ty) else {
            continue;
        };
        items.sort_by(|a, b| b.memory.total_cmp(&a.memory));
        let mut bins: Vec<Vec<Item>> = Vec::new();
        for it in items {
            let fits = |b: &Vec<Item>| {
                b.iter().map(|x| x.memory).sum::<f64>() + it.memory <= gpu.memory_gib
                    && b.iter().map(|x| x.activity).sum::<f64>() + it.activity
                        <= t::ACTIVITY_CEILING
            };
            match bins.iter_mut().find(|b| fits(b)) {
                Some(b) => b.push(it),
                None => bins.push(vec![it]),
            }
        }
        for bin in bins.into_iter().filter(|b| b.len() > 1) {
            groups.push(group(tables, gpu, &bin, all));
        }
    }
    groups
}

/// One bin of two or more: its group, recommended to each member.
fn group(tables: &Tables, gpu: &GpuType, bin: &[Item], all: &mut [Assessment]) -> Group {
    let ty = gpu.name.clone();
    let names: Vec<String> = bin
        .iter()
        .map(|x| all[x.index].workload.to_string())
        .collect();
    let layout: Option<Vec<String>> = bin
        .iter()
        .map(|x| {
            let a = &all[x.index];
            smallest_profile(tables, gpu, a.vram_peak_gib?, x.activity, a.dram_active_p95)
        })
        .collect::<Option<Vec<_>>>()
        .filter(|ps| {
            ps.iter().map(|p| p.compute_slices).sum::<u32>() <= 7
                && ps.iter().map(|p| p.memory_eighths).sum::<u32>() <= 8
        })
        .map(|ps| ps.iter().map(|p| p.profile.clone()).collect());
    // Keep the most expensive GPU; the others are freed.
    let mut prices: Vec<f64> = bin.iter().map(|x| x.price).collect();
    prices.sort_by(|a, b| b.total_cmp(a));
    let saving = prices.iter().skip(1).sum::<f64>() * t::HOURS_PER_MONTH;
    let g = Group {
        gpu_type: ty.clone(),
        memory_gib: bin.iter().map(|x| x.memory).sum(),
        gpu_memory_gib: gpu.memory_gib,
        activity: bin.iter().map(|x| x.activity).sum(),
        mig_layout: layout,
        gpus_freed: bin.len() as u32 - 1,
        saving_usd_per_month: saving,
        workloads: names,
    };
    let how = match &g.mig_layout {
        Some(l) => format!("time-slicing, or MIG {}", l.join(" + ")),
        None => "time-slicing".into(),
    };
    for x in bin {
        let a = &mut all[x.index];
        let me = a.workload.to_string();
        let others: Vec<&str> = g
            .workloads
            .iter()
            .filter(|w| **w != me)
            .map(String::as_str)
            .collect();
        a.recommendations.push(Recommendation {
            kind: "colocate",
            action: format!(
                "share one {ty} with {} ({how}); frees {} GPU(s)",
                others.join(", "),
                g.gpus_freed
            ),
            why: format!(
                "together {:.1} of {:.1} GiB with headroom, activity p95 summed {:.0} % ≤ {:.0} %",
                g.memory_gib,
                g.gpu_memory_gib,
                g.activity * 100.0,
                t::ACTIVITY_CEILING * 100.0
            ),
            saving_usd_per_month: g.saving_usd_per_month / bin.len() as f64,
            check: None,
        });
    }
    g
}
