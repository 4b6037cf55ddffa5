//! The shipped rule files in `vmalert` against VictoriaMetrics: every file
//! loads (`vmalert -dryRun` parses each expression with MetricsQL), and on
//! the alerts scenario (`tests/scenarios/alerts.yaml`) vmalert records the
//! same series and fires the same alerts as Prometheus scraping the same
//! exporter with the same rule copies (durations divided by 600, as in
//! `alerts/end_to_end.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gpuscale_e2e::alerts::repo_root;
use gpuscale_e2e::alerts::rules;
use gpuscale_e2e::alerts::stack::{
    self, Alertmanager, OPERATOR_TARGET_LABELS, Prometheus, Webhook, relabel_configs,
};
use gpuscale_e2e::exporter::Exporter;
use gpuscale_e2e::victoria::{self, VictoriaMetrics, Vmalert};
use serde_json::Value;

#[test]
fn every_rule_file_loads_in_vmalert() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copies = rules::write_time_scaled(dir.path());
    for file in rules::rule_files().iter().chain(&copies) {
        if let Err(out) = victoria::dry_run(file) {
            panic!("vmalert -dryRun refuses {}:\n{out}", file.display());
        }
    }
}

/// The exporter's scrape job as the Prometheus Operator runs it with the
/// shipped ServiceMonitor (as `stack::prometheus_config`), for both engines.
fn exporter_job(exporter: &str) -> String {
    let labels: BTreeMap<String, String> = OPERATOR_TARGET_LABELS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let relabels: String = relabel_configs(&stack::servicemonitor_relabelings())
        .iter()
        .map(|r| format!("      - {r}\n"))
        .collect();
    format!(
        "scrape_configs:\n  - job_name: gpuscale-exporter\n    honor_labels: true\n    static_configs:\n      - targets: ['{exporter}']\n        labels: {}\n    relabel_configs:\n{relabels}",
        serde_json::to_string(&labels).expect("labels")
    )
}

/// An alert as a sorted label list (alertname included); vmalert's own
/// `alertgroup` label left out.
type AlertKey = Vec<(String, String)>;

