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
use gpuscale_exporter::collectors::fleet;
use gpuscale_exporter::collectors::profile::FLEET;
use gpuscale_exporter::selfmetrics::FLEET_LEFT_OUT;
use serde_json::Value;
use tempfile::TempDir;

/// Series per GPU on the built-in node, at most (measured: full 73.6 with
/// the activity source's info series, 72.6 before; 72.6 =
/// 71.6 + the default power limit, which the power-cap alert compares
/// with; 71.6 = 64.6 + 7 hardware-state series: PCIe link generation and
/// width with their maxima, ECC mode, NVLink links active and inactive;
/// 69.6 before static facts became gpu_info labels; fleet 12.5, 34.5
/// before it left out detail families and served limits, thresholds,
/// clocks at their maximum and error counters only while they matter). A new per-GPU family raises
/// them on purpose, with its row in operations.md.
const BUDGETS: &[(&str, f64)] = &[("full", 74.0), ("fleet", 14.0)];

/// All of a node's series over its GPUs, Prometheus's five per target
/// (`up`, `scrape_*`) included, as `bench/fleet-cost.sh` counts them: the
/// fleet profile at most what dcgm-exporter's default counters cost there
/// (25.6; the fleet profile measured 23.1 on the built-in node).
const FLEET_ALL_IN: f64 = 25.6;
const SCRAPE_SERIES: usize = 5;

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
        if *profile == "fleet" {
            let all_in = (m.samples.len() + SCRAPE_SERIES) as f64 / gpus as f64;
            report.push(format!("fleet, all of the node's: {all_in:.1} per GPU"));
            assert!(
                all_in <= FLEET_ALL_IN,
                "--profile fleet: {all_in:.1} series per GPU with the node's, dcgm-exporter {FLEET_ALL_IN}"
            );
        }
    }
    eprintln!("{}", report.join("; "));
}

/// Families the fleet profile sends only while non-zero (some values of
/// some of them always), and the GPU states it sends only while current.
fn sent_while_non_zero() -> Vec<&'static str> {
    let mut names: Vec<&str> = FLEET.iter().map(|(name, _)| *name).collect();
    names.retain(|n| *n != "gpu_clock_hertz");
    names.extend(fleet::NON_ZERO);
    names.extend([
        "gpuscale_exporter_gpu_state",
        "gpuscale_exporter_collector_success",
    ]);
    names
}

/// Families the fleet profile leaves out while they read healthy
/// (docs/operations.md, "Fleet profile"): on the healthy alerts node an
/// expression over them may answer on full only;
/// `faults_left_out_while_healthy_fire_alike_in_both_profiles` shows on a
/// node with each fault that every rule and panel over them answers alike.
const HEALTHY_LEFT_OUT: &[&str] = &[
    // The PCIe link shape: a GPU's four series while its link runs below
    // its maximum.
    "gpu_pcie_link_",
    // ECC mode: sent only while ECC is off.
    "gpu_ecc_enabled",
    // NVLink links: both counts of a GPU while any of its links is inactive.
    "gpu_nvlink_links",
    // Temperature thresholds: while the temperature is within 10 °C.
    "gpu_temperature_threshold_celsius",
    // Power limits: the enforced and default limits while they differ.
    "gpu_power_limit_",
    // Clocks below their maximum; memory temperatures near their limit.
    "gpu_clock_hertz",
    "gpu_memory_temperature_celsius",
];

/// NVML activity proxies and what the right-sizing rules record from them:
/// the fleet profile serves them for GPUs without activity ratios (no GPM,
/// no DCGM) only, so where every GPU a pod holds has them, an expression
/// over them answers on full only;
/// `faults_left_out_while_healthy_fire_alike_in_both_profiles` shows on a
/// GPU without GPM that they are served alike.
const PROXIES_LEFT_OUT: &[&str] = &[
    "gpu_memory_utilization_ratio",
    "gpu_pcie_transmit_bytes_per_second",
    "gpu_pcie_receive_bytes_per_second",
    "gpuscale:gpu_allocation_memory_duty:",
    "gpuscale:gpu_allocation_power_of_limit:",
    "gpuscale:gpu_allocation_pcie_bytes_per_second:",
];

