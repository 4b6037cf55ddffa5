//! SGLang and TGI seen through where they publish the equivalent of
//! vLLM's KV-cache use: a 7B model under SGLang on an H100 holds 70.5 GiB
//! (its `--mem-fraction-static` pool) with 6 % of its KV token pool used
//! (`sglang:token_usage`) and is told an L40S or a 3g.40gb slice with the
//! `--mem-fraction-static` and `--context-length` to run there; a TGI
//! service, which publishes no KV use, is sized by its peak and says so.
//! Savings and the need checked by hand on a backfilled week.

use gpuscale_advisor::Report;

use crate::fleet::{spare, week};
use crate::synth::{Gpu, H100, Vllm, Workload, workload};
use crate::week::find;

const H: f64 = 730.0;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// `sglang:max_total_num_tokens` of the SGLang service.
const POOL_TOKENS: u32 = 500_000;

/// Levels: VRAM GiB, utilization, SM, tensor, DRAM active.
#[rustfmt::skip]
fn fleet() -> Vec<Workload> {
    let mut sg = workload("chat", "sglang-7b", "Deployment", H100,
        (70.5, 70.5), (0.6, 0.3), (0.2, 0.1), (0.05, 0.02), (0.15, 0.05));
    sg.tokens = Some(((300.0, 50.0), (600.0, 100.0), (2.0, 0.3)));
    sg.vllm = Some(Vllm {
        model_name: "Qwen/Qwen2.5-7B-Instruct",
        kv_usage: (0.06, 0.02),
        gpu_memory_utilization: 0.0,
        num_gpu_blocks: POOL_TOKENS,
        block_size: 1,
        preemptions: (0.0, 0.0),
        new_name: false,
        waiting: (0.0, 0.0),
        queue_time: (0.0, 0.0),
        queue_growth: 1.0,
        sglang: true,
    });
    let mut tgi = workload("chat", "tgi-7b", "Deployment", H100,
        (76.0, 76.0), (0.6, 0.3), (0.2, 0.1), (0.05, 0.02), (0.15, 0.05));
    tgi.tokens = Some(((300.0, 50.0), (600.0, 100.0), (2.0, 0.3)));
    tgi.tgi = true;
    let l40s = Gpu { model: "NVIDIA L40S", memory_gib: 44.5, price: 1.861, gpm: false };
    vec![sg, tgi, spare("l40s", l40s, None, None)]
}

fn near(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() < 0.01,
        "{what}: got {got}, by hand {want}"
    );
}

#[test]
fn sglang_is_sized_by_its_token_pool_use_and_tgi_says_it_cannot_be() {
    let ws = fleet();
    let r = week(&ws).advise();
    crate::fleet::keeps_its_promises(&r, &ws, false);
    sglang_gets_an_l40s_with_its_flags(&r);
    tgi_is_sized_by_its_peak_and_says_why(&r);
}

fn sglang_gets_an_l40s_with_its_flags(r: &Report) {
    let a = find(r, "sglang-7b");
    let v = a.vllm.as_ref().expect("seen through");
    assert_eq!(v.engine, "SGLang");
    // By hand: 7 B x 2 bytes of weights; SGLang publishes no
    // --mem-fraction-static, so its 70.5 GiB peak is its reservation; 6 %
    // of the rest used at p99.
    let w = 7e9 * 2.0 / GIB;
    let need = w + 0.06 * (70.5 - w);
    near(a.memory_need_gib.expect("need"), need, "need");
    near(v.gpu_memory_utilization, 70.5 / 79.6, "fraction");
    // need x 1.2 = 19.8 GiB: over 1g.20gb's 18.63, so 3g.40gb (SM 20 % x
    // 7 / 3 = 47 %); 4 of 7 slices saved.
    let mig = crate::fleet::rec(a, "mig");
    assert!(mig.action.contains("3g.40gb"), "{}", mig.action);
    near(mig.saving_usd_per_month, 4.0 * 4.0 / 7.0 * H, "3g.40gb");
    // An L40S (44.7 GiB): DRAM 15 % x 3350 = 502 GB/s <= 80 % of 864; an
    // A10G or L4 would carry under 480 GB/s.
    let ty = crate::fleet::rec(a, "gpu_type");
    assert!(ty.action.starts_with("L40S "), "{}", ty.action);
    near(ty.saving_usd_per_month, (4.0 - 1.861) * H, "L40S");
    let f = (70.5_f64 / 79.6 * 100.0).floor() / 100.0;
    let tokens = (f64::from(POOL_TOKENS) * (f * 44.7 - w) / (70.5 - w)).floor();
    let run = ty.settings.as_deref().expect("SGLang flags");
    assert!(
        run.starts_with(&format!("SGLang --mem-fraction-static {f:.2}")),
        "{run}"
    );
    assert!(
        run.contains(&format!("--context-length at most {tokens:.0}")),
        "{run}"
    );
    assert!(
        a.notes.iter().any(|n| n.starts_with("SGLang reserves")),
        "{:?}",
        a.notes
    );
}

fn tgi_is_sized_by_its_peak_and_says_why(r: &Report) {
    let a = find(r, "tgi-7b");
    assert!(a.vllm.is_none());
    assert!(a.cost_usd_per_million_tokens.is_some());
    // 76 GiB of 79.6 is 95 %: its preallocation, so capacity-bound (no
    // smaller share), but not "too small": TGI fills the GPU at start.
    near(a.memory_need_gib.expect("peak"), 76.0, "peak");
    assert!(!a.too_small, "{:?}", a.recommendations);
    assert!(
        a.notes
            .iter()
            .any(|n| n.starts_with("TGI publishes no KV-cache use")),
        "{:?}",
        a.notes
    );
}
