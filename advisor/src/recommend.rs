//! Per-workload recommendations: a MIG slice of the same GPU, a cheaper
//! GPU type, scale to zero. Each only where it fits, with its saving.

use crate::assess::{Assessment, Confidence, Recommendation, dram_or_duty};
use crate::bottleneck::Bottleneck;
use crate::tables::{GpuType, MigProfile, Tables};
use crate::thresholds as t;
use crate::vllm;

/// The activity a smaller share must carry: SM activity, or utilization
/// where GPM is missing.
fn compute_p95(a: &Assessment) -> Option<f64> {
    a.sm_active_p95.or(a.utilization_p95)
}

/// The smallest MIG profile (not the whole GPU) that holds the peak VRAM
/// with headroom and keeps SM and DRAM activity, scaled to the slice,
/// under the ceiling.
pub fn smallest_profile<'a>(
    tables: &'a Tables,
    gpu: &GpuType,
    vram_gib: f64,
    compute: f64,
    dram: Option<f64>,
) -> Option<&'a MigProfile> {
    tables.mig_profiles(gpu).into_iter().find(|p| {
        p.compute_slices < 7
            && p.memory_gib >= vram_gib * t::MEMORY_HEADROOM
            && compute * 7.0 / f64::from(p.compute_slices) <= t::ACTIVITY_CEILING
            && dram.is_none_or(|d| d * 8.0 / f64::from(p.memory_eighths) <= t::ACTIVITY_CEILING)
    })
}

fn mig(tables: &Tables, a: &Assessment) -> Option<Recommendation> {
    let n = a.whole_gpus?;
    let gpu = tables.gpu(a.model.as_deref()?)?;
    if matches!(
        a.bottleneck,
        Bottleneck::Compute | Bottleneck::ComputeProxy | Bottleneck::MemoryCapacity
    ) {
        return None;
    }
    let vram = a.memory_need_gib?;
    let p = smallest_profile(tables, gpu, vram, compute_p95(a)?, dram_or_duty(a))?;
    let price = a.price_usd_per_hour?;
    let share = f64::from(p.compute_slices) / 7.0;
    let settings = a.vllm.as_ref().map(|v| vllm::flags(v, p.memory_gib, 1.0));
    Some(Recommendation {
        kind: "mig",
        action: format!(
            "MIG {} of the same {} instead of the whole GPU{}",
            p.profile,
            gpu.name,
            per_replica(n)
        ),
        why: format!(
            "{} {vram:.1} GiB x {} fits its {:.2} GiB; {} {:.0} % is {:.0} % of {} slice(s)",
            need_name(a),
            t::MEMORY_HEADROOM,
            p.memory_gib,
            if a.sm_active_p95.is_some() {
                "SM active p95"
            } else {
                "utilization p95 (no SM activity series)"
            },
            compute_p95(a).unwrap_or(0.0) * 100.0,
            compute_p95(a).unwrap_or(0.0) * 7.0 / f64::from(p.compute_slices) * 100.0,
            p.compute_slices
        ),
        saving_usd_per_month: f64::from(n) * price * (1.0 - share) * t::HOURS_PER_MONTH,
        settings,
        group: None,
        check: None,
        needs: None,
    })
}

/// What the memory figure is: the peak, or vLLM's need.
fn need_name(a: &Assessment) -> &'static str {
    if a.vllm.is_some() {
        "its need (weights + KV p99)"
    } else {
        "peak VRAM"
    }
}

fn per_replica(n: u32) -> String {
    if n > 1 {
        format!(", for each of its {n} GPUs")
    } else {
        String::new()
    }
}

/// Whether `c` can carry what the workload does on `cur`.
fn type_fits(a: &Assessment, cur: &GpuType, c: &GpuType, vram: f64) -> bool {
    if c.memory_gib < vram * t::MEMORY_HEADROOM {
        return false;
    }
    // Decode speed is bandwidth: a bandwidth-bound workload keeps at least
    // the bandwidth it has; others must stay under the ceiling on `c`.
    let bw_ok = match (a.bottleneck, dram_or_duty(a)) {
        (Bottleneck::MemoryBandwidth | Bottleneck::MemoryBandwidthProxy, _) | (_, None) => {
            c.bandwidth_gbps >= cur.bandwidth_gbps
        }
        (_, Some(d)) => d * cur.bandwidth_gbps <= t::ACTIVITY_CEILING * c.bandwidth_gbps,
    };
    let fp8_ok = c.fp8 || !cur.fp8 || a.tensor_active_p95.is_some_and(|x| x < t::FP8_TENSOR);
    // No FLOPs in the table: on a slower GPU the same work keeps the SMs
    // busy longer, estimated by the bandwidth ratio.
    let slower = (cur.bandwidth_gbps / c.bandwidth_gbps).max(1.0);
    let busy_ok = compute_p95(a).is_none_or(|x| x * slower <= t::ACTIVITY_CEILING);
    bw_ok && fp8_ok && busy_ok
}

