//! The frontier against KEDA on the shipped long-tail trace, and the wake
//! signal of a cold request with and without the activator.

use gpuscale_replay::compare::Knobs;
use gpuscale_replay::frontier::{Setting, best, frontier, grid};
use gpuscale_replay::idle::IdleSignal;
use gpuscale_replay::model::Service;
use gpuscale_replay::sim::replay;
use gpuscale_replay::trace::{Arrival, parse_csv};

fn longtail() -> Vec<Arrival> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/traces/longtail.csv"))
        .expect("replay/traces/longtail.csv");
    parse_csv(&text).expect("the shipped trace parses")
}

/// The settings docs/replay.md names as dominating KEDA (found by the
/// whole search, `--frontier`, which takes minutes in a debug build).
fn named() -> Vec<Setting> {
    use IdleSignal::{Activator, InFlight, Rate};
    [
        (Rate, 0, 0),
        (Activator, 75, 0),
        (InFlight, 90, 0),
        (Rate, 105, 0),
        (Rate, 120, 0),
        (Rate, 150, 0),
        (InFlight, 270, 0),
        (InFlight, 0, 600),
        (InFlight, 525, 600),
        (InFlight, 585, 0),
    ]
    .into_iter()
    .map(|(signal, idle_for, min_up)| Setting {
        signal,
        idle_for,
        min_up,
    })
    .collect()
}

#[test]
fn frontier_on_the_long_tail_trace() {
    let svc = Service::default();
    let k = Knobs::defaults(&svc);
    let cooldowns: Vec<u64> = (1..=10).map(|i| 60 * i).collect();
    let f = frontier(&svc, &longtail(), &k, &cooldowns, &named());
    // With the activator a cold request waits the cold start plus at most
    // one step; through Prometheus up to a scrape and a poll more.
    let wake =
        |ps: &[gpuscale_replay::frontier::Point]| ps.iter().map(|p| p.wake_max).fold(0.0, f64::max);
    assert!(wake(&f.activator) <= 1.0, "{}", wake(&f.activator));
    assert!(wake(&f.activator) > 0.0, "cold wakes happen on this trace");
    assert!(wake(&f.prometheus) > 1.0, "{}", wake(&f.prometheus));
    assert!(wake(&f.keda) > 1.0, "{}", wake(&f.keda));
    // Pareto dominance, as docs/replay.md reports it: through Prometheus
    // at every cooldown; with the activator not at 60, 300, 540, 600 s.
    let dominated = |ps: &[gpuscale_replay::frontier::Point]| -> Vec<u64> {
        f.keda
            .iter()
            .filter(|kp| best(ps, kp).is_some())
            .map(|kp| kp.knob)
            .collect()
    };
    assert_eq!(dominated(&f.prometheus), cooldowns, "{f:#?}");
    assert_eq!(
        dominated(&f.activator),
        vec![120, 180, 240, 360, 420, 480],
        "{f:#?}"
    );
    // At 60 s the activator's cheapest setting costs more than KEDA: its
    // wakes come up to 29 s sooner, each replica runs that much longer.
    let cheapest = f
        .activator
        .iter()
        .find(|p| p.signal == IdleSignal::Rate && p.knob == 0 && p.min_up == 0)
        .expect("rate, idle 0, minUp 0");
    assert!(
        (cheapest.gpu_hours - 6.68).abs() < 0.005 && (f.keda[0].gpu_hours - 6.31).abs() < 0.005,
        "{cheapest:?} {:?}",
        f.keda[0]
    );
}

#[test]
fn the_search_covers_every_signal_on_a_15_s_grid() {
    let g = grid();
    assert_eq!(g.len(), 3 * 121 * 5);
    for signal in IdleSignal::ALL {
        assert!(g.iter().any(|s| s.signal == signal && s.idle_for == 15));
        assert!(
            g.iter()
                .any(|s| s.signal == signal && s.idle_for == 1800 && s.min_up == 1200)
        );
    }
}

#[test]
fn client_deadline_fails_a_long_hold() {
    // The request at 2000 s finds the service parked: held for the wake and
    // the 90 s cold start, past a 60 s client deadline. (The last one ends
    // the replay and is unserved, not failed.)
    let trace: Vec<Arrival> = [0.0, 2000.0, 4000.0]
        .iter()
        .map(|t| Arrival {
            t: *t,
            input: 1000,
            output: 40,
        })
        .collect();
    let svc = Service::default();
    let mut k = Knobs::defaults(&svc);
    k.idle_for = 60;
    let o = replay(&svc, &trace, &mut k.gpuscale(true).unwrap());
    assert_eq!(o.failed, 1, "{o:?}");
    assert!(o.wake_signal.iter().all(|w| *w == 1.0), "{o:?}");
    let patient = Service {
        client_deadline: 120.0,
        ..svc
    };
    let o = replay(&patient, &trace, &mut k.gpuscale(true).unwrap());
    assert_eq!(o.failed, 0, "{o:?}");
    // Cold start plus the 1 s wake signal, plus prefill.
    assert!((o.ttft_p95 - 91.1).abs() < 1e-9, "{}", o.ttft_p95);
}

/// The settings drawn in docs/replay-frontier.svg: its points' titles
/// ("idle on rate, idleFor 45s, minUpDuration 0s").
fn drawn_settings(svg: &str) -> Vec<(String, u64, u64)> {
    svg.split("<title>idle on ")
        .skip(1)
        .filter_map(|t| {
            let t = &t[..t.find("</title>")?];
            let (signal, rest) = t.split_once(", idleFor ")?;
            let (idle, min_up) = rest.split_once("s, minUpDuration ")?;
            Some((
                signal.to_string(),
                idle.parse().ok()?,
                min_up.trim_end_matches('s').parse().ok()?,
            ))
        })
        .collect()
}

/// The frontier picture in docs/ is what `run --frontier 1m,…,10m
/// --frontier-svg` (docs/replay.md) draws now. The whole search takes
/// minutes in a debug build, so this searches only the settings the
/// picture draws: each path's Pareto-efficient settings of the whole grid
/// are the efficient ones of any part of it holding them, so a current
/// picture is redrawn byte for byte, and any change to the replay, the
/// KEDA model or the drawing of those points fails here. (A setting not
/// drawn that a change made efficient shows only in the whole search.)
#[test]
fn the_shipped_frontier_picture_is_current() {
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/replay-frontier.svg"
    ))
    .expect("docs/replay-frontier.svg");
    let drawn = drawn_settings(&shipped);
    assert!(drawn.len() > 10, "no settings in the picture's titles");
    let part: Vec<Setting> = grid()
        .into_iter()
        .filter(|s| {
            drawn
                .iter()
                .any(|(n, i, m)| n == s.signal.name() && *i == s.idle_for && *m == s.min_up)
        })
        .collect();
    let svc = Service::default();
    let k = Knobs::defaults(&svc);
    let cooldowns: Vec<u64> = (1..=10).map(|i| 60 * i).collect();
    let now = gpuscale_replay::frontier::svg(&frontier(&svc, &longtail(), &k, &cooldowns, &part));
    assert!(
        now == shipped,
        "docs/replay-frontier.svg differs from what run --frontier-svg draws: regenerate it (docs/replay.md)"
    );
}
