//! Coverage, not silence: a vLLM service whose exporter sent nothing for a
//! day while its counters were still scraped. Cost per million tokens is
//! over the covered hours (cost and tokens alike), the gap is reported
//! with what it would have done to cost per token, and confidence drops to
//! medium with the reason; checked against a hand computation.

use gpuscale_advisor::assess::Confidence;

use crate::synth::{H100, times, workload};
use crate::week::{RANGE_S, STEP_S, find};

const DAY: i64 = 86_400;

fn is_day(t: i64) -> bool {
    (8..20).contains(&((t % DAY) / 3600))
}

#[test]
fn a_day_without_exporter_data_is_reported_not_hidden() {
    #[rustfmt::skip]
    let mut s = workload("chat", "chat-gap", "Deployment", H100,
        (40.0, 40.0), (1.0, 0.6), (0.55, 0.3), (0.25, 0.1), (0.65, 0.3));
    s.tokens = Some(((900.0, 200.0), (2400.0, 500.0), (3.0, 0.6)));
    // Nothing from the exporter from 3 days before the end, for 24 hours.
    s.gap = Some((3 * DAY, DAY));
    let w = crate::fleet::week(&[s]);
    let end = w.end;
    let r = w.advise();
    let a = find(&r, "chat-gap");
    assert!(
        (a.exporter_gap_hours - 24.0).abs() < 0.2,
        "{}",
        a.exporter_gap_hours
    );
    assert!((a.history_hours - 144.0).abs() < 0.2, "{}", a.history_hours);
    assert_eq!(a.confidence, Confidence::Medium);
    // By hand: tokens and GPU-hours over the covered samples only.
    let covered: Vec<i64> = times(end, RANGE_S, STEP_S)
        .into_iter()
        .filter(|t| *t < end - 3 * DAY || *t >= end - 2 * DAY)
        .collect();
    let tokens: f64 = covered
        .iter()
        .map(|t| if is_day(*t) { 3300.0 } else { 700.0 } * STEP_S as f64)
        .sum();
    let cost = covered.len() as f64 * STEP_S as f64 / 3600.0 * 4.0;
    let want = cost / tokens * 1e6;
    let got = a.cost_usd_per_million_tokens.expect("cost per token");
    assert!((got / want - 1.0).abs() < 0.01, "got {got}, by hand {want}");
    let note = a
        .notes
        .iter()
        .find(|n| n.contains("no exporter data"))
        .expect("a gap note");
    assert!(note.contains("14 % lower"), "{note}");
}