/// Families `--profile fleet` never serves (docs/operations.md, "What the
/// fleet profile leaves out"): only dashboard panels may read them, never
/// an alert, a recording rule or a preset.
fn never_served() -> Vec<&'static str> {
    let mut names: Vec<&str> = fleet::LEFT_OUT.to_vec();
    names.extend(FLEET_LEFT_OUT.iter().map(|d| d.name));
    names
}

/// Whether `expr` reads a family in `names` (a whole family name, not a
/// prefix of a longer one).
fn reads(expr: &str, names: &[&str]) -> bool {
    names.iter().any(|n| {
        expr.match_indices(n).any(|(i, _)| {
            let next = expr[i + n.len()..].chars().next();
            !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

/// Prometheus with the time-scaled rules, scraping one exporter on
/// `scenario` in `profile`, and the fake targets.
struct Side {
    profile: &'static str,
    prom: Prometheus,
    _exporter: Exporter,
    _dir: TempDir,
}

fn start(profile: &'static str, scenario: &Path, fakes: &Server) -> (Side, Vec<PathBuf>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rule_copies = rules::write_time_scaled(&dir.path().join("rules"));
    let exporter = Exporter::simulate(
        scenario,
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
    /// A dashboard query (not a rule or a preset).
    panel: bool,
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
                    panel: false,
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
                panel: true,
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
            panel: false,
        });
    }
    all
}

/// A sample's labels without the scrape target's address, which differs
/// between the two exporters.
fn series_key(sample: &Value) -> String {
    let mut m: BTreeMap<String, Value> = sample["metric"]
        .as_object()
        .map(|o| o.clone().into_iter().collect())
        .unwrap_or_default();
    m.remove("instance");
    serde_json::to_string(&m).unwrap_or_default()
}

fn series(result: &[Value]) -> BTreeSet<String> {
    result.iter().map(series_key).collect()
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
    let scenario = repo_root().join("tests/scenarios/alerts.yaml");
    let (full, copies) = start("full", &scenario, &fakes);
    let (fleet, _) = start("fleet", &scenario, &fakes);
    wait_for_history(&[&full, &fleet], 12);

    let (zero_only, never) = (sent_while_non_zero(), never_served());
    let mut failures = Vec::new();
    let (mut compared, mut answered) = (0, 0);
    let mut missing: BTreeMap<Missing, Vec<String>> = BTreeMap::new();
    for e in expressions(&copies) {
        compared += 1;
        let Expr {
            key,
            expr,
            alert,
            panel,
        } = &e;
        if !panel && reads(expr, &never) {
            failures.push(format!("{key} reads a family fleet never serves: {expr}"));
        }
        let (a, b) = match (full.prom.query(expr), fleet.prom.query(expr)) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                failures.push(format!("{key}: full {a:?}, fleet {b:?}: {expr}"));
                continue;
            }
        };
        if a.is_empty() {
            if *alert && !b.is_empty() {
                failures.push(format!("{key}: fires on fleet only, for {:?}", series(&b)));
            }
            continue;
        }
        answered += 1;
        if !b.is_empty() {
            let (sa, sb) = (series(&a), series(&b));
            if *alert && sa != sb {
                failures.push(format!("{key}: fires for {sa:?} on full, {sb:?} on fleet"));
            }
            continue;
        }
        match why_missing(&e, &a, &zero_only, &never) {
            Some(why) => missing.entry(why).or_default().push(key.clone()),
            None => failures.push(format!(
                "{key}: {} series on full, none on fleet: {expr}",
                a.len()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} expressions differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(answered > 60, "only {answered} expressions had data");
    eprintln!(
        "{compared} expressions, {answered} with data on full, all with data on fleet except: {missing:#?}"
    );
}

/// Why an expression with data on full may have none on fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Missing {
    /// It reads only zeros there of families sent while non-zero.
    Zeros,
    /// It reads families left out while healthy.
    Healthy,
    /// It reads NVML proxies of GPUs that have activity ratios.
    Proxies,
    /// A panel over families only the full profile serves.
    FullOnly,
}

fn why_missing(e: &Expr, full: &[Value], zero_only: &[&str], never: &[&str]) -> Option<Missing> {
    let reads_any = |names: &[&str]| names.iter().any(|n| e.expr.contains(n));
    if all_zero(full) && reads_any(zero_only) {
        Some(Missing::Zeros)
    } else if reads_any(HEALTHY_LEFT_OUT) {
        Some(Missing::Healthy)
    } else if reads_any(PROXIES_LEFT_OUT) {
        Some(Missing::Proxies)
    } else if e.panel && reads(&e.expr, never) {
        Some(Missing::FullOnly)
    } else {
        None
    }
}

/// A node with every fault of the families the fleet profile leaves out
/// while healthy: one NVLink link of four going down after 15 s of healthy
/// history (with its first recovery error), all four links of another
/// going down, ECC off now and at the next reset, a PCIe link trained at
/// x8, one at Gen4 while busy, a healthy GPU, one running within 5 °C of
/// its slowdown and memory limits, one held at a power cap lowered below
/// its default, and an A100 without GPM or DCGM activity.
const FAULTS: &str = r#"
node: fault-node
# No DCGM activity: the A100 (no GPM) has none, so its NVML proxies count.
dcgm: { refuse: [sm_active, sm_occupancy, tensor_active, dram_active, graphics_active] }
gpus:
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f0000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:18:00.0", memory_mib: 81559,
      nvlinks: 4, nvlink_down: [{ link: 1, from_s: 15 }], nvlink_errors: [{ at_s: 15, link: 0, type: recovery, count: 1 }] }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f1000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:2A:00.0", memory_mib: 81559,
      nvlinks: 4, nvlink_down: [{ link: 0, from_s: 15 }, { link: 1, from_s: 15 }, { link: 2, from_s: 15 }, { link: 3, from_s: 15 }] }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f2000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:3A:00.0", memory_mib: 81559,
      nvlinks: 4, ecc: false }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f3000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:5D:00.0", memory_mib: 81559,
      nvlinks: 4, ecc_pending: false }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f4000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:9A:00.0", memory_mib: 81559,
      nvlinks: 4, pcie: { generation: 5, width: 8, max_generation: 5, max_width: 16 } }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f5000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:AB:00.0", memory_mib: 81559,
      nvlinks: 4, pcie: { generation: 4, width: 16, max_generation: 5, max_width: 16 }, load: { utilization: 90 } }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f6000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:BA:00.0", memory_mib: 81559,
      nvlinks: 4 }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f7000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:CA:00.0", memory_mib: 81559,
      nvlinks: 4, load: { utilization: 95, temperature_celsius: 84, memory_temperature_celsius: 92 } }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-f8000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:DA:00.0", memory_mib: 81559,
      nvlinks: 4, power_limit_watts: 500, power_limit_default_watts: 700,
      throttle: [{ reasons: [sw_power_cap], from_s: 0, to_s: null }], load: { utilization: 95, power_watts: 499 } }
  - { model: NVIDIA A100 80GB PCIe, uuid: GPU-f9000000-0000-4000-8000-000000000000, pci_bus_id: "00000000:E1:00.0", memory_mib: 81920,
      architecture: ampere, power_limit_watts: 300, nvlinks: 0,
      load: { utilization: 70, memory_utilization: 40, power_watts: 200, pcie_tx_bytes_per_second: 2.0e9, pcie_rx_bytes_per_second: 1.0e9 } }
