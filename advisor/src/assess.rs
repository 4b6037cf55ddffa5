//! One workload's facts turned into what the report shows: its devices,
//! bottleneck, cost, cost per unit of work and how far to trust it.

use serde::Serialize;

use crate::bottleneck::{self, Activity, Bottleneck};
use crate::history::{DeviceId, Facts, History, Key};
use crate::policy::Policy;
use crate::tables::{GpuType, Tables};
use crate::thresholds as t;
use crate::vllm::{self, Vllm};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// How far the history lets the advisor go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Under a day seen: no recommendation.
    Insufficient,
    /// A day to a week.
    Medium,
    /// A week or more.
    High,
}

/// One thing to change and what it saves.
#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    /// `mig`, `gpu_type`, `colocate`, `scale_to_zero` or `too_small`.
    pub kind: &'static str,
    pub action: String,
    pub why: String,
    /// Negative for `too_small`: what the move costs more.
    pub saving_usd_per_month: f64,
    /// How to run it there (vLLM flags), where that matters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The co-location group (index in the report's `colocation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
    /// A command that checks it first, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// What it needs that the advisor did not see (a node pool of the
    /// type it moves to): its saving is then not counted in the totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<String>,
}

/// What the report says of one workload.
#[derive(Debug, Clone, Serialize)]
pub struct Assessment {
    pub workload: Key,
    /// Its tier and where the tier came from (docs/right-sizing.md, "Tiers").
    pub tier: String,
    pub tier_source: String,
    /// `gpu_node_info{node_pool}` of its node, if known.
    pub node_pool: Option<String>,
    /// GPUs it holds now (MIG instances and time-sliced GPUs as fractions).
    pub gpus_now: f64,
    pub devices_now: usize,
    pub model: Option<String>,
    pub mig_profile: Option<String>,
    /// The GPU type in the spec table, if known.
    pub gpu_type: Option<String>,
    pub history_hours: f64,
    /// Hours its serving counters were scraped without the exporter's
    /// series (0: none; its cost per unit is over the covered hours).
    pub exporter_gap_hours: f64,
    pub confidence: Confidence,
    pub vram_peak_gib: Option<f64>,
    pub vram_p99_gib: Option<f64>,
    /// Memory of the device or slice it holds (the smallest, if several).
    pub device_memory_gib: Option<f64>,
    /// What the advice sizes for, per GPU: the peak, or for vLLM its
    /// weights and the KV cache it uses (`vllm`).
    pub memory_need_gib: Option<f64>,
    /// vLLM's preallocation seen through, if it serves vLLM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vllm: Option<Vllm>,
    /// vLLM KV-cache use p99 (0-1) and preemptions over the range.
    pub kv_usage_p99: Option<f64>,
    pub preemptions: Option<f64>,
    /// vLLM requests waiting p95 (the busiest pod).
    pub requests_waiting_p95: Option<f64>,
    /// Its serving queue on the range's first and last day.
    pub queue: Option<crate::history::Queue>,
    /// Judged too small (a `too_small` recommendation says what to).
    pub too_small: bool,
    pub sm_active_p95: Option<f64>,
    pub tensor_active_p95: Option<f64>,
    pub dram_active_p95: Option<f64>,
    pub utilization_p95: Option<f64>,
    /// NVML proxies, p95 (whole GPUs without GPM or DCGM use them).
    pub memory_duty_p95: Option<f64>,
    pub power_of_limit_p95: Option<f64>,
    pub pcie_bytes_per_second_p95: Option<f64>,
    pub bottleneck: Bottleneck,
    pub bottleneck_reason: String,
    pub cost_usd_per_hour: Option<f64>,
    /// GPU cost over the range (time-sliced GPUs split between pods).
    pub cost_usd_range: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub generated_tokens: Option<f64>,
    pub requests: Option<f64>,
    /// Its serving framework's request counter, if it has one.
    pub request_series: Option<&'static str>,
    pub cost_usd_per_million_tokens: Option<f64>,
    pub cost_usd_per_1k_requests: Option<f64>,
    pub idle_hours_per_day: Option<f64>,
    pub recommendations: Vec<Recommendation>,
    pub notes: Vec<String>,
    /// Whole GPUs of one model, not shared: what MIG, type and
    /// co-location recommendations need.
    #[serde(skip)]
    pub whole_gpus: Option<u32>,
    #[serde(skip)]
    pub price_usd_per_hour: Option<f64>,
}

