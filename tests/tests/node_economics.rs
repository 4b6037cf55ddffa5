//! Node economics end to end (issue 42, docs/node-economics.md): five
//! simulated GPU nodes, each with its own Kubernetes API and exporter, one
//! real Prometheus with the time-scaled rules (the 15-minute window is 4 s,
//! `for: 30m` 3 s) and a real Alertmanager.
//!
//! - `parked-node`: its GPU workload parks; a CPU-only Deployment pod under
//!   a `maxUnavailable: 0` budget stays. Reclaimable, the alert fires once
//!   naming the pod and the budget; deleting the budget clears that
//!   blocker; the accrued cost matches a hand computation.
//! - `daemonset-node`: only a DaemonSet pod: reclaimable, no blocker.
//! - `idle-node`: a Karpenter Spot node whose two GPUs are held (a Job, a
//!   single-replica Deployment) and idle: reclaimable for the idle reason,
//!   its GPUs priced at the Spot price; the advisor lists the Job as a Spot
//!   candidate and the Deployment as a risk.
//! - `waking-node`: reclaimable until a GPU pod arrives, then not within
//!   one interval.
//! - `blind-node`: its API does not answer: facts absent, the reason said,
//!   never reclaimable.
//!
//! Then `gpuscale-advisor` on the same Prometheus (a fake scale-to-zero
//! controller target says `ml/chat` is parked): the Spot candidates and
//! risks, the reclaimable node-hours, and that the parked workload's node
//! stayed with nothing keeping it.

use std::time::{Duration, Instant};

use gpuscale_e2e::alerts::dashboards::{self, substitute, without_zero_fallback};
use gpuscale_e2e::alerts::http::{Response, Server};
use gpuscale_e2e::alerts::procs::{eventually, on_path};
use gpuscale_e2e::alerts::rules;
use gpuscale_e2e::alerts::stack::{self, Alertmanager, Notified, Prometheus, Webhook};
use gpuscale_e2e::exporter::Exporter;
use gpuscale_e2e::pods::{TestNode, parse, write_scenario};
use gpuscale_sim::kubeapi::core;
use gpuscale_sim::node::economics::{self, CpuPod};
use serde_json::{Value, json};

const P5: &[(&str, &str)] = &[("node.kubernetes.io/instance-type", "p5.48xlarge")];
const P5_ON_DEMAND: f64 = 55.04;
const P5_SPOT: f64 = 22.02;
const FRONTEND: &str = "frontend-5d8f7c9b4-x7k2p";

/// A one-GPU node, its GPU `utilization` % busy, held by pod `holder` of
/// Deployment `chat` when given.
fn scenario(node: &str, n: u8, utilization: u32, holder: Option<&str>) -> String {
    let uuid = format!("GPU-e{n}000000-0000-4000-8000-000000000000");
    let mut y = format!(
        "node: {node}\ngpus:\n  - model: NVIDIA H100 80GB HBM3\n    uuid: {uuid}\n    pci_bus_id: \"00000000:18:00.0\"\n    memory_mib: 81559\n    load: {{ utilization: {utilization}, memory_used_mib: 20000 }}\n"
    );
    if let Some(pod) = holder {
        y.push_str(&pod_yaml(pod, n, &uuid));
    }
    y
}

fn pod_yaml(pod: &str, n: u8, uuid: &str) -> String {
    format!(
        "pods:\n  - namespace: ml\n    name: {pod}\n    uid: 0000000{n}-0000-4000-8000-00000000cafe\n    phase: Running\n    owner: {{ kind: Deployment, name: chat }}\n    containers:\n      - name: vllm\n        id: {id}\n        devices:\n          - {{ resource: nvidia.com/gpu, ids: [{uuid}] }}\n",
        id = format!("{n}").repeat(64)
    )
}

