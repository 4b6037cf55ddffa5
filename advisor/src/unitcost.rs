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

/// Every type (each replica holding the need × 1.2) with the replicas that
/// keep DRAM traffic (DRAM p95 × today's bandwidth × today's GPUs) ≤ 80 %
/// of theirs, cheapest first.
pub fn candidates<'a>(
    tables: &'a Tables,
    a: &Assessment,
    cur: &GpuType,
    gpus: u32,
) -> Vec<Candidate<'a>> {
    let (Some(need), Some(dram)) = (a.memory_need_gib, dram_or_duty(a)) else {
        return Vec::new();
    };
    let traffic = dram * cur.bandwidth_gbps * f64::from(gpus);
    let fp8_needed = cur.fp8 && a.tensor_active_p95.is_none_or(|x| x >= t::FP8_TENSOR);
    let mut v: Vec<Candidate> = tables
        .gpus
        .gpus
        .iter()
        .filter(|c| c.memory_gib >= need * t::MEMORY_HEADROOM && (c.fp8 || !fp8_needed))
        .filter_map(|c| {
            let n = (traffic / (t::ACTIVITY_CEILING * c.bandwidth_gbps))
                .ceil()
                .max(1.0) as u32;
            (n <= MAX_REPLICAS).then(|| Candidate {
                gpu: c,
                n,
                usd_per_hour: f64::from(n) * c.price_usd_per_hour,
            })
        })
        .collect();
    v.sort_by(|x, y| x.usd_per_hour.total_cmp(&y.usd_per_hour));
    v
}

/// The cheapest way to serve a decode-bound workload's tokens, if it is
/// cheaper than today: with the estimated cost per million tokens.
pub fn decode(tables: &Tables, a: &Assessment) -> Option<Recommendation> {
    let n = a.whole_gpus?;
    let cur = tables.gpu(a.model.as_deref()?)?;
    let price = a.price_usd_per_hour?;
    let now = f64::from(n) * price;
    let all = candidates(tables, a, cur, n);
    let best = all.first().filter(|c| c.usd_per_hour < now - 1e-9)?;
    if best.gpu.name == cur.name && best.n >= n {
        return None;
    }
    let dram = dram_or_duty(a)?;
    let per_token = |usd_h: f64| {
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
    };
    let ranked: Vec<String> = all
        .iter()
        .take(3)
        .map(|c| format!("{} x {} ${:.2}/h", c.n, c.gpu.name, c.usd_per_hour))
        .collect();
    Some(Recommendation {
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
            per_token(best.usd_per_hour),
            ranked.join(", ")
        ),
        saving_usd_per_month: (now - best.usd_per_hour) * t::HOURS_PER_MONTH,
        settings: None,
        group: None,
        check: None,
    })
}
