//! The on-call story of an exporter restart in the middle of an incident.
//!
//! Three faults hold on one node: a GPU with a double-bit ECC error (XID 48,
//! inhibited by GPUUncorrectableECCErrors) and a pending row remap, a GPU
//! thermally throttled, and a GPU that falls off the bus with XID 79 two
//! seconds into the incident (inhibited by GPUFallenOffBus). Both incident
//! runs share the simulator's epoch, so the restarted exporter finds that GPU
//! lost from its start: NVML gives neither its UUID nor its XIDs, and its
//! XID 79 is not seen again. Prometheus scrapes the exporter under two jobs, as a
//! ServiceMonitor and a PodMonitor selecting the same pods would, with the
//! shipped rules (durations divided by 600, see `rules.rs`) and sends to
//! Alertmanager with the shipped inhibit rules. Once the alerts are
//! notified, the exporter is killed and started again on the same port:
//! nothing may change. No notification (no resolve, no new page, no
//! inhibited alert let through), the same alerts active since the same
//! instant (no `for:` restarted), and the lost GPU keeps its UUID (the
//! exporter's state file). The XID 79 alert may resolve once the restarted
//! exporter no longer reports it (its one-hour hold is seconds in the scaled
//! copy): it was never notified, and neither is its resolution; what must
//! hold is that no XID 79 page goes out while GPUFallenOffBus is active.
//! `gpuscale.rules.yml` is left out: its
//! GPUExporterDown has `for: 5m`, one second once scaled, and rightly fires
//! on a gap that would be 20 minutes in real time.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use gpuscale_e2e::alerts::procs::eventually;
use gpuscale_e2e::alerts::stack::{self, Notified, Prometheus, Webhook};
use gpuscale_e2e::procs::Proc;

use super::require;

const ECC: &str = "GPU-b0000000-0000-4000-8000-000000000000";
const HOT: &str = "GPU-b1000000-0000-4000-8000-000000000000";
const LOST: &str = "GPU-b2000000-0000-4000-8000-000000000000";