/// A Karpenter Spot node with two idle GPUs: one held by the single
/// replica of Deployment `assistant`, one by the pod of Job `embed-batch`.
fn spot_scenario() -> String {
    let mut y = String::from("node: idle-node\ngpus:\n");
    for g in 0..2 {
        y.push_str(&format!(
            "  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-e3{g}00000-0000-4000-8000-000000000000\n    pci_bus_id: \"00000000:{:02x}:00.0\"\n    memory_mib: 81559\n    load: {{ utilization: 0, memory_used_mib: 20000 }}\n",
            0x18 + g
        ));
    }
    y.push_str("pods:\n");
    for (g, (kind, workload, pod)) in [
        ("Deployment", "assistant", "assistant-6d5f8c7b9-q2w3e"),
        ("Job", "embed-batch", "embed-batch-x8k2p"),
    ]
    .iter()
    .enumerate()
    {
        y.push_str(&format!(
            "  - namespace: ml\n    name: {pod}\n    uid: 0000003{g}-0000-4000-8000-00000000cafe\n    phase: Running\n    owner: {{ kind: {kind}, name: {workload} }}\n    containers:\n      - name: main\n        id: {id}\n        devices:\n          - {{ resource: nvidia.com/gpu, ids: [GPU-e3{g}00000-0000-4000-8000-000000000000] }}\n",
            id = format!("3{g}").repeat(32)
        ));
    }
    y
}

/// One node of the story: its simulated node and its exporter.
struct Node {
    name: &'static str,
    sim: TestNode,
    exporter: Exporter,
}

fn start_node(
    dir: &std::path::Path,
    name: &'static str,
    yaml: &str,
    setup: impl Fn(&TestNode),
) -> Node {
    let sim = TestNode::start(&parse(yaml));
    setup(&sim);
    let file = write_scenario(dir, &format!("{name}.yaml"), yaml);
    let mut flags = sim.flags();
    flags.extend(
        [
            "--node-facts-interval",
            "1s",
            "--pod-refresh-interval",
            "1s",
        ]
        .map(String::from),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let exporter = Exporter::simulate(&file, &flags);
    Node {
        name,
        sim,
        exporter,
    }
}

fn cpu_pod(
    namespace: &'static str,
    name: &'static str,
    owner: (&'static str, &'static str),
    app: &str,
) -> CpuPod<'static> {
    CpuPod {
        namespace,
        name,
        owner: Some(owner),
        labels: json!({ "app": app }),
        annotations: json!({}),
        volumes: json!([{ "name": "root", "hostPath": { "path": "/" } }]),
    }
}

fn start_nodes(dir: &std::path::Path) -> Vec<Node> {
    let parked = start_node(
        dir,
        "parked-node",
        &scenario("parked-node", 1, 60, Some("chat-5d8f7c9b4-abcde")),
        |n| {
            let api = n.sim.api();
            economics::label_node(api, "parked-node", P5, &[]);
            let mut frontend = cpu_pod(
                "web",
                FRONTEND,
                ("ReplicaSet", "frontend-5d8f7c9b4"),
                "frontend",
            );
            frontend.volumes = json!([]);
            api.put(&core("pods"), frontend.object("parked-node"));
            api.put(
                &economics::pdbs(),
                economics::pdb(
                    "web",
                    "frontend",
                    "frontend",
                    json!({ "maxUnavailable": 0 }),
                    0,
                ),
            );
        },
    );
    let daemonset = start_node(
        dir,
        "daemonset-node",
        &scenario("daemonset-node", 2, 0, None),
        |n| {
            economics::label_node(n.sim.api(), "daemonset-node", P5, &[]);
            let exporter = cpu_pod(
                "monitoring",
                "node-exporter-9fz2k",
                ("DaemonSet", "node-exporter"),
                "node-exporter",
            );
            n.sim
                .api()
                .put(&core("pods"), exporter.object("daemonset-node"));
        },
    );
    let idle = start_node(dir, "idle-node", &spot_scenario(), |n| {
        let spot = [P5[0], ("karpenter.sh/capacity-type", "spot")];
        economics::label_node(n.sim.api(), "idle-node", &spot, &[]);
    });
    let waking = start_node(
        dir,
        "waking-node",
        &scenario("waking-node", 4, 50, None),
        |n| {
            economics::label_node(n.sim.api(), "waking-node", P5, &[]);
        },
    );
    let blind = start_node(
        dir,
        "blind-node",
        &scenario("blind-node", 5, 0, None),
        |n| n.sim.set_api_down(true),
    );
    vec![parked, daemonset, idle, waking, blind]
}