fn firing(alerts: &[Value]) -> BTreeSet<AlertKey> {
    alerts
        .iter()
        .filter(|a| a["state"] == "firing")
        .filter_map(|a| a["labels"].as_object())
        .map(|l| {
            l.iter()
                .filter(|(k, _)| k.as_str() != "alertgroup")
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .collect()
}

/// Labels (without the metric name) and value of each series of an
/// instant vector.
fn samples(result: &[Value]) -> BTreeMap<String, f64> {
    result
        .iter()
        .map(|s| {
            let mut labels: Vec<(String, String)> = s["metric"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.as_str() != "__name__")
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect();
            labels.sort();
            let v = s["value"][1].as_str().and_then(|v| v.parse().ok());
            (format!("{labels:?}"), v.unwrap_or(f64::NAN))
        })
        .collect()
}

/// The recorded series' names, once each.
fn recorded() -> BTreeSet<String> {
    rules::all_rules()
        .into_iter()
        .filter(|r| !r.is_alert)
        .map(|r| r.name)
        .collect()
}

/// Alerts the scenario raises (`alerts/end_to_end.rs`, `EXPECTED`).
const SCENARIO_ALERTS: usize = 8;

/// Both engines on one exporter: Prometheus with the rule copies, and
/// VictoriaMetrics with vmalert on the same copies notifying a real
/// Alertmanager. The firing alerts and every recorded series must agree.
#[test]
fn vmalert_records_and_fires_like_prometheus() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let copies = rules::write_time_scaled(&dir.path().join("rules"));
    let exporter = Exporter::simulate(
        &repo_root().join("tests/scenarios/alerts.yaml"),
        &[
            "--gpu-price",
            "NVIDIA H100 80GB HBM3=4",
            "--gpu-price",
            "NVIDIA A100 80GB PCIe=2",
        ],
    );
    let job = exporter_job(&format!("127.0.0.1:{}", exporter.port));
    let rule_files: String = copies
        .iter()
        .map(|p| format!("  - {}\n", p.display()))
        .collect();
    let prom = Prometheus::start(
        dir.path(),
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n{rule_files}{job}"
        ),
        stack::free_port(),
    );
    let vm = VictoriaMetrics::start(&job);
    let webhook = Webhook::start();
    let am = Alertmanager::start(dir.path(), &webhook.url());
    let vmalert = Vmalert::start(dir.path(), &copies, &vm.url, &am.url);
    eprintln!("stack up after {:?}", started.elapsed());

    // Both have settled when the scenario's alerts fire and the firing sets
    // are equal twice in a row (the slowest `for:` is 6 s).
    let t0 = Instant::now();
    let mut last = None;
    let (p, v) = loop {
        let p = firing(&prom.api("/api/v1/alerts", &[]).map_or(Vec::new(), |d| {
            d["alerts"].as_array().cloned().unwrap_or_default()
        }));
        let v = firing(&vmalert.alerts());
        let settled = p == v && last.as_ref() == Some(&p) && p.len() >= SCENARIO_ALERTS;
        if settled || t0.elapsed() > Duration::from_secs(40) {
            break (p, v);
        }
        last = (p == v).then_some(p);
        std::thread::sleep(Duration::from_secs(1));
    };
    let only_prom: Vec<_> = p.difference(&v).collect();
    let only_vm: Vec<_> = v.difference(&p).collect();
    assert!(
        only_prom.is_empty() && only_vm.is_empty(),
        "firing only in Prometheus: {only_prom:#?}\nfiring only in vmalert: {only_vm:#?}\n{}",
        vmalert.guard.log_tail(30)
    );
    assert!(p.len() >= SCENARIO_ALERTS, "the scenario's alerts: {p:#?}");
    eprintln!("alerts agree after {:?}", started.elapsed());

    // A rule reading a series recorded by another sees it only once
    // vmalert has written it back and VictoriaMetrics serves the new series
    // (about 10 s a level here): the five-level waste-cost chain settles
    // some 35 s after the alerts.
    let t0 = Instant::now();
    loop {
        let with_data = recorded()
            .iter()
            .filter(|n| prom.query(n).is_ok_and(|r| !r.is_empty()))
            .count();
        let mut diff = recorded_differences(&prom, &vm);
        if with_data < 20 {
            diff.push(format!(
                "{with_data} recorded names with data in Prometheus"
            ));
        }
        if diff.is_empty() {
            eprintln!("recorded series agree after {:?}", started.elapsed());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "recorded series differ (Prometheus, vmalert):\n{}\n{}",
            diff.join("\n"),
            vmalert.guard.log_tail(30)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Every recorded name whose series differ between the engines: other
/// label sets, or a vmalert value outside what Prometheus recorded over the
/// last 10 s, give or take 5 %. The two engines scrape the exporter and
/// evaluate at different instants, and the scenario's utilization moves.
fn recorded_differences(prom: &Prometheus, vm: &VictoriaMetrics) -> Vec<String> {
    let mut out = Vec::new();
    for name in recorded() {
        let now = samples(&prom.query(&name).unwrap_or_default());
        let got = samples(&vm.vector(&name).unwrap_or_default());
        if now.is_empty() && got.is_empty() {
            // Serving rules: the scenario runs no inference server.
            continue;
        }
        if now.keys().ne(got.keys()) {
            out.push(format!(
                "{name}: {} series, {} series",
                now.len(),
                got.len()
            ));
            continue;
        }
        let over = |f: &str| samples(&prom.query(&format!("{f}({name}[10s])")).unwrap_or_default());
        let (lo, hi) = (over("min_over_time"), over("max_over_time"));
        for (labels, g) in &got {
            let (Some(lo), Some(hi)) = (lo.get(labels), hi.get(labels)) else {
                out.push(format!("{name}{labels}: no recent values in Prometheus"));
                continue;
            };
            let slack = 0.05 * lo.abs().max(hi.abs()).max(1e-9);
            if !(lo - slack..=hi + slack).contains(g) {
                out.push(format!(
                    "{name}{labels}: Prometheus {lo}..{hi}, vmalert {g}"
                ));
            }
        }
    }
    out
}
