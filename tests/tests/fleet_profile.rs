//! `--profile fleet` (docs/operations.md, "Fleet profile"): series per GPU
//! on the built-in node within each profile's budget, and every alert,
//! recording rule, dashboard query and adapter GPU preset answering from a
//! real Prometheus scraping the fleet profile wherever it answers from one
//! scraping the full profile.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuscale_e2e::alerts::dashboards::{self, substitute, without_zero_fallback};
use gpuscale_e2e::alerts::http::Server;
use gpuscale_e2e::alerts::procs::{eventually, on_path};
use gpuscale_e2e::alerts::repo_root;
use gpuscale_e2e::alerts::rules;
use gpuscale_e2e::alerts::stack::{self, Prometheus};
use gpuscale_e2e::exporter::{Exporter, Metrics};
use gpuscale_exporter::collectors::profile::FLEET;
use serde_json::Value;
use tempfile::TempDir;

/// Series per GPU on the built-in node, at most (measured: full 72.6 =
/// 71.6 + the default power limit, which the power-cap alert compares
/// with; 71.6 = 64.6 + 7 hardware-state series: PCIe link generation and
/// width with their maxima, ECC mode, NVLink links active and inactive;
/// 69.6 before static facts became gpu_info labels; fleet 34.5). A new
/// per-GPU family raises them on purpose, with its row in operations.md.
const BUDGETS: &[(&str, f64)] = &[("full", 73.0), ("fleet", 35.0)];

/// Series per GPU as `bench/cardinality.sh` counts them: series with a
/// `uuid`, not of a MIG instance, a pod or a process, over the GPUs seen.
fn per_gpu(m: &Metrics) -> (usize, usize) {
    let mut gpus = BTreeSet::new();
    let mut series = 0;
    for s in &m.samples {
        let per_pod = s.name.starts_with("gpu_pod_") || s.name.starts_with("gpu_process_");
        if per_pod || s.labels.contains_key("mig_uuid") {
            continue;
        }
        if let Some(uuid) = s.labels.get("uuid") {
            gpus.insert(uuid.clone());
            series += 1;
        }
    }
    (series, gpus.len())
}

#[test]
fn series_per_gpu_stay_within_each_profiles_budget() {
    let mut report = Vec::new();
    for (profile, budget) in BUDGETS {
        let e = Exporter::spawn(&[
            "--simulate",
            "--collect-interval",
            "200ms",
            "--profile",
            profile,
        ]);
        e.wait_ready();
        // GPM rates need two samples; the pod join its first refresh.
        let m = e.scrape_until("GPM ratios and the pod join", |m| {
            m.has("gpu_sm_active_ratio") && m.get("gpuscale_exporter_pods", &[]) > Some(0.0)
        });
        let (series, gpus) = per_gpu(&m);
        assert_eq!(gpus, 8, "the built-in node has 8 GPUs");
        let per = series as f64 / gpus as f64;
        report.push(format!(
            "{profile}: {} series, {per:.1} per GPU",
            m.samples.len()
        ));
        assert!(
            per <= *budget,
            "--profile {profile}: {per:.1} series per GPU, budget {budget}"
        );
    }
    eprintln!("{}", report.join("; "));
}

/// Families the fleet profile sends only while non-zero (some values of
/// some of them always), and the GPU states it sends only while current.
fn sent_while_non_zero() -> Vec<&'static str> {
    let mut names: Vec<&str> = FLEET.iter().map(|(name, _)| *name).collect();
    names.retain(|n| *n != "gpu_clock_hertz");
    names.push("gpuscale_exporter_gpu_state");
    names
}

/// Families the fleet profile leaves out while they read healthy, or
/// altogether (docs/operations.md, "Fleet profile": what the fleet profile
/// does not see): an expression over them may answer on full only.
const HEALTHY_LEFT_OUT: &[&str] = &[
    // The PCIe link shape: served only while a link runs below its maximum.
    "gpu_pcie_link_",
    // ECC mode: sent only while ECC is off.
    "gpu_ecc_enabled",
    // NVLink links: sent only while some are inactive.
    "gpu_nvlink_links",
];

/// Prometheus with the time-scaled rules, scraping one exporter on the
/// alerts scenario in `profile`, and the fake targets.
struct Side {
    profile: &'static str,
    prom: Prometheus,
    _exporter: Exporter,
    _dir: TempDir,
}

fn start(profile: &'static str, fakes: &Server) -> (Side, Vec<PathBuf>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rule_copies = rules::write_time_scaled(&dir.path().join("rules"));
    let exporter = Exporter::simulate(
        &repo_root().join("tests/scenarios/alerts.yaml"),
        &[
            "--gpu-price",
            "NVIDIA H100 80GB HBM3=4",
            "--gpu-price",
            "NVIDIA A100 80GB PCIe=2",
            "--profile",
            profile,
        ],
    );
    // No Alertmanager and no adapter: only what the exporter feeds matters.
    let unused = format!("127.0.0.1:{}", stack::free_port());
    let config = stack::prometheus_config(
        &rule_copies,
        &unused,
        &format!("127.0.0.1:{}", exporter.port),
        &unused,
        &fakes.addr(),
    );
    let prom = Prometheus::start(dir.path(), &config, stack::free_port());
    let side = Side {
        profile,
        prom,
        _exporter: exporter,
        _dir: dir,
    };
    (side, rule_copies)
}

