//! Dashboards when the exporter is scraped twice (a ServiceMonitor and a
//! PodMonitor selecting the same pods, or a Prometheus HA pair behind one
//! query layer): every panel query answers on a Prometheus scraping the
//! exporter under two jobs as on one scraping it under one job, with the
//! same series (job and instance aside) and values that agree. A count or
//! sum over duplicated series would double.

use std::collections::BTreeMap;
use std::time::Duration;

use gpuscale_e2e::alerts::dashboards::{self, substitute, without_zero_fallback};
use gpuscale_e2e::alerts::procs::eventually;
use gpuscale_e2e::alerts::repo_root;
use gpuscale_e2e::alerts::rules;
use gpuscale_e2e::alerts::stack::{self, Prometheus};
use gpuscale_e2e::exporter::Exporter;

use super::require;

/// Values may differ this much (relative) between the two Prometheus: they
/// scrape at different instants and start a moment apart. A doubled count
/// is 100 % off.
const TOLERANCE: f64 = 0.3;

/// Names whose values time the exporter's own work or its age (they
/// differ from one collection or scrape instant to the next, not with the
/// number of jobs): for queries that read them only the series are compared.
const TIMINGS: &[&str] = &[
    "_duration_seconds",
    "last_collection_timestamp_seconds",
    "process_cpu_seconds_total",
];

/// A query's answer: series (labels without job and instance) → value.
fn answer(prom: &Prometheus, q: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for s in prom.query(q)? {
        let mut labels: BTreeMap<String, String> = s["metric"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k != "job" && *k != "instance")
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
            .collect();
        labels.remove("__name__");
        let key = format!("{labels:?}");
        let v = s["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        if out.insert(key.clone(), v).is_some() {
            return Err(format!("two series differ only in job/instance: {key}"));
        }
    }
    Ok(out)
}

fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()) + 1e-9
}

fn started(
    dir: &std::path::Path,
    rules: &[std::path::PathBuf],
    addr: &str,
    jobs: &[&str],
) -> Prometheus {
    let config = stack::exporter_jobs_config(rules, "", addr, jobs);
    Prometheus::start(dir, &config, stack::free_port())
}

#[test]
fn dashboards_count_the_same_with_two_scrape_jobs() {
    require("prometheus");
    gpuscale_e2e::bins::ensure_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let exporter = Exporter::simulate(
        &repo_root().join("tests/scenarios/alerts.yaml"),
        &[
            "--gpu-price",
            "NVIDIA H100 80GB HBM3=4",
            "--gpu-price",
            "NVIDIA A100 80GB PCIe=2",
        ],
    );
    let addr = format!("127.0.0.1:{}", exporter.port);
    let rule_files = rules::write_time_scaled(&dir.path().join("rules"));
    let (one_dir, two_dir) = (dir.path().join("one"), dir.path().join("two"));
    std::fs::create_dir_all(&one_dir).expect("dir");
    std::fs::create_dir_all(&two_dir).expect("dir");
    let one = started(&one_dir, &rule_files, &addr, &["gpuscale-exporter"]);
    let two = started(
        &two_dir,
        &rule_files,
        &addr,
        &["gpuscale-exporter", "gpuscale-exporter-podmonitor"],
    );
    // Enough history for the rate windows (1m scaled to 4s) and the 1h
    // averages (6s) of the rules.
    for prom in [&one, &two] {
        eventually(
            "10 s of scrapes and recorded allocations",
            Duration::from_secs(60),
            || {
                let q = "count_over_time(gpuscale:gpu_allocation:share[15s]) >= 10";
                (!prom.query(q).ok()?.is_empty()).then_some(())
            },
            || prom.proc.log_tail(10),
        );
    }
    let mut differ = Vec::new();
    let mut compared = 0;
    for d in dashboards::load_all() {
        let vars = d.variables();
        for q in d.queries() {
            let expr = substitute(without_zero_fallback(&q.expr), &vars);
            let (a, b) = match (answer(&one, &expr), answer(&two, &expr)) {
                (Ok(a), Ok(b)) => (a, b),
                (a, b) => {
                    differ.push(format!("{}: {a:?} / {b:?}: {expr}", q.key()));
                    continue;
                }
            };
            if a.is_empty() && b.is_empty() {
                continue;
            }
            compared += 1;
            let same_series = a.len() == b.len() && a.keys().all(|k| b.contains_key(k));
            let timing = TIMINGS.iter().any(|t| expr.contains(t));
            let same_values = same_series && (timing || a.iter().all(|(k, v)| close(*v, b[k])));
            if !same_values {
                differ.push(format!(
                    "{}: one job {} series, two jobs {}: {expr}\n    one: {a:?}\n    two: {b:?}",
                    q.key(),
                    a.len(),
                    b.len()
                ));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {compared} dashboard queries answer differently with two scrape jobs:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert!(compared > 100, "only {compared} queries had data");
    eprintln!("{compared} dashboard queries answer the same with one and two scrape jobs");
}
