//! Cost per unit of work decides the GPU type of a compute-bound service:
//! a prefill-heavy H100 at $5.00/h whose tensor cores are 55 % busy (FP8)
//! is served for less by two L40S at $1.861/h each (2 x 733 dense FP8
//! TFLOPs carry its 1088 TFLOPs under 80 %); the saving and the estimated
//! cost per million tokens are checked by hand.

use gpuscale_advisor::bottleneck::Bottleneck;

use crate::synth::{Gpu, H100, tokens_and_cost, workload};
use crate::week::{RANGE_S, STEP_S, find};

#[test]
fn a_prefill_bound_service_is_ranked_by_cost_per_token_from_tensor_tflops() {
    let h100 = Gpu { price: 5.0, ..H100 };
    // Long prompts, short answers: tensor 55 %, SM 70 %, DRAM 30 %.
    #[rustfmt::skip]
    let mut rag = workload("search", "reranker", "Deployment", h100,
        (30.0, 30.0), (1.0, 0.6), (0.7, 0.3), (0.55, 0.2), (0.3, 0.1));
    rag.tokens = Some(((9000.0, 2000.0), (300.0, 60.0), (3.0, 0.6)));
    // The same on two H100s: 2 x 30 GiB may be one model in two shards,
    // so a replica holds 60 GiB x 1.2 = 72: no L40S, and two H100s are
    // the cheapest that carry it (0.55 x 2 x 1979 = 2177 TFLOPs).
    #[rustfmt::skip]
    let mut sharded = workload("search", "ranker-tp2", "Deployment", h100,
        (30.0, 30.0), (1.0, 0.6), (0.7, 0.3), (0.55, 0.2), (0.3, 0.1));
    sharded.gpus = 2;
    // A node pool of L40S in the cluster (one GPU of it, free).
    let l40s = Gpu {
        model: "NVIDIA L40S",
        memory_gib: 44.5,
        price: 1.861,
        gpm: false,
    };
    let spare = crate::fleet::spare("l40s", l40s, None, None);
    let w = crate::fleet::week(&[rag.clone(), sharded, spare]);
    let end = w.end;
    let r = w.advise();
    let a = find(&r, "reranker");
    assert_eq!(a.bottleneck, Bottleneck::Compute, "{}", a.bottleneck_reason);
    let t = crate::fleet::rec(a, "gpu_type");
    assert!(
        t.action.starts_with("2 x L40S instead of 1 x H100-80GB"),
        "{}",
        t.action
    );
    // By hand: tensor 0.55 x 1979 dense FP8 TFLOPs = 1088.45 TFLOPs. One
    // L40S carries 0.8 x 733 = 586.4, two 1172.8 >= 1088.45: two; DRAM
    // 0.3 x 3350 = 1005 GB/s under 0.8 x 2 x 864 = 1382.4; 30 GiB x 1.2 =
    // 36 GiB fits its 44.7. The A100s have no FP8 (tensor 55 % uses it),
    // an L4 holds 22.4 GiB. Two L40S: $3.722/h against $5.00/h.
    let best = 2.0 * 1.861;
    assert!((t.saving_usd_per_month - (5.0 - best) * 730.0).abs() < 0.01);
    assert!((t.saving_usd_per_month - 932.94).abs() < 0.01);
    // Today's cost per million tokens from the counters by hand, and the
    // estimate: the same tokens at $3.722/h.
    let (tokens, cost) = tokens_and_cost(&rag, end, RANGE_S, STEP_S);
    let by_hand = cost / tokens * 1e6;
    let today = a.cost_usd_per_million_tokens.expect("cost per token");
    assert!((today / by_hand - 1.0).abs() < 0.01, "{today} vs {by_hand}");
    let est = format!(
        "est. ${:.3} per million tokens vs ${today:.3} today",
        today * best / 5.0
    );
    assert!(t.why.contains(&est), "{} lacks {est}", t.why);
    assert!(
        t.why.contains("dense FP8 tensor TFLOPs")
            && t.why.contains("today's x 2 x 733 / (1 x 1979) = 0.74 x"),
        "{}",
        t.why
    );
    assert!(t.why.contains("2 x L40S $3.72/h"), "{}", t.why);
    let tp = find(&r, "ranker-tp2");
    assert_eq!(
        tp.bottleneck,
        Bottleneck::Compute,
        "{}",
        tp.bottleneck_reason
    );
    assert!(
        tp.recommendations.iter().all(|x| x.kind != "gpu_type"),
        "{:?}",
        tp.recommendations
            .iter()
            .map(|x| &x.action)
            .collect::<Vec<_>>()
    );
}