/// Prometheus scraping every node's exporter under both monitor jobs, with
/// the time-scaled rules, alerting through Alertmanager to a webhook.
fn start_stack(
    dir: &std::path::Path,
    nodes: &[Node],
) -> (Prometheus, Alertmanager, Webhook, Server) {
    let rule_files: Vec<_> = rules::write_time_scaled(&dir.join("rules"))
        .into_iter()
        .filter(|p| !p.ends_with("gpuscale.rules.yml"))
        .collect();
    let webhook = Webhook::start();
    let am = Alertmanager::start(dir, &webhook.url());
    let targets: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.exporter.port))
        .collect();
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    let mut config =
        stack::exporters_jobs_config(&rule_files, &am.addr, &targets, stack::MONITOR_JOBS);
    let controller = parked_controller();
    config.push_str(&format!(
        "  - job_name: gpuscale-scale-to-zero\n    honor_labels: true\n    static_configs:\n      - targets: ['{}']\n",
        controller.addr()
    ));
    let prom = Prometheus::start(dir, &config, stack::free_port());
    (prom, am, webhook, controller)
}

/// The scale-to-zero controller's view, as its /metrics says it: ml/chat
/// (the workload parked on parked-node) is parked.
fn parked_controller() -> Server {
    Server::start(|_| {
        Response::text(
            "# TYPE gpuscale_scale_to_zero_parked gauge\ngpuscale_scale_to_zero_parked{namespace=\"ml\",target=\"Deployment/chat\"} 1\n".into(),
        )
    })
}

fn value(v: &Value) -> f64 {
    v["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

fn reclaimable(prom: &Prometheus, node: &str) -> Vec<String> {
    let q = format!("gpuscale:node_reclaimable:bool{{node=\"{node}\"}}");
    let r = prom.query(&q).unwrap_or_default();
    r.iter()
        .filter_map(|s| s["metric"]["reason"].as_str().map(str::to_owned))
        .collect()
}

fn page<'a>(got: &'a [Notified], node: &str) -> Option<&'a Notified> {
    got.iter().find(|a| {
        a.label("alertname") == "GPUNodeReclaimable"
            && a.label("node") == node
            && a.status == "firing"
    })
}

fn require(bin: &str) {
    assert!(
        on_path(bin),
        "`{bin}` is not on PATH: install the Debian packages prometheus and prometheus-alertmanager"
    );
}

