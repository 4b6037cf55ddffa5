//! The node-pool variable end to end. Three exporters, each reading its own
//! Node from one Kubernetes API (`get nodes`): `pool-node` carries GKE's pool
//! label, `bare-node` none of the pool labels, and `ghost-node` has no Node
//! object (404). What each serves (`gpu_node_info`, its `node_info_up`
//! self-signal), then, on a real Prometheus scraping all three under two
//! jobs, the dashboards' `node_pool` and `node` variables and the pool
//! panels: a pool narrows the node list, "All" keeps every node (the one
//! without a pool too), and nothing is counted twice.

use std::collections::BTreeSet;
use std::time::Duration;

use gpuscale_e2e::alerts::dashboards::{self, Variable, parse_label_values, substitute};
use gpuscale_e2e::alerts::procs::eventually;
use gpuscale_e2e::alerts::stack::{self, Prometheus};
use gpuscale_e2e::exporter::{Exporter, Metrics};
use gpuscale_e2e::kubeapi::{Cluster, KubeFake, core};
use serde_json::json;

use super::require;

const POOL: &str = "a3-highgpu-8g";

/// Two GPUs, no pods (the test's API serves none).
const SCENARIO: &str = r#"
node: scenario-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-d0000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-d1000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:2A:00.0"
    memory_mib: 81559
"#;

fn fake_api() -> KubeFake {
    let kube = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: std::sync::Arc::new(|_: &serde_json::Value| (true, String::new())),
    });
    kube.put(
        &core("nodes"),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "pool-node", "labels": {
            "kubernetes.io/hostname": "pool-node",
            "cloud.google.com/gke-nodepool": POOL,
            "node.kubernetes.io/instance-type": "a3-highgpu-8g",
        }}}),
    );
    kube.put(
        &core("nodes"),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare-node", "labels": {
            "kubernetes.io/hostname": "bare-node",
        }}}),
    );
    kube
}

/// The exporter of `node`, its pod mapper on the test's API (no kubelet,
/// an empty /proc).
fn exporter(dir: &std::path::Path, scenario: &std::path::Path, api: &str, node: &str) -> Exporter {
    let socket = dir.join("no-kubelet.sock");
    let args = [
        "--node-name",
        node,
        "--kube-api-url",
        api,
        "--pod-resources-socket",
        socket.to_str().expect("utf-8 path"),
        "--proc-root",
        dir.to_str().expect("utf-8 path"),
    ];
    Exporter::simulate(scenario, &args)
}

/// What `e` serves once its Node read ended in `reason` ("": succeeded).
fn served(e: &Exporter, node: &str, reason: &str) -> Metrics {
    e.scrape_until(&format!("{node}: its Node read ({reason:?})"), |m| {
        let up = m.find("gpuscale_exporter_node_info_up", &[]);
        let got = up
            .first()
            .map(|s| s.labels.get("reason").map_or("", String::as_str));
        up.len() == 1 && got == Some(reason) && (up[0].value == 1.0) == reason.is_empty()
    })
}

fn the_exporters_serve_what_they_read(pool: &Exporter, bare: &Exporter, ghost: &Exporter) {
    let m = served(pool, "pool-node", "");
    assert_eq!(
        m.value(
            "gpu_node_info",
            &[("node", "pool-node"), ("node_pool", POOL)]
        ),
        1.0
    );
    let m = served(bare, "bare-node", "");
    let info = m.find("gpu_node_info", &[("node", "bare-node")]);
    assert!(
        info.len() == 1 && !info[0].labels.contains_key("node_pool"),
        "a node without a pool label: gpu_node_info without node_pool, got {info:?}"
    );
    let m = served(ghost, "ghost-node", "not_found");
    assert!(!m.has("gpu_node_info"), "a made-up node for a 404");
    assert_eq!(
        m.value(
            "gpuscale_exporter_node_info_up",
            &[("node", "ghost-node"), ("reason", "not_found")]
        ),
        0.0
    );
    assert!(
        ghost
            .log()
            .contains("cannot read the exporter's Node object"),
        "no warning for the failed read:\n{}",
        ghost.log()
    );
}

