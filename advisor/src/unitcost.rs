//! Cost per unit of work decides the GPU type of a bandwidth-bound
//! (decode) workload: decode reads the weights and the KV cache for every
//! token, so its tokens per second scale with memory bandwidth. A
//! candidate is N GPUs of a type, each holding a replica, enough that the
//! workload's DRAM traffic stays under the ceiling on them; the cheapest
//! N × price for the same tokens wins (docs/right-sizing.md, "Decode").

use crate::assess::{Assessment, Recommendation, dram_or_duty};
use crate::tables::{GpuType, Tables};
use crate::thresholds as t;

/// More replicas than this are not proposed.
pub const MAX_REPLICAS: u32 = 8;

/// One way to serve its load: `n` GPUs of `gpu`.
pub struct Candidate<'a> {
    pub gpu: &'a GpuType,
    pub n: u32,
    pub usd_per_hour: f64,
}

/// What a workload does today that a candidate must carry: `amount` in
/// the unit of `per_gpu` (GB/s of DRAM traffic, TFLOPs of tensor work).
pub struct Load {
    pub amount: f64,
    /// What one GPU of a type gives; none: the type cannot be judged.
    pub per_gpu: fn(&GpuType) -> Option<f64>,
}

/// DRAM traffic: DRAM p95 (or the duty cycle, an upper bound) × today's
/// bandwidth × today's GPUs.
pub fn dram_load(a: &Assessment, cur: &GpuType, gpus: u32) -> Option<Load> {
    dram_or_duty(a).map(|d| Load {
        amount: d * cur.bandwidth_gbps * f64::from(gpus),
        per_gpu: |g| Some(g.bandwidth_gbps),
    })
}

/// FP8 kept where the workload runs on FP8 tensor cores today.
pub fn fp8_needed(a: &Assessment, cur: &GpuType) -> bool {
    cur.fp8 && a.tensor_active_p95.is_none_or(|x| x >= t::FP8_TENSOR)
}

/// Every type (each replica holding `need` GiB × 1.2, FP8 kept) with the
/// fewest replicas that keep every load ≤ 80 % of theirs, cheapest first.
pub fn candidates<'a>(
    tables: &'a Tables,
    a: &Assessment,
    cur: &GpuType,
    need: f64,
    loads: &[Load],
) -> Vec<Candidate<'a>> {
    if loads.is_empty() {
        return Vec::new();
    }
    let fp8 = fp8_needed(a, cur);
    let replicas = |c: &GpuType| {
        loads.iter().try_fold(1u32, |n, l| {
            let each = (l.per_gpu)(c)?;
            Some(n.max((l.amount / (t::ACTIVITY_CEILING * each)).ceil() as u32))
        })
    };
    let mut v: Vec<Candidate> = tables
        .gpus
        .gpus
        .iter()
        .filter(|c| c.memory_gib >= need * t::MEMORY_HEADROOM && (c.fp8 || !fp8))
        .filter_map(|c| {
            let n = replicas(c).filter(|n| *n <= MAX_REPLICAS)?;
            Some(Candidate {
                gpu: c,
                n,
                usd_per_hour: f64::from(n) * c.price_usd_per_hour,
            })
        })
        .collect();
    v.sort_by(|x, y| x.usd_per_hour.total_cmp(&y.usd_per_hour));
    v
}

/// The cheapest candidate the cluster has nodes of, when it is cheaper
/// than today's `n` GPUs and not today's own type at today's count or
/// more; before it, the cheapest of all with what it needs when the
/// cluster has no node of its type.
pub fn cheapest<'a>(
    tables: &Tables,
    a: &Assessment,
    all: &'a [Candidate<'a>],
    (cur, n, now): (&GpuType, u32, f64),
) -> Vec<(&'a Candidate<'a>, Option<String>)> {
    let ok = |c: &Candidate| c.usd_per_hour < now - 1e-9 && (c.gpu.name != cur.name || c.n < n);
    let (firm, cond) = tables
        .sites
        .split(&a.workload.cluster, all, |c| &c.gpu.name);
    let mut v: Vec<_> = cond
        .filter(|(c, _)| ok(c))
        .map(|(c, needs)| (c, Some(needs)))
        .into_iter()
        .collect();
    v.extend(firm.filter(|c| ok(c)).map(|c| (c, None)));
    v
}

/// "; est. $X per million tokens vs $Y today": the same tokens at the
/// candidate's price, when today's cost per token is known.
pub fn per_token(a: &Assessment, usd_h: f64) -> String {
    a.cost_usd_per_million_tokens
        .zip(a.cost_usd_per_hour)
        .filter(|(_, h)| *h > 0.0)
        .map(|(m, h)| {
            format!(
                "; est. ${:.3} per million tokens vs ${m:.3} today",
                m * usd_h / h
            )
        })
        .unwrap_or_default()
}

/// The three cheapest candidates, for the reason printed.
pub fn ranked(all: &[Candidate]) -> String {
    let v: Vec<String> = all
        .iter()
        .take(3)
        .map(|c| format!("{} x {} ${:.2}/h", c.n, c.gpu.name, c.usd_per_hour))
        .collect();
    v.join(", ")
}

/// The cheapest way to serve a decode-bound workload's tokens, if it is
/// cheaper than today: with the estimated cost per million tokens.
pub fn decode(tables: &Tables, a: &Assessment) -> Option<Vec<Recommendation>> {
    let n = a.whole_gpus?;
    let cur = tables.gpu(a.model.as_deref()?)?;
    let now = f64::from(n) * a.price_usd_per_hour?;
    let all = candidates(tables, a, cur, a.memory_need_gib?, &[dram_load(a, cur, n)?]);
    let dram = dram_or_duty(a)?;
    let rec = |best: &Candidate, needs| Recommendation {
        kind: "gpu_type",
        action: format!(
            "{} x {} instead of {n} x {}",
            best.n, best.gpu.name, cur.name
        ),
        why: format!(
            "decode is bandwidth-bound: tokens/s taken to scale with memory bandwidth; DRAM p95 {:.0} % x {n} x {} GB/s = {:.0} GB/s is {:.0} % of {} x {} GB/s (<= {:.0} %), each replica holding {:.1} GiB x {}; ${:.2}/h vs ${now:.2}/h{}; cheapest: {}",
            dram * 100.0,
            cur.bandwidth_gbps,
            dram * cur.bandwidth_gbps * f64::from(n),
            dram * cur.bandwidth_gbps * f64::from(n)
                / (f64::from(best.n) * best.gpu.bandwidth_gbps)
                * 100.0,
            best.n,
            best.gpu.bandwidth_gbps,
            t::ACTIVITY_CEILING * 100.0,
            a.memory_need_gib.unwrap_or(0.0),
            t::MEMORY_HEADROOM,
            best.usd_per_hour,
            per_token(a, best.usd_per_hour),
            ranked(&all)
        ),
        saving_usd_per_month: (now - best.usd_per_hour) * t::HOURS_PER_MONTH,
        settings: None,
        group: None,
        check: None,
        needs,
    };
    let picks = cheapest(tables, a, &all, (cur, n, now));
    Some(picks.into_iter().map(|(c, needs)| rec(c, needs)).collect())
}