"#;

/// The alerts over those families, the GPUs (by index) they fire for on
/// the fault node under the full profile, and those of them the fleet
/// profile may not fire for (none: GPU 1 lost all its links at once, and
/// the recording rule counts its silent healthy history as 0 inactive,
/// docs/operations.md, "Fleet profile").
const FAULT_ALERTS: &[(&str, &[&str], &[&str])] = &[
    ("GPUNVLinkDown", &["0", "1"], &[]),
    ("GPUECCDisabled", &["2", "3"], &[]),
    ("GPUPCIeLinkDegraded", &["4", "5"], &[]),
    ("GPUTemperatureNearSlowdown", &["7"], &[]),
    ("GPUMemoryTemperatureHigh", &["7"], &[]),
    ("GPUPowerCapThrottling", &["8"], &[]),
];

/// Families served while they matter (a threshold near, a limit lowered):
/// on the fault node the GPUs where they do not matter have none, so an
/// expression over them may miss those GPUs' series on fleet; what it
/// gives must be what full gives, and the alerts must fire alike.
const WHILE_THEY_MATTER: &[&str] = &[
    "gpu_temperature_threshold_celsius",
    "gpu_power_limit_",
    "gpu_clock_hertz",
    "gpu_memory_temperature_celsius",
];

fn gpu_of(sample: &Value) -> Option<&str> {
    sample["metric"]["gpu"].as_str()
}

