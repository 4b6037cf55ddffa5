//! gpuscale-replay: a range query through the real Prometheus of the
//! tests gives the same arrivals, and the same table, as the equivalent
//! CSV. (Here rather than in replay/tests: replay's own tests need no
//! Prometheus harness, so its dependency tree holds no Kubernetes client.)

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use gpuscale_e2e::adapter::{procs, prom};
use gpuscale_e2e::bins;
use gpuscale_replay::trace::{self, RangeQuery};

/// The test fleet's chat + embed queue gauges on GPU nodes: 3 + 4 + 10 = 17,
/// read as 17 requests per second (the CPU-node pod with 1000 is left out).
const QUERY: &str = "sum(vllm:num_requests_waiting{namespace=\"inference\",pod!=\"chat-cpu-0\"})";

fn run(args: &[&str]) -> String {
    let out = Command::new(bins::replay())
        .args(["run", "--input-tokens", "1000", "--output-tokens", "200"])
        .args(args)
        .output()
        .expect("run gpuscale-replay");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The last line is the replay's timing.
    text.lines()
        .filter(|l| !l.contains("replayed"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn range_query_equals_csv() {
    let p = prom::shared();
    procs::eventually("ten seconds of samples", || {
        let v = p.query(&format!("count_over_time(({QUERY})[15s:1s])"))?;
        let n: f64 = v["data"]["result"][0]["value"][1].as_str()?.parse().ok()?;
        (n >= 10.0).then_some(())
    });
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let (end, start) = (now as f64 - 1.0, now as f64 - 6.0);
    let q = RangeQuery {
        url: &p.url,
        query: QUERY,
        start,
        end,
        step: 1.0,
        timeout: std::time::Duration::from_secs(30),
    };
    let from_prom = trace::from_prometheus(&q, 1000, 200).expect("range query");

    let mut csv = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\n");
    for s in 0..6 {
        for i in 0..17 {
            csv.push_str(&format!(
                "{:.6},1000,200\n",
                start + f64::from(s) + f64::from(i) / 17.0
            ));
        }
    }
    let from_csv = trace::parse_csv(&csv).expect("csv");
    assert_eq!(from_prom.len(), 6 * 17);
    for (a, b) in from_prom.iter().zip(&from_csv) {
        assert!((a.t - b.t).abs() < 1e-6, "{a:?} vs {b:?}");
        assert_eq!((a.input, a.output), (b.input, b.output));
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.csv");
    std::fs::write(&path, &csv).expect("write csv");
    let (s, e) = (start.to_string(), end.to_string());
    let via_prom = run(&[
        "--prometheus",
        &p.url,
        "--query",
        QUERY,
        "--start",
        &s,
        "--end",
        &e,
        "--step",
        "1s",
    ]);
    let via_csv = run(&["--trace", path.to_str().expect("utf-8 path")]);
    assert_eq!(via_prom, via_csv);
}