#[test]
fn gpu_nodes_that_could_go_are_found_with_what_keeps_them() {
    require("prometheus");
    require("prometheus-alertmanager");
    gpuscale_e2e::bins::ensure_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = start_nodes(dir.path());
    let (prom, _am, webhook, _controller) = start_stack(dir.path(), &nodes);
    let context = || {
        let logs: Vec<String> = nodes
            .iter()
            .map(|n| format!("--- {}:\n{}", n.name, n.exporter.log()))
            .collect();
        format!(
            "webhook: {:?}\n{}\n{}",
            webhook.alerts(),
            prom.proc.log_tail(10),
            logs.join("\n")
        )
    };
    the_spot_node_prices_its_gpu_at_the_spot_price(&nodes[2]);
    eventually(
        "Prometheus to see parked-node's GPU allocated",
        Duration::from_secs(30),
        || {
            let r = prom
                .query(r#"max(gpu_node_gpus{node="parked-node",state="allocated"}) == 1"#)
                .ok()?;
            (!r.is_empty()).then_some(())
        },
        context,
    );
    a_workload_that_wakes_ends_reclaimable_within_an_interval(&prom, &nodes[3], &context);
    assert!(
        nodes[0].sim.sim.delete_pod("ml", "chat-5d8f7c9b4-abcde"),
        "park: delete the GPU pod"
    );
    let got = eventually(
        "GPUNodeReclaimable for parked-node, daemonset-node and idle-node",
        Duration::from_secs(60),
        || {
            let got = webhook.alerts();
            ["parked-node", "daemonset-node", "idle-node"]
                .iter()
                .all(|n| page(&got, n).is_some())
                .then_some(got)
        },
        context,
    );
    each_page_names_what_keeps_its_node(&got);
    the_alert_fires_once(&prom, &webhook);
    removing_the_budget_clears_its_blocker(&prom, &nodes[0], &context);
    the_accrued_cost_is_the_price_times_the_time(&prom);
    the_blind_node_is_never_reclaimable(&prom, &webhook, &nodes[4]);
    the_fleet_dashboard_row_has_data(&prom);
    the_advisor_names_spot_candidates_and_risks_and_the_waste(&prom);
}

fn the_spot_node_prices_its_gpu_at_the_spot_price(idle: &Node) {
    let m = idle.exporter.scrape_until("idle-node's node facts", |m| {
        m.has("gpu_node_price_usd_per_hour")
    });
    assert_eq!(
        m.value(
            "gpu_node_capacity_info",
            &[("capacity_type", "spot"), ("instance_type", "p5.48xlarge")]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            "gpu_node_price_usd_per_hour",
            &[("node", "idle-node"), ("source", "table")]
        ),
        P5_SPOT
    );
    assert_eq!(
        m.value("gpu_node_spot_price_usd_per_hour", &[("node", "idle-node")]),
        P5_SPOT
    );
    let gpu = m.find("gpu_price_usd_per_hour", &[]);
    assert!(
        gpu.len() == 2 && gpu.iter().all(|s| s.value == P5_SPOT / 2.0),
        "each of the two GPUs costs half the Spot node's price: {gpu:?}"
    );
}

fn a_workload_that_wakes_ends_reclaimable_within_an_interval(
    prom: &Prometheus,
    waking: &Node,
    context: &dyn Fn() -> String,
) {
    eventually(
        "waking-node reclaimable (unallocated)",
        Duration::from_secs(60),
        || (reclaimable(prom, "waking-node") == ["unallocated"]).then_some(()),
        context,
    );
    let pod: gpuscale_nvml_sim::scenario::Pod = yaml_serde::from_str(
        pod_yaml(
            "chat-6b8d9f7c5-k2l3m",
            4,
            "GPU-e4000000-0000-4000-8000-000000000000",
        )
        .trim_start_matches("pods:\n  - ")
        .replace("\n    ", "\n")
        .as_str(),
    )
    .expect("pod YAML");
    let woke = Instant::now();
    waking.sim.sim.add_pod(&pod).expect("add the GPU pod");
    eventually(
        "waking-node no longer reclaimable",
        Duration::from_secs(10),
        || reclaimable(prom, "waking-node").is_empty().then_some(()),
        context,
    );
    // The kubelet refresh, a scrape and a rule evaluation: 1 s each here.
    assert!(
        woke.elapsed() < Duration::from_secs(6),
        "took {:?}",
        woke.elapsed()
    );
}

fn each_page_names_what_keeps_its_node(got: &[Notified]) {
    let parked = page(got, "parked-node").expect("parked-node page");
    assert_eq!(parked.label("reason"), "unallocated");
    assert_eq!(
        parked.annotation("blockers"),
        format!("pdb web/{FRONTEND} (frontend)"),
        "{parked:?}"
    );
    assert!(
        parked
            .annotation("description")
            .contains("costs 55.04 USD an hour"),
        "{parked:?}"
    );
    let ds = page(got, "daemonset-node").expect("daemonset-node page");
    assert_eq!(
        (ds.label("reason"), ds.annotation("blockers")),
        ("unallocated", "none"),
        "{ds:?}"
    );
    let idle = page(got, "idle-node").expect("idle-node page");
    assert_eq!(
        (idle.label("reason"), idle.annotation("blockers")),
        ("idle", "none"),
        "{idle:?}"
    );
    assert!(
        page(got, "waking-node").is_none() && page(got, "blind-node").is_none(),
        "{got:?}"
    );
}

/// activeAt of parked-node's alert in Prometheus.
fn active_at(prom: &Prometheus) -> Option<String> {
    let data = prom.api("/api/v1/alerts", &[]).ok()?;
    data["alerts"].as_array()?.iter().find_map(|a| {
        (a["labels"]["alertname"] == "GPUNodeReclaimable"
            && a["labels"]["node"] == "parked-node"
            && a["state"] == "firing")
            .then(|| a["activeAt"].as_str().unwrap_or("").to_owned())
    })
}

fn the_alert_fires_once(prom: &Prometheus, webhook: &Webhook) {
    let first = active_at(prom).expect("parked-node's alert firing");
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        active_at(prom),
        Some(first),
        "the alert resolved or restarted"
    );
    let got = webhook.alerts();
    let pages: Vec<&Notified> = got
        .iter()
        .filter(|a| {
            a.label("alertname") == "GPUNodeReclaimable" && a.label("node") == "parked-node"
        })
        .collect();
    assert!(
        pages
            .iter()
            .all(|a| a.status == "firing" && a.labels == pages[0].labels),
        "one alert, never resolved: {pages:?}"
    );
}