/// A device's fraction of its GPU: 1 whole, compute slices over 7 (4 on
/// an A30 or RTX PRO 6000) for a MIG instance, as the cost recording
/// rules charge it; its memory share when the profile is unknown.
pub fn gpu_share(h: &History, id: &DeviceId) -> Option<f64> {
    if id.mig_uuid.is_empty() {
        return Some(1.0);
    }
    let d = h.devices.get(id)?;
    let slices = d
        .profile
        .as_deref()
        .and_then(|p| p.rsplit_once("c.").map_or(Some(p), |(_, gi)| Some(gi)))
        .and_then(|gi| gi.split_once('g').and_then(|(n, _)| n.parse::<f64>().ok()));
    let of = if d
        .model
        .as_deref()
        .is_some_and(|m| m.contains("A30") || m.contains("RTX PRO 6000"))
    {
        4.0
    } else {
        7.0
    };
    match slices {
        Some(s) => Some(s / of),
        None => Some(d.memory_bytes? / d.gpu_memory_bytes?),
    }
}

/// A device's price per GPU-hour: the exporter's, else the table's; none
/// when the exporter's was refused (a broken price is not a list price).
fn price(h: &History, tables: &Tables, id: &DeviceId) -> Option<f64> {
    let d = h.devices.get(id)?;
    if d.price_refused {
        return None;
    }
    d.price_usd_per_hour.or_else(|| {
        tables
            .gpu(d.model.as_deref()?)
            .map(|g| g.price_usd_per_hour)
    })
}

fn cost(h: &History, tables: &Tables, f: &Facts) -> (Option<f64>, Option<f64>) {
    let mut now = Some(0.0);
    for (id, own) in &f.devices_now {
        let c = gpu_share(h, id)
            .zip(price(h, tables, id))
            .map(|(s, p)| s * p * own);
        now = now.zip(c).map(|(a, b)| a + b);
    }
    let mut range = Some(0.0);
    for (id, hours) in &f.device_hours {
        let c = gpu_share(h, id)
            .zip(price(h, tables, id))
            .map(|(s, p)| s * p * hours);
        range = range.zip(c).map(|(a, b)| a + b);
    }
    (now, range.filter(|_| !f.device_hours.is_empty()))
}

fn confidence(h: &History, f: &Facts, notes: &mut Vec<String>) -> Confidence {
    let c = if f.seen_seconds < t::MIN_HISTORY_S {
        notes.push(format!(
            "seen {:.0} min of the {:.0} h range: under {:.0} h, no recommendation",
            f.seen_seconds / 60.0,
            h.range_s / 3600.0,
            t::MIN_HISTORY_S / 3600.0
        ));
        Confidence::Insufficient
    } else if f.seen_seconds < t::FULL_HISTORY_S {
        Confidence::Medium
    } else {
        Confidence::High
    };
    if f.exporter_gap_seconds > 0.0 && c == Confidence::High {
        return Confidence::Medium;
    }
    c
}

/// Says what an exporter gap did: the hours missing and what counting the
/// whole range's tokens would have done to cost per token.
/// A move, too: where it ran before its latest placement.
fn gap_note(f: &Facts, notes: &mut Vec<String>) {
    notes.extend(f.moved.clone());
    if f.exporter_gap_seconds <= 0.0 {
        return;
    }
    let covered = f.prompt_tokens.unwrap_or(0.0) + f.generated_tokens.unwrap_or(0.0);
    let effect = match f.tokens_whole_range {
        Some(whole) if whole > 0.0 => format!(
            "; the whole range's {:.1} M tokens over the covered cost would read {:.0} % lower",
            whole / 1e6,
            (1.0 - covered / whole) * 100.0
        ),
        _ => String::new(),
    };
    notes.push(format!(
        "no exporter data for {:.1} h while its serving counters were scraped: cost, tokens and activity are over the {:.1} h covered ({:.1} M tokens){effect}; confidence at most medium",
        f.exporter_gap_seconds / 3600.0,
        f.seen_seconds / 3600.0,
        covered / 1e6
    ));
}

/// Cost over the range per million tokens and per 1,000 requests.
fn unit_costs(cost_range: Option<f64>, f: &Facts) -> (Option<f64>, Option<f64>) {
    let tokens = match (f.prompt_tokens, f.generated_tokens) {
        (None, None) => None,
        (p, g) => Some(p.unwrap_or(0.0) + g.unwrap_or(0.0)),
    };
    let per = |work: Option<f64>, unit: f64| {
        cost_range
            .zip(work.filter(|w| *w > 0.0))
            .map(|(c, w)| c / w * unit)
    };
    (per(tokens, 1e6), per(f.requests, 1e3))
}

