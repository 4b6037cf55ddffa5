//! A fake Prometheus answering the advisor with hostile data: impossible
//! prices, ratios and memory, negative counters, duplicate series,
//! warnings, no workloads. Each value is refused by name and never turned
//! into advice; each broken answer is an error naming it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use gpuscale_advisor::tables::Tables;
use gpuscale_advisor::{Error, Options, Report, run};

const GPU: &str = r#""cluster":"","node":"n1","uuid":"GPU-1","mig_uuid":"""#;
const W: &str =
    r#""cluster":"","namespace":"ml","workload_kind":"Deployment","workload":"embedder""#;

/// An answer: a vector of `(labels, value)` and optional warnings.
fn vector(series: &[(&str, &str)], warnings: &[&str]) -> String {
    let r: Vec<String> = series
        .iter()
        .map(|(l, v)| format!(r#"{{"metric":{{{l}}},"value":[1,"{v}"]}}"#))
        .collect();
    let w: Vec<String> = warnings.iter().map(|w| format!("{w:?}")).collect();
    format!(
        r#"{{"status":"success","warnings":[{}],"data":{{"resultType":"vector","result":[{}]}}}}"#,
        w.join(","),
        r.join(",")
    )
}

/// A week-long healthy embedder on one H100: (what the query contains,
/// answer), first match wins; anything else is an empty vector.
fn healthy() -> Vec<(&'static str, String)> {
    let wg = format!(r#"{W},"node":"n1","uuid":"GPU-1","mig_uuid":"""#);
    let model = format!(r#"{GPU},"model":"NVIDIA H100 80GB HBM3""#);
    vec![
        ("sum_over_time(", vector(&[(&wg, "2016")], &[])),
        (
            "count by (cluster, namespace, workload_kind, workload, node",
            vector(&[(&wg, "1")], &[]),
        ),
        ("count by (cluster, node", vector(&[(GPU, "1")], &[])),
        ("gpu_info[", vector(&[(&model, "1")], &[])),
        (
            "gpu_memory_total_bytes[",
            vector(&[(GPU, "80000000000")], &[]),
        ),
        ("gpu_price_usd_per_hour[", vector(&[(GPU, "4")], &[])),
        ("last_over_time(gpu_mig_", vector(&[], &[])),
        ("(gpu_pod_allocation))[", vector(&[(W, "2016")], &[])),
        ("max_over_time((max by", vector(&[(W, "6442450944")], &[])),
        (
            "quantile_over_time(0.99, (max by (cluster, namespace, workload_kind",
            vector(&[(W, "6442450944")], &[]),
        ),
        ("< 0.05", vector(&[(W, "0")], &[])),
        ("count_over_time(", vector(&[(W, "2016")], &[])),
        ("gpu_utilization_ratio", vector(&[(W, "0.08")], &[])),
        ("gpu_sm_active_ratio", vector(&[(W, "0.08")], &[])),
        ("gpu_tensor_active_ratio", vector(&[(W, "0.03")], &[])),
        ("gpu_dram_active_ratio", vector(&[(W, "0.05")], &[])),
        (
            "vllm:generation_tokens_total",
            vector(&[(W, "1000000000")], &[]),
        ),
    ]
}

/// `healthy()` with the answer to `what` replaced (or put first).
fn with(what: &'static str, answer: String) -> Vec<(&'static str, String)> {
    let mut rules = healthy();
    match rules.iter_mut().find(|(k, _)| *k == what) {
        Some(r) => r.1 = answer,
        None => rules.insert(0, (what, answer)),
    }
    rules
}

fn form_value(body: &str, key: &str) -> String {
    let raw = body
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_default();
    let mut out = Vec::new();
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("test set-up");
                out.push(u8::from_str_radix(hex, 16).expect("test set-up"));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).expect("test set-up")
}

/// Serves `rules` on a loopback port until the test ends; its URL.
fn fake(rules: Vec<(&'static str, String)>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("test set-up");
    let url = format!("http://{}", l.local_addr().expect("test set-up"));
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut r = BufReader::new(c.try_clone().expect("test set-up"));
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            let q = form_value(&String::from_utf8_lossy(&body), "query");
            let answer = rules
                .iter()
                .find(|(k, _)| q.contains(k))
                .map_or_else(|| vector(&[], &[]), |(_, a)| a.clone());
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    url
}

fn advise(rules: Vec<(&'static str, String)>) -> Result<Report, Error> {
    let o = Options {
        prometheus: fake(rules),
        end: 1_000_000.0,
        range: "7d".into(),
        step: "5m".into(),
        timeout: Duration::from_secs(10),
        policy: Default::default(),
    };
    run(&o, &Tables::load(None, None).expect("test set-up"))
}

fn saving(r: &Report) -> f64 {
    r.workloads[0]
        .recommendations
        .iter()
        .map(|x| x.saving_usd_per_month)
        .sum()
}

#[test]
fn the_healthy_story_gets_advice() {
    let r = advise(healthy()).expect("healthy");
    assert!(r.excluded.is_empty(), "{:?}", r.excluded);
    assert!(saving(&r) > 0.0);
    assert_eq!(r.workloads[0].cost_usd_per_hour, Some(4.0));
}

#[test]
fn impossible_prices_are_refused_by_name_not_replaced_by_the_list_price() {
    for bad in ["-4", "0", "NaN", "+Inf", "1e300"] {
        let r = advise(with("gpu_price_usd_per_hour[", vector(&[(GPU, bad)], &[]))).expect(bad);
        assert!(
            r.excluded
                .iter()
                .any(|x| x.contains("gpu_price_usd_per_hour") && x.contains("uuid=\"GPU-1\"")),
            "{bad}: {:?}",
            r.excluded
        );
        let a = &r.workloads[0];
        assert_eq!(a.cost_usd_per_hour, None, "{bad}");
        assert_eq!(saving(&r), 0.0, "{bad}: {:?}", a.recommendations);
        assert_eq!(r.placement_saving_usd_per_month, 0.0, "{bad}");
        assert!(a.notes.iter().any(|n| n.contains("refused")), "{bad}");
    }
}

#[test]
fn an_absent_price_falls_back_to_the_table_with_a_note() {
    let r = advise(with("gpu_price_usd_per_hour[", vector(&[], &[]))).expect("absent");
    let a = &r.workloads[0];
    assert_eq!(a.cost_usd_per_hour, Some(6.88));
    assert!(
        a.notes.iter().any(|n| n.contains("list price")),
        "{:?}",
        a.notes
    );
}

#[test]
fn negative_vram_does_not_fit_anything() {
    let r = advise(with("max_over_time((max by", vector(&[(W, "-6e9")], &[]))).expect("vram");
    assert!(
        r.excluded
            .iter()
            .any(|x| x.contains("peak VRAM") && x.contains("negative"))
    );
    let a = &r.workloads[0];
    assert_eq!(a.vram_peak_gib, None);
    assert!(
        a.recommendations.iter().all(|x| x.kind == "scale_to_zero"),
        "{:?}",
        a.recommendations
    );
}

#[test]
fn zero_memory_is_refused_not_an_infinite_share() {
    let r = advise(with("gpu_memory_total_bytes[", vector(&[(GPU, "0")], &[]))).expect("mem");
    assert!(
        r.excluded
            .iter()
            .any(|x| x.contains("gpu_memory_total_bytes"))
    );
    let a = &r.workloads[0];
    assert_eq!(a.device_memory_gib, None);
    assert_ne!(a.bottleneck.as_str(), "memory_capacity");
}

#[test]
fn a_ratio_over_one_is_refused() {
    let r = advise(with("gpu_sm_active_ratio", vector(&[(W, "5")], &[]))).expect("sm");
    assert!(
        r.excluded
            .iter()
            .any(|x| x.contains("SM active") && x.contains("ratio"))
    );
    assert_eq!(r.workloads[0].sm_active_p95, None);
    // Within the documented tolerance it is kept.
    let r = advise(with(
        "gpu_sm_active_ratio",
        vector(&[(W, "1.0000001")], &[]),
    ))
    .expect("sm");
    assert!(r.excluded.is_empty(), "{:?}", r.excluded);
}

#[test]
fn a_negative_token_counter_gives_no_cost_per_token() {
    let ok = advise(healthy()).expect("healthy");
    assert!(ok.workloads[0].cost_usd_per_million_tokens.is_some());
    let r = advise(with(
        "vllm:prompt_tokens_total",
        vector(&[(W, "-3e9")], &[]),
    ))
    .expect("tok");
    assert!(
        r.excluded
            .iter()
            .any(|x| x.contains("vllm:prompt_tokens_total"))
    );
    assert_eq!(r.workloads[0].cost_usd_per_million_tokens, None);
}

#[test]
fn a_duplicated_series_is_an_error_naming_it() {
    let wg = format!(r#"{W},"node":"n1","uuid":"GPU-1","mig_uuid":"""#);
    for what in [
        "count by (cluster, namespace, workload_kind, workload, node",
        "sum_over_time(",
        "gpu_price_usd_per_hour[",
    ] {
        let labels = if what.contains("price") { GPU } else { &wg };
        let e = advise(with(what, vector(&[(labels, "1"), (labels, "1")], &[])))
            .expect_err(what)
            .to_string();
        assert!(e.contains("duplicate series") && e.contains("GPU-1"), "{e}");
    }
}

#[test]
fn without_sm_data_the_text_says_utilization() {
    let r = advise(with("gpu_sm_active_ratio", vector(&[], &[]))).expect("no sm");
    let mig = crate::fleet::rec(&r.workloads[0], "mig");
    assert!(
        !mig.why.contains("SM p95") && !mig.why.contains("SM active p95"),
        "{}",
        mig.why
    );
    assert!(mig.why.contains("utilization p95"), "{}", mig.why);
}

fn binary(url: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscale-advisor"))
        .args(["--prometheus", url, "--end", "1000000"])
        .args(extra)
        .output()
        .expect("test set-up")
}

#[test]
fn warnings_are_printed_and_in_the_json() {
    let url = fake(with("gpu_info[", {
        let model = format!(r#"{GPU},"model":"NVIDIA H100 80GB HBM3""#);
        vector(&[(&model, "1")], &["partial answer: store unreachable"])
    }));
    let out = binary(&url, &["--output", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("store unreachable"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        v["warnings"][0]
            .as_str()
            .expect("a warning")
            .contains("store unreachable")
    );
}

#[test]
fn exit_codes_tell_usage_runtime_and_no_workloads_apart() {
    let empty = fake(vec![]);
    let out = binary(&empty, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no workloads found in [395200, 1000000]"),
        "{err}"
    );
    assert_eq!(binary(&empty, &["--range", "7x"]).status.code(), Some(2));
    assert_eq!(binary(&empty, &["--bogus"]).status.code(), Some(2));
    // Every flag's value is checked before Prometheus is asked: a duration
    // without a unit, a time that is not one, a tier that is no label value.
    for (args, says) in [
        (&["--query-timeout", "120"][..], "not a duration"),
        (&["--end", "2026-13-01T00:00:00Z"][..], "RFC 3339"),
        (&["--tier", "lab"][..], "NAMESPACE=TIER"),
        (&["--tier", "lab=no good"][..], "is not a tier"),
        (&["--default-tier", ""][..], "is not a tier"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gpuscale-advisor"))
            .args(["--prometheus", "http://127.0.0.1:9"])
            .args(args)
            .output()
            .expect("test set-up");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Nothing listens on port 9 of loopback: a runtime error.
    assert_eq!(binary("http://127.0.0.1:9", &[]).status.code(), Some(1));
}