fn gpu_type(tables: &Tables, a: &Assessment) -> Option<Vec<Recommendation>> {
    let n = a.whole_gpus?;
    let cur = tables.gpu(a.model.as_deref()?)?;
    // Tensor-bound: ranked by cost per token from the table's TFLOPs
    // (`prefill`); the NVML compute proxy has no tensor activity to scale.
    if a.bottleneck == Bottleneck::Compute {
        return crate::prefill::compute(tables, a);
    }
    if matches!(a.bottleneck, Bottleneck::ComputeProxy | Bottleneck::Unknown) {
        return None;
    }
    // Decode: ranked by what serving its tokens costs (`unitcost`).
    if matches!(
        a.bottleneck,
        Bottleneck::MemoryBandwidth | Bottleneck::MemoryBandwidthProxy
    ) {
        return crate::unitcost::decode(tables, a);
    }
    let vram = a.memory_need_gib?;
    let price = a.price_usd_per_hour?;
    let mut fits: Vec<&GpuType> = tables
        .gpus
        .gpus
        .iter()
        .filter(|c| {
            c.name != cur.name && c.price_usd_per_hour < price && type_fits(a, cur, c, vram)
        })
        .collect();
    fits.sort_by(|x, y| x.price_usd_per_hour.total_cmp(&y.price_usd_per_hour));
    let (firm, cond) = tables.sites.split(&a.workload.cluster, &fits, |c| &c.name);
    let rec = |best: &GpuType, needs| type_rec(tables, a, cur, best, n, needs);
    let mut out: Vec<Recommendation> = cond
        .map(|(c, needs)| rec(c, Some(needs)))
        .into_iter()
        .collect();
    out.extend(firm.map(|c| rec(c, None)));
    Some(out)
}

fn type_rec(
    tables: &Tables,
    a: &Assessment,
    cur: &GpuType,
    best: &GpuType,
    n: u32,
    needs: Option<String>,
) -> Recommendation {
    let (vram, price) = (
        a.memory_need_gib.unwrap_or(0.0),
        a.price_usd_per_hour.unwrap_or(0.0),
    );
    Recommendation {
        kind: "gpu_type",
        action: format!("{} instead of {}{}", best.name, cur.name, per_replica(n)),
        why: format!(
            "{} {vram:.1} GiB x {} fits {:.1} GiB; bandwidth {} GB/s vs {} GB/s{}; ${:.2}/h vs ${price:.2}/h ({})",
            need_name(a),
            t::MEMORY_HEADROOM,
            best.memory_gib,
            best.bandwidth_gbps,
            cur.bandwidth_gbps,
            match (a.dram_active_p95, a.memory_duty_p95) {
                (Some(d), _) => format!(" (DRAM active p95 {:.0} %)", d * 100.0),
                (None, Some(d)) => format!(
                    " (NVML memory duty cycle p95 {:.0} %, a bound on DRAM activity)",
                    d * 100.0
                ),
                (None, None) => String::new(),
            },
            best.price_usd_per_hour,
            tables.price_source(best)
        ),
        saving_usd_per_month: f64::from(n) * (price - best.price_usd_per_hour) * t::HOURS_PER_MONTH,
        settings: a
            .vllm
            .as_ref()
            .map(|v| vllm::flags(v, best.memory_gib, 1.0)),
        group: None,
        check: None,
        needs,
    }
}

fn scale_to_zero(a: &Assessment) -> Option<Recommendation> {
    let idle = a
        .idle_hours_per_day
        .filter(|h| *h >= t::SCALE_TO_ZERO_IDLE_HOURS)?;
    let cost = a.cost_usd_per_hour?;
    let w = &a.workload;
    // The replay needs requests per second: the framework's counter,
    // joined to the workload through gpu_pod_info like the presets.
    let check = a.request_series.map(|series| {
        let query = format!(
            "sum(rate({series}[1m]) * on (namespace, pod) group_left () max by (namespace, pod) (gpu_pod_info{{namespace=\"{}\",workload=\"{}\"}}))",
            w.namespace, w.name
        );
        format!(
            "gpuscale-replay run --prometheus $PROMETHEUS --query '{query}' --start $(($(date +%s)-604800)) --end $(date +%s) --step 60{}",
            a.price_usd_per_hour.map_or(String::new(), |p| format!(" --price {p}"))
        )
    });
    Some(Recommendation {
        kind: "scale_to_zero",
        action: format!("scale to zero when idle ({idle:.1} h a day without work)"),
        why: format!(
            "utilization under {:.0} % for {:.0} % of its samples{}",
            t::IDLE * 100.0,
            idle / 24.0 * 100.0,
            if a.request_series.is_none() {
                "; no request counter to replay: check who uses it before parking"
            } else {
                ""
            }
        ),
        saving_usd_per_month: cost * idle / 24.0 * t::HOURS_PER_MONTH,
        settings: None,
        group: None,
        check,
        needs: None,
    })
}

