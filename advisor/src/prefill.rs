//! Cost per unit of work decides the GPU type of a tensor-bound
//! (`compute`: prefill, batch inference) workload: its tokens per second
//! are taken to scale with dense tensor TFLOPs (FP8 where it runs on FP8
//! today, FP16/BF16 otherwise). A candidate is N GPUs of a type, each
//! holding a replica, enough that tensor activity × today's TFLOPs × today's
//! GPUs and its DRAM traffic stay under the ceiling on them; the cheapest
//! N × price for the same tokens wins (docs/right-sizing.md, "Compute").

use crate::assess::{Assessment, Recommendation};
use crate::tables::{GpuType, Tables};
use crate::thresholds as t;
use crate::unitcost::{
    Candidate, Load, candidates, cheapest, dram_load, fp8_needed, per_token, ranked,
};

/// The TFLOPs that describe the work: FP8 where it is kept, else FP16.
fn tflops_of(fp8: bool) -> (fn(&GpuType) -> Option<f64>, &'static str) {
    if fp8 {
        (|g| g.fp8_tflops, "FP8")
    } else {
        (|g| g.fp16_tflops, "FP16/BF16")
    }
}

/// The cheapest way to serve a tensor-bound workload's tokens, if it is
/// cheaper than today: with the throughput estimate and the estimated
/// cost per million tokens. SM-bound work without tensor activity at the
/// compute threshold is not judged by tensor TFLOPs.
pub fn compute(tables: &Tables, a: &Assessment) -> Option<Vec<Recommendation>> {
    let n = a.whole_gpus?;
    let cur = tables.gpu(a.model.as_deref()?)?;
    let tensor = a.tensor_active_p95.filter(|x| *x >= t::TENSOR_ACTIVE)?;
    let (per_gpu, precision) = tflops_of(fp8_needed(a, cur));
    let today = per_gpu(cur)?;
    let now = f64::from(n) * a.price_usd_per_hour?;
    let work = tensor * today * f64::from(n);
    let mut loads = vec![Load {
        amount: work,
        per_gpu,
    }];
    loads.extend(dram_load(a, cur, n));
    // The need is per GPU; on several GPUs today the advisor cannot tell
    // replicas from shards (tensor parallel): a replica holds all of it.
    let need = a.memory_need_gib? * f64::from(n);
    let all = candidates(tables, a, cur, need, &loads);
    let rec = |best: &Candidate, needs| {
        let theirs = per_gpu(best.gpu).unwrap_or(0.0);
        let bn = f64::from(best.n);
        Recommendation {
            kind: "gpu_type",
            action: format!(
                "{} x {} instead of {n} x {}",
                best.n, best.gpu.name, cur.name
            ),
            why: format!(
                "compute-bound: tokens/s taken to scale with dense {precision} tensor TFLOPs; est. throughput today's x {} x {theirs} / ({n} x {today}) = {:.2} x; tensor p95 {:.0} % x {n} x {today} TFLOPs = {work:.0} TFLOPs is {:.0} % of {} x {theirs} TFLOPs (<= {:.0} %), each replica holding {:.1} GiB x {}; ${:.2}/h vs ${now:.2}/h{}; cheapest: {}",
                best.n,
                bn * theirs / (today * f64::from(n)),
                tensor * 100.0,
                work / (bn * theirs) * 100.0,
                best.n,
                t::ACTIVITY_CEILING * 100.0,
                need,
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
        }
    };
    let picks = cheapest(tables, a, &all, (cur, n, now));
    Some(picks.into_iter().map(|(c, needs)| rec(c, needs)).collect())
}
