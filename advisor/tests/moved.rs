//! History per placement: a workload that ran four days on an H100 and
//! the last three on an A100 is judged on the A100's data alone (its
//! VRAM, no GPM activity), says it moved, and gets the A100's advice;
//! checked against a hand computation.

use gpuscale_advisor::assess::Confidence;
use gpuscale_advisor::bottleneck::Bottleneck;

use crate::synth::{A100, H100, workload};
use crate::week::{find, kinds};

const DAY: i64 = 86_400;

#[test]
fn a_moved_workload_is_judged_on_its_latest_placement() {
    #[rustfmt::skip]
    let mut before = workload("ml", "ranker", "Deployment", H100,
        (30.0, 30.0), (0.9, 0.5), (0.6, 0.3), (0.3, 0.1), (0.55, 0.2));
    before.until_s = Some(3 * DAY);
    #[rustfmt::skip]
    let mut after = workload("ml", "ranker", "Deployment", A100,
        (6.0, 6.0), (0.2, 0.1), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    after.seen_s = Some((3 * DAY) as f64);
    let w = crate::fleet::week(&[before, after]);
    let r = w.advise();
    let a = find(&r, "ranker");
    assert_eq!(a.gpu_type.as_deref(), Some("A100-80GB"));
    // Three days on the A100, under a week: medium.
    assert!((a.history_hours - 72.0).abs() < 0.2, "{}", a.history_hours);
    assert_eq!(a.confidence, Confidence::Medium);
    // The A100's 6 GiB and no GPM: none of the H100's 30 GiB or SM 60 %.
    assert!((a.vram_peak_gib.expect("vram") - 6.0).abs() < 0.01);
    assert_eq!(a.sm_active_p95, None);
    assert_eq!(a.bottleneck, Bottleneck::NoGpm, "{}", a.bottleneck_reason);
    assert!(
        a.notes
            .iter()
            .any(|n| n.starts_with("moved: held NVIDIA H100")),
        "{:?}",
        a.notes
    );
    // Its advice is the A100's: utilization 20 % x 7 / 2 = 70 %: 2g.20gb,
    // 5 of 7 slices of a $2.50 GPU saved.
    let mig = crate::fleet::rec(a, "mig");
    assert!(mig.action.contains("2g.20gb"), "{}", mig.action);
    assert!((mig.saving_usd_per_month - 2.5 * 5.0 / 7.0 * 730.0).abs() < 0.01);
    assert!(!kinds(a).contains(&"too_small"));
    // Cost per hour is the A100's.
    assert!((a.cost_usd_per_hour.expect("cost") - 2.5).abs() < 1e-9);
}