/// The expressions over families left out while healthy, with the recording
/// rules built on them and the expressions over those recorded series.
fn over_healthy_left_out(all: Vec<Expr>, copies: &[PathBuf]) -> Vec<Expr> {
    let mut names: Vec<String> = HEALTHY_LEFT_OUT.iter().map(|n| n.to_string()).collect();
    for r in scaled_rules(copies) {
        if !r.alert && HEALTHY_LEFT_OUT.iter().any(|n| r.expr.contains(n)) {
            names.push(r.key.rsplit(' ').next().unwrap_or_default().to_string());
        }
    }
    all.into_iter()
        .filter(|e| names.iter().any(|n| e.expr.contains(n.as_str())))
        .collect()
}

/// Samples by series key and value.
fn samples(result: &[Value]) -> BTreeMap<String, Option<f64>> {
    result
        .iter()
        .map(|s| {
            let v = s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok());
            (series_key(s), v)
        })
        .collect()
}

/// Where `fleet` differs from `full` beyond the healthy zeros the fleet
/// profile leaves out: an alert must fire for the same series, any other
/// expression must give every series it gives on full with the same value,
/// except those that read 0 there (unless it keeps only zeros: ECC off).
fn fault_difference(e: &Expr, full: &[Value], fleet: &[Value]) -> Option<String> {
    let (a, b) = (samples(full), samples(fleet));
    let zero_is_fault = e.expr.contains("== 0");
    let may_miss = WHILE_THEY_MATTER.iter().any(|n| e.expr.contains(n));
    if e.alert {
        return (a.keys().ne(b.keys())).then(|| format!("fires for {a:?} on full, {b:?} on fleet"));
    }
    let wrong: Vec<_> = b.iter().filter(|(k, v)| a.get(*k) != Some(v)).collect();
    let missing: Vec<_> = a
        .iter()
        .filter(|(k, v)| !b.contains_key(*k) && !may_miss && (zero_is_fault || **v != Some(0.0)))
        .collect();
    (!wrong.is_empty() || !missing.is_empty())
        .then(|| format!("on fleet not as on full: {wrong:?}; missing on fleet: {missing:?}"))
}

/// Waits until both Prometheus servers have seen the fault node's links up,
/// then GPU 0's and GPU 1's links down.
fn wait_for_links_down(sides: &[&Side]) {
    let down = |s: &Side| {
        s.prom
            .query("gpuscale:gpu_nvlink_links_inactive:max > 0")
            .ok()
    };
    for s in sides {
        eventually(
            &format!("two scrapes ({})", s.profile),
            Duration::from_secs(30),
            || {
                (!s.prom
                    .query("count_over_time(gpuscale_exporter_gpus[1m]) >= 2")
                    .ok()?
                    .is_empty())
                .then_some(())
            },
            || s.prom.proc.log_tail(20),
        );
        assert_eq!(
            down(s).map(|d| d.len()),
            Some(0),
            "links down before {} had history",
            s.profile
        );
    }
    for s in sides {
        eventually(
            &format!("the links of GPUs 0 and 1 down ({})", s.profile),
            Duration::from_secs(60),
            || (down(s)?.len() == 2).then_some(()),
            || s.prom.proc.log_tail(20),
        );
    }
}