/// The values of a dashboard variable with `$node_pool` set to `pool`
/// (None: "All") and every other variable "All".
fn values(
    prom: &Prometheus,
    vars: &[Variable],
    name: &str,
    pool: Option<&str>,
) -> BTreeSet<String> {
    let v = vars.iter().find(|v| v.name == name).expect("variable");
    let (sel, label) = parse_label_values(v.query.as_deref().unwrap_or("")).expect("label_values");
    let sel = match pool {
        Some(p) => sel.replace("$node_pool", p),
        None => sel,
    };
    prom.label_values(&substitute(&sel, vars), &label)
        .expect("label values")
        .into_iter()
        .collect()
}

/// A panel query's answer (variables "All"): `label` value → value.
fn panel(prom: &Prometheus, title: &str, ref_id: &str) -> Vec<(String, f64)> {
    let d = dashboards::load_all();
    let (q, vars) = d
        .iter()
        .find_map(|d| {
            let q = d
                .queries()
                .into_iter()
                .find(|q| q.panel == title && q.ref_id == ref_id)?;
            Some((q, d.variables()))
        })
        .unwrap_or_else(|| panic!("no panel {title} / {ref_id}"));
    let r = prom.query(&substitute(&q.expr, &vars)).expect("query");
    let mut out: Vec<(String, f64)> = r
        .iter()
        .map(|s| {
            let pool = s["metric"]["node_pool"].as_str().unwrap_or("").to_string();
            (
                pool,
                s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn the_node_pool_variable_narrows_the_node_list() {
    require("prometheus");
    gpuscale_e2e::bins::ensure_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = gpuscale_e2e::pods::write_scenario(dir.path(), "pool.yaml", SCENARIO);
    let kube = fake_api();
    let api = kube.url();
    let pool = exporter(dir.path(), &scenario, &api, "pool-node");
    let bare = exporter(dir.path(), &scenario, &api, "bare-node");
    let ghost = exporter(dir.path(), &scenario, &api, "ghost-node");
    the_exporters_serve_what_they_read(&pool, &bare, &ghost);

    let addrs: Vec<String> = [&pool, &bare, &ghost]
        .iter()
        .map(|e| format!("127.0.0.1:{}", e.port))
        .collect();
    let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let config = stack::exporters_jobs_config(&[], "", &addrs, stack::MONITOR_JOBS);
    let prom = Prometheus::start(dir.path(), &config, stack::free_port());
    eventually(
        "both jobs to scrape the three exporters",
        Duration::from_secs(20),
        || {
            let r = prom
                .query("count(gpuscale_exporter_node_info_up) == 6")
                .ok()?;
            (!r.is_empty()).then_some(())
        },
        || prom.proc.log_tail(10),
    );

    for d in dashboards::load_all() {
        let vars = d.variables();
        let title = d.title();
        assert_eq!(
            values(&prom, &vars, "node_pool", None),
            set(&[POOL]),
            "{title}: $node_pool"
        );
        assert_eq!(
            values(&prom, &vars, "node", None),
            set(&["bare-node", "ghost-node", "pool-node"]),
            "{title}: $node with every pool"
        );
        assert_eq!(
            values(&prom, &vars, "node", Some(POOL)),
            set(&["pool-node"]),
            "{title}: $node in pool {POOL}"
        );
    }
    // Each node once, however many jobs scrape it: two GPUs a node.
    assert_eq!(
        panel(&prom, "GPUs by node pool", "A"),
        [(String::new(), 1.0), (POOL.to_string(), 1.0)]
    );
    assert_eq!(
        panel(&prom, "GPUs by node pool", "B"),
        [(String::new(), 2.0), (POOL.to_string(), 2.0)]
    );
    let failing = panel(&prom, "Exporters without their node pool", "A");
    assert_eq!(
        failing,
        [(String::new(), 1.0)],
        "only ghost-node lacks its pool"
    );
    assert!(
        kube.requests()
            .iter()
            .any(|r| r.starts_with("GET /api/v1/nodes/pool-node")),
        "the exporter did not GET its Node: {:?}",
        kube.requests()
    );
}