/// Adds the per-workload recommendations, largest saving first. A
/// workload judged too small gets no smaller share. Co-location
/// (fleet-wide) comes from `colocate` after this, beside them.
pub fn add(tables: &Tables, a: &mut Assessment) {
    if a.confidence == Confidence::Insufficient {
        return;
    }
    let mut recs: Vec<Recommendation> = Vec::new();
    if !a.too_small {
        recs.extend(mig(tables, a));
        recs.extend(gpu_type(tables, a).into_iter().flatten());
    }
    recs.extend(scale_to_zero(a));
    a.recommendations.extend(recs);
    a.recommendations
        .sort_by(|x, y| y.saving_usd_per_month.total_cmp(&x.saving_usd_per_month));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Key;

    fn stub() -> Assessment {
        Assessment {
            workload: Key {
                cluster: String::new(),
                namespace: "ns".into(),
                kind: "Deployment".into(),
                name: "w".into(),
            },
            tier: "production".into(),
            tier_source: "--default-tier".into(),
            node_pool: None,
            memory_need_gib: None,
            vllm: None,
            kv_usage_p99: None,
            preemptions: None,
            requests_waiting_p95: None,
            queue: None,
            too_small: false,
            gpus_now: 1.0,
            devices_now: 1,
            model: None,
            mig_profile: None,
            gpu_type: None,
            history_hours: 168.0,
            exporter_gap_hours: 0.0,
            confidence: Confidence::High,
            vram_peak_gib: None,
            vram_p99_gib: None,
            device_memory_gib: None,
            sm_active_p95: None,
            tensor_active_p95: None,
            dram_active_p95: None,
            utilization_p95: None,
            memory_duty_p95: None,
            power_of_limit_p95: None,
            pcie_bytes_per_second_p95: None,
            bottleneck: Bottleneck::Balanced,
            bottleneck_reason: String::new(),
            cost_usd_per_hour: None,
            cost_usd_range: None,
            prompt_tokens: None,
            generated_tokens: None,
            requests: None,
            request_series: None,
            cost_usd_per_million_tokens: None,
            cost_usd_per_1k_requests: None,
            idle_hours_per_day: None,
            recommendations: Vec::new(),
            notes: Vec::new(),
            whole_gpus: Some(1),
            price_usd_per_hour: Some(4.0),
        }
    }

    #[test]
    fn smallest_fitting_profile() {
        let t = Tables::load(None, None).unwrap();
        let h100 = t.gpu("NVIDIA H100 80GB HBM3").unwrap();
        let p =
            |vram, sm, dram| smallest_profile(&t, h100, vram, sm, dram).map(|p| p.profile.as_str());
        assert_eq!(p(6.0, 0.08, Some(0.05)), Some("1g.10gb"));
        // 9 GiB x 1.2 needs the 20 GB slice; one compute slice still does.
        assert_eq!(p(9.0, 0.08, None), Some("1g.20gb"));
        // SM 0.3 x 7 / 3 = 0.7: three slices.
        assert_eq!(p(6.0, 0.3, None), Some("3g.40gb"));
        // Too much memory or activity for any slice short of the whole GPU.
        assert_eq!(p(40.0, 0.1, None), None);
        assert_eq!(p(6.0, 0.7, None), None);
        // DRAM 0.3 x 8 / 1 = 2.4: the 1g slice's bandwidth is too small.
        assert_eq!(p(6.0, 0.08, Some(0.3)), Some("3g.40gb"));
    }

    #[test]
    fn a_bandwidth_bound_workload_keeps_its_bandwidth() {
        let t = Tables::load(None, None).unwrap();
        let h100 = t.gpu("NVIDIA H100 80GB HBM3").unwrap();
        let a100 = t.gpu("NVIDIA A100-SXM4-80GB").unwrap();
        let h200 = t.gpu("NVIDIA H200").unwrap();
        let t4 = t.gpu("Tesla T4").unwrap();
        let mut a = stub();
        a.bottleneck = Bottleneck::MemoryBandwidth;
        a.dram_active_p95 = Some(0.65);
        a.tensor_active_p95 = Some(0.25);
        assert!(!type_fits(&a, h100, a100, 20.0));
        assert!(type_fits(&a, h100, h200, 20.0));
        // Not bandwidth-bound, little DRAM: a T4 carries 5 % of 3350 GB/s.
        a.bottleneck = Bottleneck::Balanced;
        a.dram_active_p95 = Some(0.05);
        a.tensor_active_p95 = Some(0.03);
        assert!(type_fits(&a, h100, t4, 6.0));
        // Tensor cores in use on an FP8 GPU: no move to a GPU without FP8.
        a.tensor_active_p95 = Some(0.2);
        assert!(!type_fits(&a, h100, t4, 6.0));
        // Memory with headroom must fit.
        a.tensor_active_p95 = Some(0.03);
        assert!(!type_fits(&a, h100, t4, 13.0));
        // SM 8 % on an H100 is 8 % x 3350 / 320 = 84 % of a T4: too busy.
        a.sm_active_p95 = Some(0.08);
        assert!(!type_fits(&a, h100, t4, 6.0));
    }
}
