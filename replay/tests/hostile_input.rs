//! Input that used to abort, panic, hang or give a made-up result: each is
//! a clear error from the binary, or (a burst beyond capacity) a visible
//! saturation result. Range queries go to a loopback server speaking
//! Prometheus's HTTP API.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gpuscale_replay::compare::{Knobs, compare};
use gpuscale_replay::model::Service;
use gpuscale_replay::trace::Arrival;

fn replay(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscale-replay"))
        .arg("run")
        .args(args)
        .output()
        .expect("run gpuscale-replay")
}

/// The run fails cleanly (exit 1 or clap's 2, no signal) with `needle` in stderr.
fn fails_with(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{:?}: {err}",
        out.status
    );
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn csv_run(rows: &str) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.csv");
    std::fs::write(
        &path,
        format!("TIMESTAMP,ContextTokens,GeneratedTokens\n{rows}"),
    )
    .expect("write trace");
    replay(&["--trace", &path.to_string_lossy()])
}

#[test]
fn spans_and_timestamps_past_the_limits_are_errors() {
    // 10¹² s apart is past the year 9999; 10¹¹ s is within it, past the span.
    fails_with(
        &csv_run("0,10,10\n1000000000000,10,10\n"),
        "timestamp 1000000000000 is outside",
    );
    fails_with(
        &csv_run("0,10,10\n100000000000,10,10\n"),
        "limit of 366 days",
    );
    let thirty_years = format!(
        "1600000000,10,10\n{},10,10\n",
        1_600_000_000_u64 + 30 * 31_557_600
    );
    fails_with(&csv_run(&thirty_years), "limit of 366 days");
    fails_with(
        &csv_run("1000000000000-01-01 00:00:00,10,10\n"),
        "year 1000000000000 is outside 1970 to 9999",
    );
    fails_with(&csv_run("1e300,10,10\n"), "is outside 0 (1970-01-01)");
}

#[test]
fn bad_flags_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.csv");
    std::fs::write(&path, "TIMESTAMP,ContextTokens,GeneratedTokens\n0,1,1\n").expect("write");
    let trace = path.to_string_lossy().into_owned();
    let with = |extra: &[&str]| {
        let mut args = vec!["--trace", &trace];
        args.extend_from_slice(extra);
        replay(&args)
    };
    fails_with(&with(&["--max-replicas", "0"]), "--max-replicas");
    fails_with(&with(&["--hpa-target", "0"]), "--hpa-target");
    fails_with(&with(&["--cooldown", "99999999999999999"]), "--cooldown");
    fails_with(&with(&["--gpus-per-replica", "0"]), "--gpus-per-replica");
    fails_with(&with(&["--ttft-slo", "2h"]), "--ttft-slo");
    fails_with(&with(&["--client-deadline", "0s"]), "--client-deadline");
    fails_with(&with(&["--client-deadline", "NaN"]), "--client-deadline");
    fails_with(&with(&["--scrape-interval", "0s"]), "--scrape-interval");
    fails_with(&with(&["--adapter-poll", "0s"]), "--adapter-poll");
    fails_with(&with(&["--keda-polling", "0s"]), "--keda-polling");
    fails_with(&with(&["--frontier", "60s,x"]), "--frontier");
    fails_with(&with(&["--cooldown", "300"]), "has no unit");
    fails_with(&with(&["--ttft-slo", "2"]), "has no unit");
    fails_with(&with(&["--idle-signal", "qps"]), "--idle-signal");
    fails_with(&with(&["--frontier-svg", "f.svg"]), "--frontier");
    let prom = ["--prometheus", "http://127.0.0.1:9", "--query", "q"];
    let range = |start: &str, end: &str, step: &str| {
        let range = [
            format!("--start={start}"),
            format!("--end={end}"),
            format!("--step={step}"),
        ];
        let mut args = prom.to_vec();
        args.extend(range.iter().map(String::as_str));
        replay(&args)
    };
    fails_with(&range("0", "600", "0s"), "--step 0");
    fails_with(&range("0", "946080000", "60s"), "limit of 366 days");
    fails_with(&range("-5", "600", "60s"), "--start");
    fails_with(&range("0", "86400", "1s"), "raise --step");
}

/// Serves one canned `query_range` answer per connection; `None` accepts
/// and never answers.
pub(crate) fn fake_prometheus(body: Option<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            match &body {
                Some(b) => {
                    let _ = write!(
                        c,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                        b.len()
                    );
                }
                None => held.push(c),
            }
        }
    });
    url
}

pub(crate) fn matrix(values: &str) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{}},"values":[{values}]}}]}}}}"#
    )
}

fn range_query(url: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "--prometheus",
        url,
        "--query",
        "q",
        "--start",
        "1000",
        "--end",
        "1120",
        "--step",
        "60s",
    ];
    args.extend_from_slice(extra);
    replay(&args)
}

#[test]
fn bad_prometheus_answers_are_errors() {
    let unsorted = fake_prometheus(Some(matrix(r#"[1060,"1"],[1000,"1"]"#)));
    fails_with(
        &range_query(&unsorted, &[]),
        "not increasing: 1000 after 1060",
    );
    let negative = fake_prometheus(Some(matrix(r#"[-3.7e18,"1"],[1000,"1"]"#)));
    fails_with(&range_query(&negative, &[]), "is outside 0 (1970-01-01)");
    let flood = fake_prometheus(Some(matrix(r#"[1000,"100000000"]"#)));
    fails_with(&range_query(&flood, &[]), "more than the limit of 10000000");
}

#[test]
fn a_prometheus_that_never_answers_times_out() {
    let silent = fake_prometheus(None);
    let began = Instant::now();
    let out = range_query(&silent, &["--prometheus-timeout", "1s"]);
    fails_with(&out, "--prometheus-timeout");
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn a_burst_beyond_capacity_is_visible_saturation() {
    // One million requests in the same second.
    let burst: Vec<Arrival> = (0..1_000_000)
        .map(|i| Arrival {
            t: 1_700_000_000.0 + f64::from(i) / 1e6,
            input: 1000,
            output: 200,
        })
        .collect();
    let svc = Service::default();
    for o in compare(&svc, &burst, &Knobs::defaults(&svc)) {
        assert!(
            o.unserved > 900_000,
            "{}: {} unserved",
            o.policy,
            o.unserved
        );
        assert!(
            o.slo_violation_minutes >= 1,
            "{}: no SLO violation",
            o.policy
        );
        assert!(
            o.ttft_p95 > svc.ttft_slo,
            "{}: p95 {}",
            o.policy,
            o.ttft_p95
        );
    }
}