/// One expression both sides answer: what it is, the PromQL, and whether
/// it is an alert (whose firing series must be the same on both).
struct Expr {
    key: String,
    expr: String,
    alert: bool,
}

/// Every rule of the time-scaled copies.
fn scaled_rules(copies: &[PathBuf]) -> Vec<Expr> {
    let mut out = Vec::new();
    for path in copies {
        let doc: yaml_serde::Value = yaml_serde::from_str(
            &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}")),
        )
        .expect("rules YAML");
        for g in doc["groups"].as_sequence().expect("groups") {
            for r in g["rules"].as_sequence().expect("rules") {
                let name = r
                    .get("alert")
                    .or_else(|| r.get("record"))
                    .and_then(|v| v.as_str())
                    .expect("alert or record");
                out.push(Expr {
                    key: format!("{} {name}", file_name(path)),
                    expr: r["expr"].as_str().expect("expr").to_string(),
                    alert: r.get("alert").is_some(),
                });
            }
        }
    }
    out
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// Every expression to compare: rules, dashboard queries, GPU presets.
fn expressions(copies: &[PathBuf]) -> Vec<Expr> {
    let mut all = scaled_rules(copies);
    for d in dashboards::load_all() {
        let vars = d.variables();
        for q in d.queries() {
            all.push(Expr {
                key: q.key(),
                expr: substitute(without_zero_fallback(&q.expr), &vars),
                alert: false,
            });
        }
    }
    for (name, q) in [
        (
            "gpu_pressure",
            gpuscale_adapter::presets::GPU_PRESSURE_QUERY,
        ),
        (
            "gpu_pressure per pod",
            gpuscale_adapter::presets::GPU_PRESSURE_PER_POD_QUERY,
        ),
    ] {
        all.push(Expr {
            key: format!("preset {name}"),
            expr: q.replace("${matchers}", r#"namespace="ml-serve""#),
            alert: false,
        });
    }
    all
}

/// A result's labels without the scrape target's address, which differs
/// between the two exporters.
fn series(result: &[Value]) -> BTreeSet<String> {
    result
        .iter()
        .map(|s| {
            let mut m: BTreeMap<String, Value> = s["metric"]
                .as_object()
                .map(|o| o.clone().into_iter().collect())
                .unwrap_or_default();
            m.remove("instance");
            serde_json::to_string(&m).unwrap_or_default()
        })
        .collect()
}

fn all_zero(result: &[Value]) -> bool {
    result
        .iter()
        .all(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()) == Some(0.0))
}

/// Waits until both Prometheus servers have scraped for `secs` seconds
/// (the time-scaled rules' longest rate window is 4s) and recorded rules.
fn wait_for_history(sides: &[&Side], secs: u32) {
    let q = format!(
        r#"count_over_time(gpuscale_exporter_gpus[1m]) >= {secs} and on () count(gpuscale:gpu_allocation:share) > 0"#
    );
    for s in sides {
        eventually(
            &format!("{}s of scrapes and recorded rules ({})", secs, s.profile),
            Duration::from_secs(90),
            || (!s.prom.query(&q).ok()?.is_empty()).then_some(()),
            || s.prom.proc.log_tail(20),
        );
    }
}

#[test]
fn every_rule_panel_and_preset_answers_in_the_fleet_profile() {
    for bin in ["prometheus", "curl"] {
        assert!(on_path(bin), "`{bin}` is not on PATH");
    }
    gpuscale_e2e::bins::ensure_built();
    let fakes = stack::start_fake_targets();
    let (full, copies) = start("full", &fakes);
    let (fleet, _) = start("fleet", &fakes);
    wait_for_history(&[&full, &fleet], 12);

    let zero_only = sent_while_non_zero();
    let mut failures = Vec::new();
    let (mut compared, mut answered, mut zero_rows) = (0, 0, Vec::new());
    let mut healthy_rows = Vec::new();
    for Expr { key, expr, alert } in expressions(&copies) {
        compared += 1;
        let a = full.prom.query(&expr);
        let b = fleet.prom.query(&expr);
        let (a, b) = match (a, b) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                failures.push(format!("{key}: full {a:?}, fleet {b:?}: {expr}"));
                continue;
            }
        };
        if a.is_empty() {
            continue;
        }
        answered += 1;
        if !b.is_empty() {
            if alert {
                let (sa, sb) = (series(&a), series(&b));
                if sa != sb {
                    failures.push(format!("{key}: fires for {sa:?} on full, {sb:?} on fleet"));
                }
            }
            continue;
        }
        // Only zeros of series the fleet profile leaves out may go missing.
        if all_zero(&a) && zero_only.iter().any(|n| expr.contains(n)) {
            zero_rows.push(key);
            continue;
        }
        if HEALTHY_LEFT_OUT.iter().any(|n| expr.contains(n)) {
            healthy_rows.push(key);
            continue;
        }
        failures.push(format!(
            "{key}: {} series on full, none on fleet: {expr}",
            a.len()
        ));
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} expressions differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(answered > 60, "only {answered} expressions had data");
    eprintln!(
        "{compared} expressions, {answered} with data on full, all with data on fleet except {} that read only zeros there: {zero_rows:?}, and {} over families fleet leaves out while healthy: {healthy_rows:?}",
        zero_rows.len(),
        healthy_rows.len()
    );
}