/// The A100 (GPU 9, no GPM) has its NVML proxies and power limit served
/// by both profiles with the same values; the H100s' proxies are full only.
fn proxies_of_a_gpu_without_gpm_alike(full: &Side, fleet: &Side) {
    let q = r#"max by (gpu, __name__) ({__name__=~"gpu_memory_utilization_ratio|gpu_pcie_(transmit|receive)_bytes_per_second|gpu_power_limit_watts"})"#;
    let of = |s: &Side| samples(&s.prom.query(q).unwrap_or_default());
    let (a, b) = (of(full), of(fleet));
    let a9: BTreeMap<_, _> = a
        .into_iter()
        .filter(|(k, _)| k.contains(r#""gpu":"9""#))
        .collect();
    assert_eq!(a9.len(), 4, "full: the A100's proxies and limit");
    let b_gpus: BTreeSet<&str> = b
        .keys()
        .map(|k| {
            if k.contains(r#""gpu":"9""#) {
                "9"
            } else {
                "other"
            }
        })
        .collect();
    let b9: BTreeMap<_, _> = b
        .into_iter()
        .filter(|(k, _)| k.contains(r#""gpu":"9""#))
        .collect();
    assert_eq!(a9, b9, "the A100's proxies on fleet");
    // Power limits of the H100 with a lowered cap (GPU 8) are served too.
    assert!(b_gpus.contains("other"), "GPU 8's lowered limit on fleet");
}

/// GPU 0's first NVLink recovery error is a rise from 0 on both sides: the
/// fleet profile sent no counter before it, and the recording rule stood in
/// a 0 from `gpu_info` (alerts/gpu.rules.yml).
fn first_recovery_error_rises_on_both(sides: &[&Side]) {
    let q = r#"max_over_time(gpuscale:gpu_nvlink_errors:max{type="recovery"}[1m]) - min_over_time(gpuscale:gpu_nvlink_errors:max{type="recovery"}[1m]) > 0"#;
    for s in sides {
        eventually(
            &format!(
                "GPU 0's first recovery error seen as a rise ({})",
                s.profile
            ),
            Duration::from_secs(30),
            || {
                let r = s.prom.query(q).ok()?;
                let gpus: Vec<&str> = r.iter().filter_map(gpu_of).collect();
                (gpus == ["0"]).then_some(())
            },
            || s.prom.proc.log_tail(20),
        );
    }
}

#[test]
fn faults_left_out_while_healthy_fire_alike_in_both_profiles() {
    for bin in ["prometheus", "curl"] {
        assert!(on_path(bin), "`{bin}` is not on PATH");
    }
    gpuscale_e2e::bins::ensure_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("faults.yaml");
    std::fs::write(&scenario, FAULTS).expect("write scenario");
    let fakes = stack::start_fake_targets();
    let (full, copies) = start("full", &scenario, &fakes);
    let (fleet, _) = start("fleet", &scenario, &fakes);
    wait_for_links_down(&[&full, &fleet]);
    first_recovery_error_rises_on_both(&[&full, &fleet]);
    proxies_of_a_gpu_without_gpm_alike(&full, &fleet);

    let exprs = over_healthy_left_out(expressions(&copies), &copies);
    let mut failures = Vec::new();
    for e in &exprs {
        let Expr { key, expr, .. } = e;
        let (a, b) = match (full.prom.query(expr), fleet.prom.query(expr)) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                failures.push(format!("{key}: full {a:?}, fleet {b:?}: {expr}"));
                continue;
            }
        };
        let mut a = a;
        if let Some((_, gpus, missed)) = FAULT_ALERTS.iter().find(|(n, ..)| key.ends_with(n)) {
            let firing: BTreeSet<&str> = a.iter().filter_map(gpu_of).collect();
            if firing != gpus.iter().copied().collect() {
                failures.push(format!(
                    "{key}: fires on full for GPUs {firing:?}, not {gpus:?}"
                ));
            }
            a.retain(|s| gpu_of(s).is_none_or(|g| !missed.contains(&g)));
        }
        if let Some(d) = fault_difference(e, &a, &b) {
            failures.push(format!("{key}: {d}: {expr}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} expressions differ:\n{}",
        failures.len(),
        exprs.len(),
        failures.join("\n")
    );
    let keys: Vec<&str> = exprs.iter().map(|e| e.key.as_str()).collect();
    for (alert, ..) in FAULT_ALERTS {
        assert!(keys.iter().any(|k| k.ends_with(alert)), "no rule {alert}");
    }
    eprintln!(
        "{} expressions alike on the fault node: {keys:?}",
        exprs.len()
    );
}
