//! A cluster through Prometheus: a real Prometheus scrapes the simulated
//! node, and `gpuscale-top --prometheus` shows the same GPUs, MIG instances
//! and holders as the exporter's own `/metrics`, narrowed by node and
//! namespace; and the same through VictoriaMetrics.

use std::process::Command;
use std::time::{Duration, Instant};

use gpuscale_e2e::alerts::stack::Prometheus;
use gpuscale_e2e::exporter::Exporter;
use serde_json::Value;

fn top(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args(["--once", "-o", "json"])
        .args(args)
        .output()
        .expect("run gpuscale-top");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Every (namespace/pod, device) holder of the snapshot, sorted.
fn holders(snap: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for g in snap["gpus"].as_array().into_iter().flatten() {
        let mut devices = vec![(g["uuid"].as_str(), &g["holders"])];
        for m in g["mig"].as_array().into_iter().flatten() {
            devices.push((m["mig_uuid"].as_str(), &m["holders"]));
        }
        for (device, hs) in devices {
            for h in hs.as_array().into_iter().flatten() {
                out.push(format!(
                    "{}/{} {}",
                    h["namespace"],
                    h["pod"],
                    device.unwrap_or("-")
                ));
            }
        }
    }
    out.sort();
    out
}

fn gpu_indexes(snap: &Value) -> Vec<String> {
    let gpus = snap["gpus"].as_array().into_iter().flatten();
    gpus.filter_map(|g| g["gpu"].as_str().map(str::to_string))
        .collect()
}

/// The exporter at `port` as a static scrape target.
fn scrape_configs(port: u16) -> String {
    format!(
        "scrape_configs:\n  - job_name: gpuscale\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
    )
}

/// Waits until `store` (Prometheus or VictoriaMetrics, through `query`)
/// holds every holder and the activity of the node `e`; returns what the
/// exporter itself and `gpuscale-top --prometheus URL --node` then show,
/// after checking that both show the same GPUs and holders.
fn node_through(
    e: &Exporter,
    store: &str,
    url: &str,
    query: impl Fn(&str) -> Result<Vec<Value>, String>,
) -> (Value, Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let count = |q: &str| {
        query(q).ok().and_then(|v| {
            v.first()
                .and_then(|s| s["value"][1].as_str().map(str::to_string))
        })
    };
    while count("count(gpu_pod_allocation)").as_deref() != Some("11")
        || count("count(gpu_sm_active_ratio)").is_none()
    {
        assert!(
            Instant::now() < deadline,
            "{store} never had the node's series"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let direct = top(&["--exporter", &e.url("")]);
    let cluster = top(&["--prometheus", url, "--node", "sim-node-1"]);
    assert_eq!(
        gpu_indexes(&cluster),
        ["0", "1", "2", "3", "4", "5", "6", "7"]
    );
    assert_eq!(holders(&cluster), holders(&direct));
    let inference = top(&["--prometheus", url, "--namespace", "inference"]);
    assert_eq!(gpu_indexes(&inference), ["5", "6"]);
    (direct, cluster)
}

#[test]
fn through_prometheus_the_node_looks_as_its_exporter_shows_it() {
    let e = crate::once::node();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n{}",
        scrape_configs(e.port)
    );
    let prom = Prometheus::start(dir.path(), &config, gpuscale_e2e::free_port());
    let (direct, cluster) = node_through(&e, "Prometheus", &prom.url, |q| prom.query(q));
    assert_eq!(holders(&cluster).len(), 11);
    assert_eq!(cluster["source"], format!("prometheus {}", prom.url));
    let mig = &cluster["gpus"][5]["mig"];
    assert_eq!(mig.as_array().map(Vec::len), Some(3), "{mig}");
    // Memory totals never change: the same numbers both ways.
    for (a, b) in cluster["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(direct["gpus"].as_array().into_iter().flatten())
    {
        assert_eq!(a["memory_total_bytes"], b["memory_total_bytes"]);
        assert_eq!(a["model"], b["model"]);
    }
    let none = top(&["--prometheus", &prom.url, "--node", "no-such-node"]);
    assert_eq!(gpu_indexes(&none), Vec::<String>::new());
}

/// The same through VictoriaMetrics (its Prometheus query API): the node's
/// GPUs and holders as the exporter shows them.
#[test]
fn through_victoriametrics_the_node_looks_as_its_exporter_shows_it() {
    let e = crate::once::node();
    let vm = gpuscale_e2e::victoria::VictoriaMetrics::start(&scrape_configs(e.port));
    node_through(&e, "VictoriaMetrics", &vm.url, |q| vm.vector(q));
}
