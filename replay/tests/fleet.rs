//! The sleep tier: a request to a sleeping model waits the wake time and
//! at most one step more; a wake the GPU's VRAM cannot take puts the least
//! recently used idle neighbour to sleep first, never one serving; and the
//! fleet's frontier against KEDA on the shipped traces, as docs/replay.md
//! reports it.

use std::process::Command;

use gpuscale_replay::compare::Knobs;
use gpuscale_replay::fleet::{self, FleetModel};
use gpuscale_replay::fleet_report::{Grid, best, frontier, wake_wait_max};
use gpuscale_replay::idle::IdleSignal;
use gpuscale_replay::model::Service;
use gpuscale_replay::shared;
use gpuscale_replay::sleep::{Level, Tier, Vram};
use gpuscale_replay::trace::{Arrival, parse_csv};

fn req(t: f64, output: u32) -> Arrival {
    Arrival {
        t,
        input: 1000,
        output,
    }
}

#[test]
fn a_request_to_a_sleeping_model_waits_the_wake_and_at_most_a_step() {
    let svc = Service::default();
    let a: Vec<Arrival> = [1000.0, 1300.5, 1600.9].map(|t| req(t, 40)).to_vec();
    let b: Vec<Arrival> = [1150.2, 1450.0].map(|t| req(t, 40)).to_vec();
    for level in [Level::One, Level::Two] {
        let tier = Tier::new(0, level, 1);
        let o = shared::replay(&svc, &tier, &[a.clone(), b.clone()]);
        let wake = tier.wake_time();
        for m in &o.models {
            assert_eq!(m.cold_waits, 0, "{m:?}");
            assert_eq!(m.sleep_waits as u64, m.wakes as u64, "{m:?}");
            assert!(
                m.wake_wait_max > wake && m.wake_wait_max <= wake + 1.0 + 1e-9,
                "{m:?}"
            );
            assert_eq!(m.evictions, 0, "{m:?}");
        }
        // A level-1 wake keeps the 2 s TTFT SLO; a level-2 one (2.6 s) not.
        let slo: Vec<u32> = o.models.iter().map(|m| m.slo_violation_minutes).collect();
        assert_eq!(slo, if level == Level::One { [0, 0] } else { [3, 2] });
        // One GPU held from the first arrival to the last request's wake
        // (or the replay's end, the SLO after the last arrival).
        let steps = (o.gpu_hours * 3600.0).round();
        assert!((601.0..=603.0).contains(&steps), "{steps}");
    }
}

#[test]
fn a_wake_that_does_not_fit_waits_for_the_idle_neighbour_never_a_serving_one() {
    let svc = Service::default();
    let mut tier = Tier::new(600, Level::One, 1);
    tier.vram = Vram {
        gpu: 80.0,
        awake: 50.0,
        asleep: 5.0,
    };
    // A runs a 50 s request from about 101 s; B's request at 120 s cannot
    // wake beside it (50 + 50 > 80) until A is idle and asleep.
    let a = vec![req(100.0, 2000), req(800.0, 40)];
    let b = vec![req(120.0, 40)];
    let o = shared::replay(&svc, &tier, &[a, b]);
    let (a, b) = (&o.models[0], &o.models[1]);
    assert_eq!(a.evictions, 1, "{a:?}");
    assert_eq!(b.evictions, 0, "{b:?}");
    // A's request ends at 101.3 + 0.1 + 50 s; then A sleeps (5.7 s), then
    // B wakes (0.3 s) at the next steps.
    let a_done = 101.3 + 0.1 + 50.0;
    assert!(b.evicted_wait_max > a_done + 5.7 + 0.3 - 120.0, "{b:?}");
    assert!(
        b.evicted_wait_max <= a_done + 5.7 + 0.3 + 2.0 - 120.0,
        "{b:?}"
    );
    assert_eq!(b.failed, 0, "{b:?}");
    assert!((a.wake_wait_max - 1.3).abs() < 1e-9, "{a:?}");
}

fn shipped(name: &str) -> Vec<Arrival> {
    let path = format!("{}/traces/{name}", env!("CARGO_MANIFEST_DIR"));
    parse_csv(&std::fs::read_to_string(&path).expect(&path)).expect("the shipped trace parses")
}

fn fleet8() -> Vec<FleetModel> {
    let inputs = [
        shipped("AzureLLMInferenceTrace_conv.csv"),
        shipped("AzureLLMInferenceTrace_code.csv"),
    ];
    fleet::models(&inputs, 8, 24.0)
}