/// The node; `LOST_AT` is where the lost GPU falls off the bus.
const SCENARIO: &str = r#"
node: restart-node
driver_version: "570.172.08"
cuda_version: 12080
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-b0000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    architecture: hopper
    memory_mib: 81559
    power_limit_watts: 700
    thresholds_celsius: { shutdown: 92, slowdown: 87, gpu_max: 85, memory_max: 95 }
    load: { utilization: 0, memory_used_mib: 1000, power_watts: 90, temperature_celsius: 40 }
    ecc_errors:
      - { at_s: 0, type: uncorrected, count: 1 }
    remapped_rows: { correctable: 0, uncorrectable: 1, pending: true, failure: false }
    xids:
      - { at_s: 0.2, xid: 48 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-b1000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:2A:00.0"
    architecture: hopper
    memory_mib: 81559
    power_limit_watts: 700
    thresholds_celsius: { shutdown: 92, slowdown: 87, gpu_max: 85, memory_max: 95 }
    load: { utilization: 90, memory_used_mib: 30000, power_watts: 500, temperature_celsius: 80 }
    throttle:
      - { reasons: [sw_thermal], from_s: 0, to_s: null }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-b2000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:3A:00.0"
    architecture: hopper
    memory_mib: 81559
    power_limit_watts: 700
    thresholds_celsius: { shutdown: 92, slowdown: 87, gpu_max: 85, memory_max: 95 }
    load: { utilization: 40, memory_used_mib: 10000, power_watts: 250, temperature_celsius: 55 }
    xids:
      - { at_s: XID_AT, xid: 79 }
    lost_at_s: LOST_AT
"#;

/// Alerts the story raises (name, a label that picks the one meant) and
/// whether Alertmanager lets them through.
const EXPECTED: &[(&str, &str, bool)] = &[
    ("GPUUncorrectableECCErrors", ECC, true),
    ("GPURowRemapPending", ECC, true),
    ("GPUCriticalXid", ECC, false),
    ("GPUThermalThrottling", HOT, true),
    ("GPUFallenOffBus", LOST, true),
    ("GPUCriticalXid", LOST, false),
];

/// When the GPU falls off the bus and reports XID 79, in seconds after the
/// incident's simulator epoch.
const LOST_AT: f64 = 2.0;
const XID79_AT: f64 = 2.5;

/// The exporter on `scenario` with `state` as its state file, on `port`;
/// `epoch` (Unix seconds) is where the scenario's clock starts, by default
/// at the exporter's start.
fn exporter(
    dir: &Path,
    scenario: &Path,
    state: &Path,
    port: u16,
    run: &str,
    epoch: Option<f64>,
) -> Proc {
    let mut cmd = Command::new(gpuscale_e2e::bins::exporter());
    if let Some(epoch) = epoch {
        cmd.env("GPUSCALE_SIM_EPOCH", format!("{epoch:.3}"));
    }
    cmd.arg("--simulate")
        .arg(scenario)
        .args(["--collect-interval", "200ms", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--simulator-lib")
        .arg(gpuscale_e2e::bins::simulator_lib())
        .arg("--state-file")
        .arg(state)
        .env_remove("GPUSCALE_SIM_SCENARIO");
    let proc = Proc::spawn(
        &format!("exporter ({run})"),
        cmd,
        &dir.join(format!("exporter-{run}.log")),
    );
    let ready = format!("http://127.0.0.1:{port}/readyz");
    eventually(
        &format!("the exporter ({run}) to be ready"),
        Duration::from_secs(30),
        || {
            ureq::get(&ready)
                .call()
                .is_ok_and(|r| r.status() == 200)
                .then_some(())
        },
        || proc.log_tail(20),
    );
    proc
}

fn write_scenario(dir: &Path, name: &str, lost_at: f64, xid_at: f64) -> std::path::PathBuf {
    let path = dir.join(name);
    let yaml = SCENARIO
        .replace("LOST_AT", &lost_at.to_string())
        .replace("XID_AT", &xid_at.to_string());
    std::fs::write(&path, yaml).expect("write scenario");
    path
}

/// Active alerts: (name, uuid, xid, state) → activeAt.
type Active = BTreeMap<(String, String, String, String), String>;

/// Prometheus's active alerts.
fn active(prom: &Prometheus) -> Active {
    let data = prom.api("/api/v1/alerts", &[]).expect("alerts API");
    data["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .map(|a| {
            let l = |k: &str| a["labels"][k].as_str().unwrap_or("").to_string();
            (
                (
                    l("alertname"),
                    l("uuid"),
                    l("xid"),
                    a["state"].as_str().unwrap_or("").to_string(),
                ),
                a["activeAt"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn describe(alerts: &[Notified]) -> String {
    alerts
        .iter()
        .map(|a| format!("  {} {} {:?}", a.status, a.label("alertname"), a.labels))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether every expected alert fires in Prometheus and the ones not
/// inhibited reached the webhook.
fn all_notified(prom: &Prometheus, webhook: &Webhook) -> bool {
    let firing = active(prom);
    let got = webhook.alerts();
    EXPECTED.iter().all(|(name, uuid, notified)| {
        firing
            .keys()
            .any(|(n, u, _, s)| n == name && u == uuid && s == "firing")
            && (!notified
                || got
                    .iter()
                    .any(|a| a.label("alertname") == *name && a.label("uuid") == *uuid))
    })
}

/// What the restart must not change, once Alertmanager's group_wait has
/// passed for everything that fires: the notifications so far (all firing)
/// and Prometheus's active alerts.
fn picture(prom: &Prometheus, webhook: &Webhook) -> (Vec<Notified>, Active) {
    std::thread::sleep(Duration::from_secs(4));
    let notified = webhook.alerts();
    assert!(
        notified.iter().all(|a| a.status == "firing"),
        "resolved before the restart:\n{}",
        describe(&notified)
    );
    (notified, active(prom))
}

/// Both jobs' `up` equal `want` for the exporter.
fn both_up(prom: &Prometheus, want: u8) -> Option<()> {
    let q = format!(r#"count(up{{job=~"gpuscale-exporter.*"}} == {want}) == 2"#);
    (!prom.query(&q).ok()?.is_empty()).then_some(())
}

/// A first run while the GPU is still on the bus writes its UUID to the
/// state file, as the exporter running before the fault would have.
fn seed_state_file(dir: &Path, state: &Path) {
    let before = write_scenario(dir, "before.yaml", 600.0, 600.0);
    let _first = exporter(dir, &before, state, stack::free_port(), "before", None);
    eventually(
        "the state file to name the GPU that will be lost",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(state)
                .ok()
                .filter(|s| s.contains(LOST))
                .map(|_| ())
        },
        || std::fs::read_to_string(state).unwrap_or_default(),
    );
}

/// The restarted exporter, which cannot read the lost GPU's UUID from
/// NVML, reports it with the UUID from its state file, under both jobs.
fn the_lost_gpu_keeps_its_uuid(prom: &Prometheus) {
    let lost = format!(r#"gpuscale_exporter_gpu_state{{state="lost", uuid="{LOST}"}} == 1"#);
    assert_eq!(
        prom.query(&lost).expect("query").len(),
        stack::MONITOR_JOBS.len(),
        "the restarted exporter reports the lost GPU without its UUID"
    );
}

#[test]
fn an_exporter_restart_mid_incident_changes_no_notification() {
    require("prometheus");
    require("prometheus-alertmanager");
    gpuscale_e2e::bins::ensure_built();
    let t0 = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("gpuscale-state.json");
    seed_state_file(dir.path(), &state);
    let scenario = write_scenario(dir.path(), "incident.yaml", LOST_AT, XID79_AT);
    let port = stack::free_port();
    let addr = format!("127.0.0.1:{port}");
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs_f64());
    let first = exporter(dir.path(), &scenario, &state, port, "first", epoch);
    let alerting = stack::Alerting::start(dir.path(), &addr);
    let (prom, webhook) = (&alerting.prom, &alerting.webhook);
    let context = || {
        format!(
            "webhook:\n{}\nPrometheus alerts: {:?}\n{}",
            describe(&webhook.alerts()),
            active(prom),
            prom.proc.log_tail(10)
        )
    };

    eventually(
        "the incident's alerts, notified or inhibited",
        Duration::from_secs(60),
        || all_notified(prom, webhook).then_some(()),
        context,
    );
    let (notified, before) = picture(prom, webhook);

    // Kill the exporter; start it again once both jobs saw it down.
    drop(first);
    eventually(
        "both jobs to see the exporter down",
        Duration::from_secs(10),
        || both_up(prom, 0),
        context,
    );
    let down = Instant::now();
    let _second = exporter(dir.path(), &scenario, &state, port, "second", epoch);
    eventually(
        "both jobs to scrape the new exporter",
        Duration::from_secs(10),
        || both_up(prom, 1),
        context,
    );
    eprintln!(
        "exporter back {:?} after both jobs saw it down",
        down.elapsed()
    );
    the_lost_gpu_keeps_its_uuid(prom);
    // Several evaluations and Alertmanager group intervals later.
    std::thread::sleep(Duration::from_secs(8));

    assert_eq!(
        without_xid79(active(prom)),
        without_xid79(before),
        "alerts or their activeAt changed across the restart (a `for:` restarted or an alert resolved)"
    );
    let now = webhook.alerts();
    no_xid79_page(&now);
    assert_eq!(
        now.len(),
        notified.len(),
        "notifications after the restart:\n{}",
        describe(now.get(notified.len()..).unwrap_or(&[]))
    );
    eprintln!("restart story done in {:?}", t0.elapsed());
}

/// The lost GPU's XID 79 alert: inhibited while it fires, it may resolve
/// once the restarted exporter stops reporting it (see the module docs).
fn without_xid79(mut alerts: Active) -> Active {
    alerts.retain(|(name, uuid, xid, _), _| {
        !(name == "GPUCriticalXid" && uuid == LOST && xid == "79")
    });
    alerts
}

/// GPUFallenOffBus held the lost GPU's XID 79 back before and after the
/// restart: no notification of it, firing or resolved.
fn no_xid79_page(notified: &[Notified]) {
    let xid79: Vec<&Notified> = notified
        .iter()
        .filter(|a| a.label("alertname") == "GPUCriticalXid" && a.label("xid") == "79")
        .collect();
    assert!(
        xid79.is_empty(),
        "XID 79 of the lost GPU paged although GPUFallenOffBus was active:\n{}",
        describe(&xid79.into_iter().cloned().collect::<Vec<_>>())
    );
}
