//! The replay on small known traces: static GPU-hours exact, the HPA's
//! documented arithmetic, the controller through `decide`, bad traces.

use gpuscale_replay::compare::Knobs;
use gpuscale_replay::model::Service;
use gpuscale_replay::policy::{Hpa, Static};
use gpuscale_replay::sim::replay;
use gpuscale_replay::trace::{Arrival, parse_csv};

fn req(t: f64) -> Arrival {
    Arrival {
        t,
        input: 1000,
        output: 40,
    }
}

#[test]
fn static_gpu_hours_are_exact() {
    // One hour (3600 one-second steps from the first arrival), 2 replicas × 4 GPUs.
    let mut trace: Vec<Arrival> = (0..3600)
        .step_by(10)
        .map(|s| req(1000.0 + f64::from(s)))
        .collect();
    trace.push(req(4599.5));
    let svc = Service {
        gpus_per_replica: 4,
        price_per_gpu_hour: 3.0,
        ..Service::default()
    };
    let mut p = Static {
        label: "static",
        replicas: 2,
    };
    let o = replay(&svc, &trace, &mut p);
    assert_eq!(o.gpu_hours, 8.0);
    assert_eq!(o.cost, 24.0);
    assert_eq!(o.slo_violation_minutes, 0);
    assert_eq!(o.scale_events, 0);
    // 1000 prompt tokens at 10 000 tokens/s: TTFT 0.1 s with free slots.
    assert!((o.ttft_p95 - 0.1).abs() < 1e-9, "{}", o.ttft_p95);
}

#[test]
fn hpa_arithmetic_follows_the_kubernetes_docs() {
    let hpa = Hpa::new(10.0, 1, 20);
    // Within 10 % tolerance: 3 replicas at 32 (ratio 1.067) stay.
    assert_eq!(hpa.raw(3, 32.0), 3);
    // Outside: 3 replicas at 45 → ceil(45 / 10) = 5.
    assert_eq!(hpa.raw(3, 45.0), 5);
    // AverageValue from zero: a positive metric scales up, zero stays at 0.
    assert_eq!(hpa.raw(0, 7.0), 1);
    assert_eq!(hpa.raw(0, 0.0), 0);
    // Scale-down stabilization: the highest recommendation of the last 300 s.
    let mut hpa = Hpa::new(10.0, 1, 20);
    assert_eq!(hpa.sync_once(0, 5, 50.0), 5);
    assert_eq!(hpa.sync_once(15, 5, 10.0), 5);
    assert_eq!(hpa.sync_once(299, 5, 10.0), 5);
    assert_eq!(hpa.sync_once(300, 5, 10.0), 1);
    // Scale-up limit: max(100 %, 4 pods) per period.
    let mut hpa = Hpa::new(1.0, 1, 100);
    assert_eq!(hpa.sync_once(0, 1, 50.0), 5);
    assert_eq!(hpa.sync_once(15, 10, 50.0), 20);
}

/// A burst at 0 s, silence, a burst at 1000 s (it wakes the parked service),
/// silence until 3000 s.
fn bursts() -> Vec<Arrival> {
    let mut t: Vec<Arrival> = (0..5).map(|i| req(f64::from(i))).collect();
    t.extend((0..5).map(|i| req(1000.0 + f64::from(i))));
    t.push(req(3000.0));
    t
}

fn replicas_at(o: &gpuscale_replay::sim::Outcome, second: usize) -> i32 {
    o.minutes[second / 60].replicas
}

#[test]
fn controller_runs_decide() {
    let svc = Service::default();
    let mut k = Knobs::defaults(&svc);
    k.idle_for = 120;
    // Instant reads: this test is about decide, not the signal path.
    (k.scrape, k.adapter_poll) = (1, 1);
    let parked = replay(&svc, &bursts(), &mut k.gpuscale(false).unwrap());
    // Parked after the first burst, woken by the second, parked again.
    assert_eq!(replicas_at(&parked, 600), 0);
    assert_eq!(replicas_at(&parked, 1020), 1);
    assert_eq!(replicas_at(&parked, 1500), 0);
    assert_eq!(parked.cold_waiters, 6);
    // decide's minUpDuration refusal: a wake holds for 1200 s however idle.
    k.min_up = 1200;
    let held = replay(&svc, &bursts(), &mut k.gpuscale(false).unwrap());
    assert_eq!(
        replicas_at(&held, 600),
        0,
        "the first park has no wake before it"
    );
    assert_eq!(replicas_at(&held, 1500), 1);
    assert_eq!(replicas_at(&held, 2160), 1);
    assert_eq!(replicas_at(&held, 2400), 0);
}

#[test]
fn bad_traces_get_clear_errors() {
    let h = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    let err = |s: &str| parse_csv(s).expect_err("must fail").to_string();
    assert_eq!(err(h), "trace is empty: no request rows");
    assert_eq!(err(""), "trace is empty: no request rows");
    assert!(
        err(&format!(
            "{h}2023-11-16 18:15:50,1,1\n2023-11-16 18:15:46,1,1\n"
        ))
        .starts_with("line 3: timestamp 2023-11-16 18:15:46 is before the previous row's"),
    );
    assert_eq!(
        err(&format!("{h}2023-11-16 18:15:50,-4,1\n")),
        "line 2: ContextTokens is negative: -4"
    );
    assert_eq!(
        err(&format!("{h}-5,1,1\n")),
        "line 2: TIMESTAMP \"-5\": timestamp -5 is outside 0 (1970-01-01) to 253402300799 (9999-12-31)"
    );
    assert_eq!(
        err(&format!("{h}12,1\n")),
        "line 2: expected 3 columns, found 2"
    );
}

#[test]
fn every_flag_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/replay.md"))
        .expect("docs/replay.md");
    for sub in ["run", "derive"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscale-replay"))
            .args([sub, "--help"])
            .output()
            .expect("run --help");
        let help = String::from_utf8_lossy(&out.stdout);
        for flag in help.split_whitespace().filter(|w| w.starts_with("--")) {
            let flag = flag.trim_end_matches([',', '.', ')', ';', ':']);
            if flag != "--help" {
                assert!(
                    doc.contains(&format!("`{flag}")),
                    "{sub} {flag} is not in docs/replay.md"
                );
            }
        }
    }
}