#[test]
fn each_model_of_the_fleet_has_its_own_trace() {
    let models = fleet8();
    let counts: Vec<usize> = models.iter().map(|m| m.arrivals.len()).collect();
    assert_eq!(counts, [283, 142, 565, 72, 283, 142, 565, 72]);
    // Same density, different rows and hours.
    assert_ne!(models[0].arrivals[0], models[4].arrivals[0]);
    assert!((models[4].shift - models[0].shift - 4.0 / 8.0 * 84_140.0).abs() < 100.0);
    for m in &models {
        assert!(
            m.arrivals.windows(2).all(|w| w[0].t <= w[1].t),
            "{}",
            m.name
        );
    }
}

#[test]
fn the_sleep_tier_meets_the_target_at_every_keda_cooldown() {
    let svc = Service::default();
    let k = Knobs::defaults(&svc);
    let models = fleet8();
    let base = Tier::new(0, Level::One, 1);
    // The settings docs/replay.md names (found by the whole search,
    // `fleet --frontier`).
    let named = [
        base,
        Tier {
            after: 60,
            zero_after: Some(60),
            ..base
        },
        Tier { gpus: 2, ..base },
    ];
    let grid = Grid {
        shared: &named,
        gpuscale: &[(IdleSignal::InFlight, 0)],
    };
    let cooldowns: Vec<u64> = (1..=10).map(|i| 60 * i).collect();
    let f = frontier(&svc, &models, &k, &cooldowns, &grid);
    let keda: Vec<f64> = f.keda.iter().map(|(_, t)| t.gpu_hours).collect();
    assert!(
        (keda[0] - 45.52).abs() < 0.005 && (keda[9] - 127.09).abs() < 0.005,
        "{keda:?}"
    );
    for (c, kp) in &f.keda {
        let b = best(&f.shared, kp).unwrap_or_else(|| panic!("cooldown {c}s: {f:#?}"));
        let want = if *c == 60 { named[1] } else { named[0] };
        assert_eq!(b.tier, want, "cooldown {c}s");
        assert!(b.gpu_hours <= kp.gpu_hours / 2.0);
    }
    // A level-1 wake: 0.3 s and at most one step.
    for s in &f.shared {
        assert!(wake_wait_max(s) <= 1.3 + 1e-9, "{}", s.tier.name());
    }
    let one = &f.shared[0];
    assert!((one.gpu_hours - 23.41).abs() < 0.005, "{}", one.gpu_hours);
    assert_eq!(one.slo_violation_minutes(), 113);
}

fn replay(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscale-replay"))
        .args(args)
        .output()
        .expect("run gpuscale-replay")
}

const CONV: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/traces/AzureLLMInferenceTrace_conv.csv"
);
const CODE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/traces/AzureLLMInferenceTrace_code.csv"
);

#[test]
fn fleet_flags_take_units_and_a_fleet_that_cannot_fit_is_refused() {
    let help = String::from_utf8_lossy(&replay(&["fleet", "--help"]).stdout).into_owned();
    for flag in [
        "--sleep-after",
        "--wake",
        "--sleep-time",
        "--reload",
        "--zero-after",
    ] {
        let line = help.lines().find(|l| l.contains(flag)).expect(flag);
        assert!(line.contains("<DURATION>"), "{line}");
    }
    assert!(help.contains("--gpu-vram <SIZE>"), "{help}");
    let out = replay(&["fleet", CONV, "--awake-vram", "24"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GiB or MiB"));
    let out = replay(&["fleet", CONV, CODE, "--models", "40"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("--shared-gpus"), "{err}");
}

/// The fleet picture in docs/ is what `fleet --frontier-svg` draws now; to
/// regenerate it see docs/replay.md ("The sleep tier").
#[test]
fn the_fleet_picture_is_current() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("fleet.svg");
    let cooldowns = "1m,2m,3m,4m,5m,6m,7m,8m,9m,10m";
    let out = replay(&[
        "fleet",
        CONV,
        CODE,
        "--frontier",
        cooldowns,
        "--frontier-svg",
        &path.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drawn = std::fs::read_to_string(&path).expect("the drawn picture");
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/replay-fleet.svg"
    ))
    .expect("docs/replay-fleet.svg");
    assert!(
        drawn == shipped,
        "docs/replay-fleet.svg differs from what fleet --frontier-svg draws: regenerate it (docs/replay.md)"
    );
}
