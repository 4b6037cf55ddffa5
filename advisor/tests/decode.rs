//! Cost per unit of work decides the GPU type of a decode-bound service:
//! an H100 at $5.00/h whose DRAM is 65 % busy is served for less by two
//! A100s at $2.20/h each (2 x 2039 GB/s carry its 2178 GB/s under 80 %),
//! which a rule of "at least today's bandwidth per GPU" ruled out; the
//! saving and the estimated cost per million tokens are checked by hand.

use gpuscale_advisor::bottleneck::Bottleneck;

use crate::synth::{A100, Gpu, H100, workload};
use crate::week::find;

#[test]
fn a_decode_bound_service_is_ranked_by_cost_per_token_two_smaller_gpus_allowed() {
    let h100 = Gpu { price: 5.0, ..H100 };
    let a100 = Gpu { price: 2.2, ..A100 };
    #[rustfmt::skip]
    let mut chat = workload("chat", "decoder", "Deployment", h100,
        (30.0, 30.0), (1.0, 0.6), (0.55, 0.3), (0.05, 0.02), (0.65, 0.3));
    chat.tokens = Some(((900.0, 200.0), (2400.0, 500.0), (3.0, 0.6)));
    // Tensor 5 %: FP8 is not in use, an A100 (no FP8) may take it.
    // An A100 of the fleet, so Prometheus has the A100's price.
    #[rustfmt::skip]
    let other = workload("lab", "notebook", "StatefulSet", a100,
        (2.0, 2.0), (0.01, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    let w = crate::fleet::week(&[chat, other]);
    let r = w.advise();
    let a = find(&r, "decoder");
    assert_eq!(
        a.bottleneck,
        Bottleneck::MemoryBandwidth,
        "{}",
        a.bottleneck_reason
    );
    let t = crate::fleet::rec(a, "gpu_type");
    assert!(
        t.action
            .starts_with("2 x A100-80GB instead of 1 x H100-80GB"),
        "{}",
        t.action
    );
    // By hand: 0.65 x 3350 = 2177.5 GB/s; one A100 carries 0.8 x 2039 =
    // 1631 GB/s, two 3262: two replicas at $2.20 = $4.40/h against $5.00.
    assert!((t.saving_usd_per_month - (5.0 - 4.4) * 730.0).abs() < 0.01);
    let today = a.cost_usd_per_million_tokens.expect("cost per token");
    let est = format!(
        "est. ${:.3} per million tokens vs ${today:.3} today",
        today * 4.4 / 5.0
    );
    assert!(t.why.contains(&est), "{} lacks {est}", t.why);
    assert!(t.why.contains("2 x A100-80GB $4.40/h"), "{}", t.why);
}
