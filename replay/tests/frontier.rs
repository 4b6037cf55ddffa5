//! The frontier against KEDA on the shipped long-tail trace, and the wake
//! signal of a cold request with and without the activator.

use gpuscale_replay::compare::Knobs;
use gpuscale_replay::frontier::{best, frontier, grid};
use gpuscale_replay::model::Service;
use gpuscale_replay::sim::replay;
use gpuscale_replay::trace::{Arrival, parse_csv};

fn longtail() -> Vec<Arrival> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/traces/longtail.csv"))
        .expect("replay/traces/longtail.csv");
    parse_csv(&text).expect("the shipped trace parses")
}

#[test]
fn frontier_on_the_long_tail_trace() {
    let svc = Service::default();
    let k = Knobs::defaults(&svc);
    let cooldowns: Vec<u64> = (1..=10).map(|i| 60 * i).collect();
    let f = frontier(&svc, &longtail(), &k, &cooldowns, &grid());
    // With the activator a cold request waits the cold start plus at most
    // one step; through Prometheus up to a scrape and a poll more.
    let wake =
        |ps: &[gpuscale_replay::frontier::Point]| ps.iter().map(|p| p.wake_max).fold(0.0, f64::max);
    assert!(wake(&f.activator) <= 1.0, "{}", wake(&f.activator));
    assert!(wake(&f.activator) > 0.0, "cold wakes happen on this trace");
    assert!(wake(&f.prometheus) > 1.0, "{}", wake(&f.prometheus));
    assert!(wake(&f.keda) > 1.0, "{}", wake(&f.keda));
    // Pareto dominance over the whole grid, as docs/replay.md reports it.
    let dominated = |ps: &[gpuscale_replay::frontier::Point]| -> Vec<u64> {
        f.keda
            .iter()
            .filter(|kp| best(ps, kp).is_some())
            .map(|kp| kp.knob)
            .collect()
    };
    assert_eq!(dominated(&f.activator), vec![420, 480], "{f:#?}");
    assert_eq!(
        dominated(&f.prometheus),
        vec![60, 180, 360, 420, 480],
        "{f:#?}"
    );
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
    let o = replay(&svc, &trace, &mut k.gpuscale(true));
    assert_eq!(o.failed, 1, "{o:?}");
    assert!(o.wake_signal.iter().all(|w| *w == 1.0), "{o:?}");
    let patient = Service {
        client_deadline: 120.0,
        ..svc
    };
    let o = replay(&patient, &trace, &mut k.gpuscale(true));
    assert_eq!(o.failed, 0, "{o:?}");
    // Cold start plus the 1 s wake signal, plus prefill.
    assert!((o.ttft_p95 - 91.1).abs() < 1e-9, "{}", o.ttft_p95);
}