/// Unit costs, none when a counter of it was refused.
fn work_costs(
    cost_range: Option<f64>,
    f: &Facts,
    notes: &mut Vec<String>,
) -> (Option<f64>, Option<f64>) {
    if f.work_refused {
        notes
            .push("a token or request counter was refused (see excluded): no cost per unit".into());
        return (None, None);
    }
    unit_costs(cost_range, f)
}

/// Says where its price came from when it is not the exporter's.
fn price_notes(h: &History, f: &Facts, cost_now: Option<f64>, notes: &mut Vec<String>) {
    let devices = || f.devices_now.iter().filter_map(|(id, _)| h.devices.get(id));
    if devices().any(|d| d.price_refused) {
        notes.push(
            "its GPU's gpu_price_usd_per_hour was refused (see excluded): cost unknown, no saving"
                .into(),
        );
    } else if cost_now.is_none() {
        notes.push("no price for its GPU (no gpu_price_usd_per_hour, model not in the table): cost unknown".into());
    } else if devices().any(|d| d.price_usd_per_hour.is_none()) {
        notes.push(
            "no gpu_price_usd_per_hour for its GPU: the GPU table's list price is used".into(),
        );
    }
}

/// Why a TGI workload is sized by its peak: TGI fills what
/// `--cuda-memory-fraction` leaves with KV blocks at warm-up and publishes
/// no share of them in use.
const TGI_NOTE: &str = "TGI publishes no KV-cache use: tgi_batch_current_max_tokens is the running batch's token budget, not a share of its KV pool, whose size (--max-batch-total-tokens, found at warm-up) it does not export; sized by its peak, which is what it preallocated";

/// vLLM's (or SGLang's) need seen through (or why not), per GPU.
fn see_through(
    f: &Facts,
    device_gib: Option<f64>,
    peak_gib: Option<f64>,
    notes: &mut Vec<String>,
) -> Option<Vllm> {
    let Some(kv) = &f.kv else {
        if f.request_series == Some(crate::history::SERVING_COUNTERS[0].3) {
            notes.push("vLLM without vllm:gpu_cache_usage_perc or vllm:kv_cache_usage_perc: sized by its preallocation, not its need".into());
        }
        if f.request_series == Some("tgi_request_success") {
            notes.push(TGI_NOTE.into());
        }
        return None;
    };
    let gpus = f.devices_now.len().max(1) as u32;
    match vllm::see_through(kv, device_gib?, peak_gib?, gpus) {
        Ok(v) => {
            notes.push(format!(
                "{} reserves {:.1} GiB ({:.2} of the device); it needs {:.1} GiB: weights {:.1} GiB ({} B parameters x {} bytes, from model_name {:?}) + KV p99 {:.0} % of a {:.1} GiB pool",
                v.engine,
                v.reserved_gib,
                v.gpu_memory_utilization,
                v.need_gib,
                v.weights_gib,
                v.parameters_billion,
                v.bytes_per_parameter,
                v.served_model,
                v.kv_usage_p99 * 100.0,
                v.kv_pool_gib
            ));
            Some(v)
        }
        Err(why) => {
            notes.push(format!(
                "{}: {why}; sized by its preallocation, not its need",
                if kv.sglang { "SGLang" } else { "vLLM" }
            ));
            None
        }
    }
}

/// Its bottleneck; memory judged by `need` (vLLM's need, else the peak).
fn limit(f: &Facts, vllm: bool, need: Option<f64>, device: Option<f64>) -> (Bottleneck, String) {
    let (b, why) = bottleneck::classify(&Activity {
        utilization: f.utilization_p95,
        sm: f.sm_active_p95,
        tensor: f.tensor_active_p95,
        dram: f.dram_active_p95,
        memory_used: need.zip(device).map(|(v, m)| v * GIB / m),
        memory_duty: f.memory_duty_p95,
        power_of_limit: f.power_of_limit_p95,
        pcie_bytes_per_second: f.pcie_bytes_per_second_p95,
    });
    if vllm {
        (b, why.replace("peak VRAM", "its need (weights + KV p99)"))
    } else {
        (b, why)
    }
}

/// DRAM activity, or where there is none its NVML bound: the memory
/// controller's duty cycle counts any access in a sample, so it is at least
/// the DRAM activity.
pub fn dram_or_duty(a: &Assessment) -> Option<f64> {
    a.dram_active_p95.or(a.memory_duty_p95)
}

/// Whole GPUs of one model, not shared: how many.
fn whole_gpus(
    f: &Facts,
    devices: &[&crate::history::Device],
    model: &Option<String>,
) -> Option<u32> {
    let whole = f
        .devices_now
        .iter()
        .all(|(id, own)| id.mig_uuid.is_empty() && (own - 1.0).abs() < 1e-9)
        && devices.len() == f.devices_now.len()
        && devices.iter().all(|d| d.model == *model);
    whole
        .then_some(f.devices_now.len() as u32)
        .filter(|n| *n > 0)
}