fn removing_the_budget_clears_its_blocker(
    prom: &Prometheus,
    parked: &Node,
    context: &dyn Fn() -> String,
) {
    let m = parked.exporter.scrape();
    assert_eq!(
        m.value(
            "gpu_node_blocker",
            &[("kind", "pdb"), ("pod", FRONTEND), ("detail", "frontend")]
        ),
        1.0
    );
    assert!(
        parked
            .sim
            .sim
            .api()
            .delete(&economics::pdbs(), "web", "frontend"),
        "delete the budget"
    );
    eventually(
        "the pdb blocker gone from Prometheus",
        Duration::from_secs(20),
        || {
            let gone = prom
                .query(r#"gpu_node_blocker{node="parked-node"}"#)
                .ok()?
                .is_empty();
            let zero = prom
                .query(r#"max(gpu_node_blockers{node="parked-node"}) == 0"#)
                .ok()?;
            (gone && !zero.is_empty()).then_some(())
        },
        context,
    );
    assert_eq!(
        reclaimable(prom, "parked-node"),
        ["unallocated"],
        "still reclaimable"
    );
}

/// Evaluates `q` at `t` (Unix seconds); its one value.
fn at(prom: &Prometheus, q: &str, t: &str) -> f64 {
    let data = prom
        .api("/api/v1/query", &[("query", q), ("time", t)])
        .unwrap_or_else(|e| panic!("{q}: {e}"));
    let r = data["result"].as_array().cloned().unwrap_or_default();
    assert_eq!(r.len(), 1, "{q} at {t}: {r:?}");
    value(&r[0])
}

fn the_accrued_cost_is_the_price_times_the_time(prom: &Prometheus) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let t = (now - 1).to_string();
    let sel = r#"{node="parked-node"}"#;
    let steps = at(
        prom,
        &format!("count_over_time(gpuscale:node_reclaimable:bool{sel}[10m:1s])"),
        &t,
    );
    let since = at(
        prom,
        &format!("min_over_time(timestamp(gpuscale:node_reclaimable:bool{sel})[10m:1s])"),
        &t,
    );
    let usd = at(
        prom,
        &format!("sum_over_time(gpuscale:node_reclaimable_cost_usd_per_hour{sel}[10m:1s]) / 3600"),
        &t,
    );
    // By hand: one 1 s step per second since the node became reclaimable,
    // each a second of the on-demand price.
    let seconds = t.parse::<f64>().expect("t") - since + 1.0;
    assert!(
        (steps - seconds).abs() <= 2.0,
        "{steps} steps in {seconds} s"
    );
    let by_hand = steps * P5_ON_DEMAND / 3600.0;
    assert!(
        (usd - by_hand).abs() < 1e-9,
        "accrued {usd} USD, by hand {by_hand} USD ({steps} s at {P5_ON_DEMAND} USD/h)"
    );
    assert!(usd > 0.0);
}

fn the_blind_node_is_never_reclaimable(prom: &Prometheus, webhook: &Webhook, blind: &Node) {
    let m = blind.exporter.scrape();
    let up = m.find("gpuscale_exporter_node_facts_up", &[("node", "blind-node")]);
    let reason = up
        .first()
        .and_then(|s| s.labels.get("reason"))
        .cloned()
        .unwrap_or_default();
    assert!(
        up.len() == 1 && up[0].value == 0.0 && reason.starts_with("node_"),
        "{up:?}"
    );
    for family in [
        "gpu_node_gpus",
        "gpu_node_capacity_info",
        "gpu_node_blockers",
        "gpu_node_price_usd_per_hour",
    ] {
        assert!(
            !m.has(family),
            "{family} served while the facts are unknown"
        );
    }
    assert!(
        blind
            .exporter
            .log()
            .contains("cannot read the node's facts"),
        "{}",
        blind.exporter.log()
    );
    assert!(reclaimable(prom, "blind-node").is_empty());
    let ever = prom
        .query(r#"count_over_time(gpuscale:node_reclaimable:bool{node="blind-node"}[10m])"#)
        .unwrap_or_default();
    assert!(
        ever.is_empty(),
        "blind-node was reclaimable at some point: {ever:?}"
    );
    assert!(page(&webhook.alerts(), "blind-node").is_none());
}

/// The Fleet dashboard's "Reclaimable GPU nodes" row (but the 7-day table,
/// whose 5-minute steps need more history than a test has) reads data.
fn the_fleet_dashboard_row_has_data(prom: &Prometheus) {
    let fleet = dashboards::load_all()
        .into_iter()
        .find(|d| d.title() == "gpuscale / Fleet")
        .expect("Fleet dashboard");
    let vars = fleet.variables();
    let titles = [
        "Reclaimable GPU nodes",
        "Reclaimable cost / h",
        "Node facts known",
        "GPU nodes on Spot",
        "Blockers",
        "Spot price of the fleet / h",
        "GPUs by state (node facts)",
        "Reclaimable GPU nodes by reason",
        "GPU node prices",
    ];
    let mut empty = Vec::new();
    for q in fleet.queries().iter().filter(|q| {
        titles
            .iter()
            .any(|t| q.key().starts_with(&format!("gpuscale / Fleet / {t} /")))
    }) {
        let expr = substitute(without_zero_fallback(&q.expr), &vars);
        if prom.query(&expr).map_or(true, |r| r.is_empty()) {
            empty.push(format!("{}: {expr}", q.key()));
        }
    }
    assert!(empty.is_empty(), "no data:\n{}", empty.join("\n"));
}

/// `gpuscale-advisor` on the same Prometheus: the Spot node's batch Job is a
/// candidate, its single-replica production Deployment a risk; the node
/// section counts reclaimable node-hours and the budget seen.
fn the_advisor_names_spot_candidates_and_risks_and_the_waste(prom: &Prometheus) {
    let r = advisor_json(prom);
    spot_section_lists_the_job_and_the_risk(&r);
    node_section_counts_the_waste_and_the_budget(&r);
}

fn advisor_json(prom: &Prometheus) -> Value {
    let bin = gpuscale_e2e::bins::target_dir().join("gpuscale-advisor");
    let out = std::process::Command::new(&bin)
        .args([
            "--prometheus",
            &prom.url,
            "--range",
            "10m",
            "--step",
            "1s",
            "-o",
            "json",
        ])
        .output()
        .expect("run gpuscale-advisor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "advisor: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).expect("advisor JSON")
}

fn spot_section_lists_the_job_and_the_risk(r: &Value) {
    let named =
        |v: &Value, name: &str| v["workload"]["name"] == name && v["workload"]["namespace"] == "ml";
    let candidates = r["spot"]["candidates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let job = candidates
        .iter()
        .find(|c| named(c, "embed-batch"))
        .unwrap_or_else(|| panic!("no Job candidate: {}", r["spot"]));
    assert_eq!(
        (job["workload"]["kind"].as_str(), job["on_spot"].as_bool()),
        (Some("Job"), Some(true)),
        "{job}"
    );
    assert!(
        job["evidence"][0]
            .as_str()
            .is_some_and(|e| e.contains("retries its pods")),
        "{job}"
    );
    let risks = r["spot"]["risks"].as_array().cloned().unwrap_or_default();
    let risk = risks
        .iter()
        .find(|x| named(x, "assistant"))
        .unwrap_or_else(|| panic!("no risk: {}", r["spot"]));
    assert!(
        risk["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("a single-replica production service on Spot")),
        "{risk}"
    );
    assert!(
        !candidates.iter().any(|c| named(c, "assistant")),
        "a single-replica production service offered for Spot"
    );
}

fn node_section_counts_the_waste_and_the_budget(r: &Value) {
    let pools = r["nodes"]["pools"].as_array().cloned().unwrap_or_default();
    let hours: f64 = pools
        .iter()
        .filter_map(|p| p["reclaimable_node_hours"].as_f64())
        .sum();
    let nodes: u64 = pools
        .iter()
        .filter_map(|p| p["reclaimable_nodes"].as_u64())
        .sum();
    assert!(hours > 0.0 && nodes >= 3, "{}", r["nodes"]);
    let blockers: Vec<&str> = pools
        .iter()
        .flat_map(|p| p["blockers"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        blockers.contains(&format!("pdb web/{FRONTEND} (frontend)").as_str()),
        "{}",
        r["nodes"]
    );
    // The parked workload's node stayed: its budget is gone, nothing else keeps it.
    let parked = r["nodes"]["parked"].as_array().cloned().unwrap_or_default();
    let on_parked = parked
        .iter()
        .find(|p| p["node"] == "parked-node" && p["target"] == "Deployment/chat");
    let on_parked = on_parked.unwrap_or_else(|| panic!("no parked entry: {}", r["nodes"]));
    assert_eq!(on_parked["node_went"], false, "{on_parked}");
    assert!(
        on_parked["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("no blocker")),
        "{on_parked}"
    );
}