/// Its tier and node pool.
fn placement(h: &History, p: &Policy, key: &Key, f: &Facts) -> (String, String, Option<String>) {
    let ns_label = h
        .namespace_tiers
        .get(&(key.cluster.clone(), key.namespace.clone()))
        .map(String::as_str);
    let (tier, source) = p.tier(&f.tiers, &key.namespace, ns_label);
    let pool = f
        .devices_now
        .iter()
        .find_map(|(id, _)| h.node_pool(&id.cluster, &id.node))
        .map(str::to_string);
    (tier, source, pool)
}

/// GPUs it holds now: MIG instances and time-sliced GPUs as fractions.
fn gpus_now(h: &History, f: &Facts) -> f64 {
    f.devices_now
        .iter()
        .map(|(id, own)| gpu_share(h, id).unwrap_or(0.0) * own)
        .sum()
}

/// The facts of one workload, judged.
pub fn assess(h: &History, tables: &Tables, policy: &Policy, key: &Key, f: &Facts) -> Assessment {
    let mut notes = Vec::new();
    let devices: Vec<_> = f
        .devices_now
        .iter()
        .filter_map(|(id, _)| h.devices.get(id))
        .collect();
    let model = devices.iter().find_map(|d| d.model.clone());
    let gpu: Option<&GpuType> = model.as_deref().and_then(|m| tables.gpu(m));
    if let (Some(m), None) = (&model, gpu) {
        notes.push(format!(
            "{m} is not in the GPU table: no type or MIG advice"
        ));
    }
    let device_memory = devices
        .iter()
        .filter_map(|d| d.memory_bytes)
        .reduce(f64::min);
    let (cost_now, cost_range) = cost(h, tables, f);
    price_notes(h, f, cost_now, &mut notes);
    let (per_mtok, per_1k) = work_costs(cost_range, f, &mut notes);
    let peak = f.vram_peak_bytes.map(|b| b / GIB);
    let v = see_through(f, device_memory.map(|b| b / GIB), peak, &mut notes);
    let need = v.as_ref().map(|v| v.need_gib).or(peak);
    let (bottleneck, bottleneck_reason) = limit(f, v.is_some(), need, device_memory);
    let confidence = confidence(h, f, &mut notes);
    gap_note(f, &mut notes);
    let whole = whole_gpus(f, &devices, &model);
    let (tier, tier_source, node_pool) = placement(h, policy, key, f);
    Assessment {
        workload: key.clone(),
        tier,
        tier_source,
        node_pool,
        gpus_now: gpus_now(h, f),
        devices_now: f.devices_now.len(),
        gpu_type: gpu.map(|g| g.name.clone()),
        mig_profile: devices.iter().find_map(|d| d.profile.clone()),
        model,
        history_hours: f.seen_seconds / 3600.0,
        exporter_gap_hours: f.exporter_gap_seconds / 3600.0,
        confidence,
        vram_peak_gib: peak,
        vram_p99_gib: f.vram_p99_bytes.map(|b| b / GIB),
        device_memory_gib: device_memory.map(|b| b / GIB),
        memory_need_gib: need,
        vllm: v,
        kv_usage_p99: f.kv.as_ref().and_then(|k| k.usage_p99),
        preemptions: f.kv.as_ref().and_then(|k| k.preemptions),
        requests_waiting_p95: f.kv.as_ref().and_then(|k| k.waiting_p95),
        queue: f.queue.clone(),
        too_small: false,
        sm_active_p95: f.sm_active_p95,
        tensor_active_p95: f.tensor_active_p95,
        dram_active_p95: f.dram_active_p95,
        utilization_p95: f.utilization_p95,
        memory_duty_p95: f.memory_duty_p95,
        power_of_limit_p95: f.power_of_limit_p95,
        pcie_bytes_per_second_p95: f.pcie_bytes_per_second_p95,
        bottleneck,
        bottleneck_reason,
        cost_usd_per_hour: cost_now,
        cost_usd_range: cost_range,
        prompt_tokens: f.prompt_tokens,
        generated_tokens: f.generated_tokens,
        requests: f.requests,
        request_series: f.request_series,
        cost_usd_per_million_tokens: per_mtok,
        cost_usd_per_1k_requests: per_1k,
        idle_hours_per_day: f.idle_fraction.map(|x| x * 24.0),
        recommendations: Vec::new(),
        notes,
        whole_gpus: whole,
        price_usd_per_hour: f
            .devices_now
            .first()
            .and_then(|(id, _)| price(h, tables, id)),
    }
}
