//! End to end: the exporter runs `tests/scenarios/alerts.yaml` (throttled
//! GPU, critical XID, allocated-but-idle pod, healthy GPUs); Prometheus
//! scrapes it with the rules loaded (durations divided by 600) and sends to
//! Alertmanager, which posts to a webhook this test runs. The expected
//! alerts must arrive with the right labels and nothing else may fire. The
//! real adapter (`--dev`) serves a preset from that Prometheus. Then every
//! dashboard query and variable is evaluated against that Prometheus, and
//! the scrape's labels and served families are checked.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gpuscale_e2e::alerts::dashboards::{
    self, parse_label_values, substitute, without_zero_fallback,
};
use gpuscale_e2e::alerts::http::Server;
use gpuscale_e2e::alerts::procs::eventually;
use gpuscale_e2e::alerts::repo_root;
use gpuscale_e2e::alerts::rules;
use gpuscale_e2e::alerts::stack::{self, Adapter, Alertmanager, Notified, Prometheus, Webhook};
use gpuscale_e2e::exporter::Exporter;
use tempfile::TempDir;

use super::{
    HEALTHY, IDLE_ALLOCATED, LOST, RUNBOOK_BASE, SEVERITIES, SHARED, THROTTLED, UNALLOCATED, XID,
    charted_names, require,
};

/// Dashboard queries allowed to return nothing on the test scenario, with the reason.
const MAY_BE_EMPTY: &[(&str, &str)] = &[
    (
        "gpuscale / Node & GPU / PCIe links below their maximum / A",
        "every PCIe link of the scenario trains at its maximum; GPUPCIeLinkDegraded's promtool test feeds a degraded one",
    ),
    (
        "gpuscale / Node & GPU / PCIe links below their maximum / B",
        "every PCIe link of the scenario trains at its maximum; GPUPCIeLinkDegraded's promtool test feeds a degraded one",
    ),
    (
        "gpuscale / Node & GPU / NVLink down, ECC off, fabric / A",
        "no NVLink link of the scenario is down; GPUNVLinkDown's promtool test feeds one",
    ),
    (
        "gpuscale / Node & GPU / NVLink down, ECC off, fabric / B",
        "ECC is on for every GPU of the scenario; GPUECCDisabled's promtool test feeds ECC off",
    ),
    (
        "gpuscale / Node & GPU / NVLink down, ECC off, fabric / C",
        "the scenario's GPUs are not on an NVSwitch fabric (NVML reports no fabric state); GPUFabricNotReady's promtool test feeds it",
    ),
    (
        "gpuscale / Node & GPU / Processes without a pod / A",
        "every process of the scenario belongs to a pod; GPUZombieProcess's promtool test feeds a zombie",
    ),
    (
        "gpuscale / Node & GPU / Processes without a pod / B",
        "every process of the scenario belongs to a pod; GPUZombieProcess's promtool test feeds a zombie",
    ),
    (
        "gpuscale / Fleet / Reclaimable GPU nodes / A",
        NODE_ECONOMICS,
    ),
    (
        "gpuscale / Fleet / Reclaimable cost / h / A",
        NODE_ECONOMICS,
    ),
    ("gpuscale / Fleet / GPU nodes on Spot / A", NODE_ECONOMICS),
    (
        "gpuscale / Fleet / Spot price of the fleet / h / A",
        NODE_ECONOMICS,
    ),
    (
        "gpuscale / Fleet / Reclaimable GPU nodes by reason / A",
        NODE_ECONOMICS,
    ),
    (
        "gpuscale / Fleet / Reclaimable node-hours and cost per week by node pool / A",
        NODE_ECONOMICS,
    ),
    (
        "gpuscale / Fleet / Reclaimable node-hours and cost per week by node pool / B",
        NODE_ECONOMICS,
    ),
    (
        "gpuscale / Fleet / Top blockers by kind / A",
        NODE_ECONOMICS,
    ),
    (
        "gpuscale / Fleet / What keeps each GPU node / A",
        NODE_ECONOMICS,
    ),
    ("gpuscale / Fleet / GPU node prices / B", NODE_ECONOMICS),
    ("gpuscale / Fleet / GPU node prices / C", NODE_ECONOMICS),
    ("gpuscale / Node & GPU / DCGM up / A", NO_DCGM),
    ("gpuscale / Node & GPU / DCGM fields left out / A", NO_DCGM),
    ("gpuscale / Fleet / GPUs by node pool / A", POOL_LESS),
    ("gpuscale / Fleet / GPUs by node pool / B", POOL_LESS),
    ("gpuscale / Fleet / GPUs by node pool / C", POOL_LESS),
];

const NODE_ECONOMICS: &str = "the scenario's node has no instance type or Spot label, no pod that would keep it, and is not reclaimable; the node_economics.rs stories give it each of them and read these panels";

const NO_DCGM: &str = "the scenario's exporter runs no DCGM reader (no host engine is set); the dcgm_reader.rs stories run one against the DCGM simulator";

const POOL_LESS: &str = "the simulated node's Kubernetes API serves no Node object, so the exporter serves no gpu_node_info; node_pool.rs serves Nodes and checks the pool panels and variables";

/// Template variables allowed to have no values on the test scenario.
const VARIABLES_MAY_BE_EMPTY: &[(&str, &str)] = &[
    ("node_pool", POOL_LESS),
    (
        "cluster",
        "raw scrapes carry no `cluster` label (it comes from external labels behind Thanos/Mimir); the All value `.*` matches its absence",
    ),
];

/// An alert the scenario must raise: name and labels it must carry, and
/// whether it reaches the receiver (false: an inhibit rule of
/// `alerts/alertmanager-inhibit.yml` holds it back in Alertmanager).
struct Expected {
    alert: &'static str,
    labels: Labels,
    notified: bool,
}

impl Expected {
    fn matches(&self, alertname: &str, label: impl Fn(&str) -> String) -> bool {
        alertname == self.alert && self.labels.iter().all(|(k, v)| label(k) == *v)
    }
}

type Labels = &'static [(&'static str, &'static str)];

/// An alert that reaches the receiver.
const fn notified(alert: &'static str, labels: Labels) -> Expected {
    Expected {
        alert,
        labels,
        notified: true,
    }
}

/// An alert that fires but an inhibit rule holds back.
const fn inhibited(alert: &'static str, labels: Labels) -> Expected {
    Expected {
        alert,
        labels,
        notified: false,
    }
}

#[rustfmt::skip]
const EXPECTED: &[Expected] = &[
    notified("GPUThermalThrottling", &[("uuid", THROTTLED), ("gpu", "1"), ("reason", "sw_thermal")]),
    notified("GPUThermalThrottling", &[("uuid", THROTTLED), ("gpu", "1"), ("reason", "hw_thermal")]),
    notified("GPUMemoryTemperatureHigh", &[("uuid", THROTTLED), ("gpu", "1")]),
    inhibited("GPUTemperatureNearSlowdown", &[("uuid", THROTTLED), ("gpu", "1")]),
    notified("GPUCriticalXid", &[("uuid", XID), ("gpu", "2"), ("xid", "119")]),
    notified("GPUFallenOffBus", &[("uuid", LOST), ("gpu", "7"), ("state", "lost")]),
    inhibited("GPUCriticalXid", &[("uuid", LOST), ("gpu", "7"), ("xid", "79")]),
    notified("GPUAllocatedButIdle", &[
        ("uuid", IDLE_ALLOCATED), ("gpu", "3"), ("namespace", "ml-serve"), ("pod", "vllm-2"),
        ("container", "server"), ("workload", "vllm"), ("workload_kind", "Deployment"),
    ]),
];

/// Alerts of the hardware rule file: one per GPU, never with the labels of
/// a pod or of a scrape target (a replaced pod or exporter must not reset them).
fn is_hardware(alert: &str) -> bool {
    rules::all_rules()
        .iter()
        .any(|r| r.is_alert && r.name == alert && r.file.ends_with("gpu.rules.yml"))
}

fn describe(alerts: &[Notified]) -> String {
    alerts
        .iter()
        .map(|a| format!("  {} {} {:?}", a.status, a.label("alertname"), a.labels))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The monitoring stack of the end-to-end story, up and scraping. Fields
/// drop in order: Prometheus stops before what it scrapes.
struct Stack {
    prom: Prometheus,
    adapter: Adapter,
    exporter: Exporter,
    am: Alertmanager,
    _fakes: Server,
    webhook: Webhook,
    _dir: TempDir,
    t0: Instant,
}

/// Alertmanager posting to the webhook, the exporter on the scenario with
/// GPU prices, the adapter reading Prometheus, and Prometheus scraping them
/// (and the fake targets) with the time-scaled rules.
fn start_stack() -> Stack {
    let t0 = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let rule_copies = rules::write_time_scaled(&dir.path().join("rules"));
    let webhook = Webhook::start();
    let fakes = stack::start_fake_targets();
    let am = Alertmanager::start(dir.path(), &webhook.url());
    let scenario = repo_root().join("tests/scenarios/alerts.yaml");
    let state_file = dir.path().join("gpuscale-state.json");
    let exporter = Exporter::simulate(
        &scenario,
        &[
            "--gpu-price",
            "NVIDIA H100 80GB HBM3=4",
            "--gpu-price",
            "NVIDIA A100 80GB PCIe=2",
            "--state-file",
            state_file.to_str().expect("utf-8 path"),
        ],
    );
    let exporter_addr = format!("127.0.0.1:{}", exporter.port);
    let prom_port = stack::free_port();
    let adapter_metrics = format!("127.0.0.1:{}", stack::free_port());
    let adapter = Adapter::start(
        dir.path(),
        &format!("http://127.0.0.1:{prom_port}"),
        &adapter_metrics,
    );
    let config = stack::prometheus_config(
        &rule_copies,
        &am.addr,
        &exporter_addr,
        &adapter_metrics,
        &fakes.addr(),
    );
    let prom = Prometheus::start(dir.path(), &config, prom_port);
    eprintln!("stack up after {:?}", t0.elapsed());
    Stack {
        prom,
        adapter,
        exporter,
        am,
        _fakes: fakes,
        webhook,
        _dir: dir,
        t0,
    }
}

impl Stack {
    /// What the webhook, Prometheus, Alertmanager and the exporter say, for
    /// a failure message.
    fn context(&self) -> String {
        format!(
            "webhook received:\n{}\nPrometheus alerts: {:?}\n{}\n{}\nexporter log:\n{}",
            describe(&self.webhook.alerts()),
            self.prom
                .api("/api/v1/alerts", &[])
                .map(|d| d["alerts"].clone()),
            self.prom.proc.log_tail(20),
            self.am.proc.log_tail(20),
            self.exporter
                .log()
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        )
    }

    /// Whether `e` fires in Prometheus and, unless inhibited, reached the
    /// webhook (among `got`).
    fn arrived(&self, e: &Expected, firing: &[serde_json::Value], got: &[Notified]) -> bool {
        let in_prometheus = firing.iter().any(|a| {
            let label = |k: &str| a["labels"][k].as_str().unwrap_or("").to_string();
            a["state"] == "firing" && e.matches(&label("alertname"), label)
        });
        let at_webhook = got.iter().any(|a| {
            a.status == "firing" && e.matches(a.label("alertname"), |k| a.label(k).to_string())
        });
        in_prometheus && (!e.notified || at_webhook)
    }

    /// One instant-query series' value (the query must return exactly one).
    fn value(&self, q: &str) -> f64 {
        let r = self.prom.query(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(r.len(), 1, "{q}: expected one series, got {r:?}");
        r[0]["value"][1]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }

    fn close(&self, q: &str, want: f64) {
        let got = self.value(q);
        assert!(
            (got - want).abs() < 1e-6 * want.abs().max(1.0),
            "{q} = {got}, want {want}"
        );
    }
}

/// One stack, one story in order: alerts fire and are notified, nothing
/// else does, the rules compute, the adapter serves, the dashboards show
/// data, and the scrape keeps the right labels.
#[test]
fn end_to_end_alerts_and_dashboards() {
    require("prometheus");
    require("prometheus-alertmanager");
    require("curl");
    let tb = Instant::now();
    gpuscale_e2e::bins::ensure_built();
    gpuscale_e2e::bins::adapter();
    eprintln!("binaries built or fresh after {:?}", tb.elapsed());
    let mut s = start_stack();
    let received = expected_alerts_reach_the_webhook(&s);
    s.prom.proc.assert_running();
    notifications_carry_node_severity_and_runbook(&received);
    only_expected_notified(&received, "once the expected alerts arrived");
    only_expected_alerts(&s.prom, "once the expected alerts arrived");
    the_silence_is_not_vacuous(&s.prom);
    let evaluated = every_rule_evaluates(&s.prom);
    recording_rules_share_and_price_allocations(&s);
    waste_classes_name_idle_and_oversized_pods(&s.prom);
    adapter_serves_its_preset_from_prometheus(&s);
    let queries = every_dashboard_query_returns_data(&s);
    only_expected_alerts(&s.prom, "after the dashboards and the adapter reads");
    only_expected_notified(
        &s.webhook.alerts(),
        "after the dashboards and the adapter reads",
    );
    a_lost_gpus_xid_keeps_firing(&s);
    operator_style_scrape_keeps_the_gpus_pod_labels(&s.prom);
    every_served_family_is_charted(&s.exporter);
    eprintln!(
        "end to end: {} alerts notified, {evaluated} rules healthy, {queries} panel queries with data, in {:?}",
        received.len(),
        s.t0.elapsed()
    );
}

/// The expected alerts fire in Prometheus and reach the webhook through
/// Alertmanager (inhibited ones excepted); returns what the webhook got.
fn expected_alerts_reach_the_webhook(s: &Stack) -> Vec<Notified> {
    let received = eventually(
        "the expected alerts at the Alertmanager webhook",
        Duration::from_secs(150),
        || {
            let got = s.webhook.alerts();
            let firing = s.prom.api("/api/v1/alerts", &[]).ok()?;
            let firing = firing["alerts"].as_array()?;
            EXPECTED
                .iter()
                .all(|e| s.arrived(e, firing, &got))
                .then_some(got)
        },
        || s.context(),
    );
    eprintln!("all expected alerts notified after {:?}", s.t0.elapsed());
    received
}

/// Each notification names the node, never the exporter's namespace or (for
/// hardware alerts) a scrape target, and has a severity, filled-in
/// annotations and its runbook.
fn notifications_carry_node_severity_and_runbook(received: &[Notified]) {
    for e in EXPECTED.iter().filter(|e| e.notified) {
        let a = received
            .iter()
            .find(|a| e.matches(a.label("alertname"), |k| a.label(k).to_string()))
            .expect("matched above");
        assert_eq!(a.label("node"), "e2e-node", "{}: node label", e.alert);
        if is_hardware(e.alert) {
            hardware_alert_names_no_target_or_pod(e, a);
        } else {
            // Workload alerts are one per allocation, not per scrape job.
            assert_eq!(a.label("job"), "", "{}: job label", e.alert);
            assert_eq!(a.label("instance"), "", "{}: instance label", e.alert);
        }
        assert_ne!(
            a.label("namespace"),
            "gpuscale",
            "{}: the exporter's namespace",
            e.alert
        );
        assert!(
            SEVERITIES.contains(&a.label("severity")),
            "{}: severity",
            e.alert
        );
        assert!(
            !a.annotation("summary").is_empty() && !a.annotation("description").is_empty(),
            "{}: annotations",
            e.alert
        );
        assert!(
            !a.annotation("summary").contains("<no value>"),
            "{}: summary template: {}",
            e.alert,
            a.annotation("summary")
        );
        assert_eq!(
            a.annotation("runbook_url"),
            format!("{RUNBOOK_BASE}{}.md", e.alert)
        );
    }
}

/// A hardware alert is one per GPU: no scrape target's labels, no pod
/// unless the alert is about one.
fn hardware_alert_names_no_target_or_pod(e: &Expected, a: &Notified) {
    for k in [
        "job",
        "instance",
        "container",
        "exporter_pod",
        "exporter_namespace",
    ] {
        assert_eq!(a.label(k), "", "{}: hardware alert with {k}", e.alert);
    }
    if e.labels.iter().all(|(k, _)| *k != "pod") {
        assert_eq!(a.label("pod"), "", "{}: hardware alert with a pod", e.alert);
    }
}

/// Nothing else is notified. Inhibited alerts fire in Prometheus but never
/// reach the receiver: a lost GPU pages once, not once per symptom.
fn only_expected_notified(received: &[Notified], when: &str) {
    let unexpected: Vec<Notified> = received
        .iter()
        .filter(|a| {
            !EXPECTED
                .iter()
                .any(|e| e.notified && e.matches(a.label("alertname"), |k| a.label(k).to_string()))
        })
        .cloned()
        .collect();
    assert!(
        unexpected.is_empty(),
        "unexpected notifications ({when}):\n{}",
        describe(&unexpected)
    );
    let lost = received.iter().filter(|a| a.label("uuid") == LOST).count();
    assert_eq!(
        lost,
        1,
        "pages for the lost GPU ({when}):\n{}",
        describe(received)
    );
}

/// Nothing else fires or is pending in Prometheus, and no alert names a
/// healthy GPU.
fn only_expected_alerts(prom: &Prometheus, when: &str) {
    let active = prom.api("/api/v1/alerts", &[]).expect("alerts API");
    for a in active["alerts"].as_array().expect("alerts") {
        let l = &a["labels"];
        let label = |k: &str| l[k].as_str().unwrap_or("").to_string();
        assert!(
            EXPECTED
                .iter()
                .any(|e| e.matches(&label("alertname"), label)),
            "unexpected {} alert in Prometheus ({when}): {l}",
            a["state"]
        );
        assert!(
            !HEALTHY.contains(&label("uuid").as_str()),
            "an alert names healthy GPU: {l}"
        );
    }
}

/// The silence is not vacuous: the healthy GPUs are there, and the
/// application XID 13 was reported (it is excluded by the allowlist).
fn the_silence_is_not_vacuous(prom: &Prometheus) {
    for uuid in HEALTHY {
        let q = format!(r#"gpu_info{{uuid="{uuid}"}}"#);
        assert!(
            !prom.query(&q).expect("query").is_empty(),
            "healthy GPU {uuid} not scraped"
        );
    }
    let q = format!(r#"gpu_xid_last_seen_timestamp_seconds{{uuid="{XID}", xid="13"}}"#);
    assert!(
        !prom.query(&q).expect("query").is_empty(),
        "XID 13 was not reported"
    );
}

/// Every rule evaluates without error in Prometheus; returns how many.
fn every_rule_evaluates(prom: &Prometheus) -> usize {
    let groups = prom.api("/api/v1/rules", &[]).expect("rules API");
    let mut bad = Vec::new();
    let mut evaluated = 0;
    for g in groups["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            evaluated += 1;
            if r["health"] != "ok" {
                bad.push(format!(
                    "{} {}: {} {}",
                    g["name"], r["name"], r["health"], r["lastError"]
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "rules failing in Prometheus:\n{}",
        bad.join("\n")
    );
    assert_eq!(evaluated, rules::all_rules().len());
    evaluated
}

/// The recording rules on the real exporter output: GPU shares (whole, MIG
/// by compute slices, time-sliced split), cost from the price flag, and
/// the utilization of each allocation.
fn recording_rules_share_and_price_allocations(s: &Stack) {
    // Two 3g.40gb instances fill an H100 (8 of its 8 memory slices): each
    // holds half of it, and the GPU's whole price is charged.
    let mig_share = 0.5;
    for (q, want) in [
        (r#"gpuscale:gpu_allocation:share{pod="vllm-2"}"#, 1.0),
        (r#"gpuscale:gpu_allocation:share{pod="vllm-0"}"#, mig_share),
        (r#"gpuscale:gpu_allocation:share{pod="alice-0"}"#, 0.5),
        (
            r#"namespace:gpu_allocated:sum{namespace="ml-serve"}"#,
            1.0 + 2.0 * mig_share,
        ),
        (
            r#"namespace:gpu_cost_usd_per_hour:sum{namespace="ml-serve"}"#,
            4.0 * (1.0 + 2.0 * mig_share),
        ),
        (
            r#"namespace:gpu_cost_usd_per_hour:sum{namespace="notebooks"}"#,
            4.0,
        ),
        (
            r#"namespace_workload:gpu_cost_usd_per_hour:sum{workload="llama-train"}"#,
            4.0,
        ),
        (
            r#"gpuscale:gpu_allocation_utilization:ratio{pod="vllm-2"}"#,
            0.0,
        ),
        (
            r#"gpuscale:gpu_allocation_utilization:ratio{pod="vllm-0"}"#,
            0.6,
        ),
    ] {
        s.close(q, want);
    }
}

/// The waste classes: the idle replica, and the oversized notebooks.
fn waste_classes_name_idle_and_oversized_pods(prom: &Prometheus) {
    let classes: BTreeMap<String, String> = prom
        .query("gpuscale:gpu_allocation_waste:share")
        .expect("waste")
        .iter()
        .map(|s| {
            (
                s["metric"]["pod"].as_str().unwrap_or("").to_string(),
                s["metric"]["waste_class"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    let want: BTreeMap<String, String> = [
        ("vllm-2", "idle_replica"),
        ("alice-0", "oversized"),
        ("bob-0", "oversized"),
    ]
    .iter()
    .map(|(p, c)| (p.to_string(), c.to_string()))
    .collect();
    assert_eq!(classes, want, "waste classes");
}

/// The real adapter serves its GPU preset for ml-serve/vllm from this
/// Prometheus, as an HPA would read it; its self-metrics feed the
/// Autoscaling dashboard.
fn adapter_serves_its_preset_from_prometheus(s: &Stack) {
    let read = || {
        s.adapter
            .external_metric("ml-serve", stack::ADAPTER_METRIC, "workload%3Dvllm")
    };
    let (code, body) = eventually(
        "the adapter to serve gpu_pressure for ml-serve/vllm",
        Duration::from_secs(60),
        || {
            let r = read();
            (r.0 == 200).then_some(r)
        },
        || s.adapter.proc.log_tail(30),
    );
    assert!(body.contains("ExternalMetricValueList"), "{code}: {body}");
    eventually(
        "Prometheus to hold two scrapes of the adapter's counters",
        Duration::from_secs(60),
        || {
            read();
            let q = r#"count_over_time(gpuscale_adapter_requests_total{code="200"}[1m]) >= 2"#;
            (!s.prom.query(q).ok()?.is_empty()).then_some(())
        },
        || s.adapter.proc.log_tail(30),
    );
}

/// Every dashboard query and variable returns data; returns how many
/// queries ran.
fn every_dashboard_query_returns_data(s: &Stack) -> usize {
    let mut empty = Vec::new();
    let mut queries = 0;
    for d in dashboards::load_all() {
        let vars = d.variables();
        for q in d.queries() {
            queries += 1;
            let expr = substitute(without_zero_fallback(&q.expr), &vars);
            match s.prom.query(&expr) {
                Ok(r) if !r.is_empty() => {}
                Ok(_) if MAY_BE_EMPTY.iter().any(|(k, _)| *k == q.key()) => {}
                Ok(_) => empty.push(format!("{}: no data: {expr}", q.key())),
                Err(e) => empty.push(format!("{}: {e}: {expr}", q.key())),
            }
        }
        empty.extend(empty_variables(&s.prom, &vars));
    }
    assert!(
        empty.is_empty(),
        "{} of {queries} dashboard queries failed:\n{}",
        empty.len(),
        empty.join("\n")
    );
    eprintln!(
        "{queries} dashboard queries return data after {:?}",
        s.t0.elapsed()
    );
    queries
}

/// The query variables of one dashboard that have no values (and may not
/// be empty).
fn empty_variables(prom: &Prometheus, vars: &[dashboards::Variable]) -> Vec<String> {
    let mut empty = Vec::new();
    for v in vars.iter().filter(|v| v.kind == "query") {
        let (sel, label) =
            parse_label_values(v.query.as_deref().unwrap_or("")).expect("label_values");
        let values = prom
            .label_values(&substitute(&sel, vars), &label)
            .unwrap_or_default();
        if values.is_empty() && !VARIABLES_MAY_BE_EMPTY.iter().any(|(n, _)| *n == v.name) {
            empty.push(format!("{} / variable ${}: no values", v.dashboard, v.name));
        }
    }
    empty
}

/// XID 79 of the lost GPU still fires, well past the (scaled) hold window
/// of its range selector: the exporter keeps the lost GPU's XID series.
fn a_lost_gpus_xid_keeps_firing(s: &Stack) {
    let xid79 = format!(
        r#"ALERTS{{alertname="GPUCriticalXid", uuid="{LOST}", xid="79", alertstate="firing"}}"#
    );
    assert_eq!(
        s.prom.query(&xid79).expect("query").len(),
        1,
        "XID 79 of the lost GPU resolved"
    );
    eprintln!(
        "XID 79 of the lost GPU still firing after {:?}",
        s.t0.elapsed()
    );
}

/// Operator-style scrape (target labels of the exporter pod, honor_labels,
/// the ServiceMonitor's relabelings): series keep the GPU's pod labels or
/// none; the exporter pod's identity is exporter_*.
fn operator_style_scrape_keeps_the_gpus_pod_labels(prom: &Prometheus) {
    let exporter_ns = prom
        .query(r#"count by (namespace) ({__name__=~"gpu_.+|gpuscale_exporter_.+", namespace="gpuscale"})"#)
        .expect("query");
    assert!(
        exporter_ns.is_empty(),
        "series in the exporter's namespace: {exporter_ns:?}"
    );
    for (q, pod) in [
        (
            format!(r#"gpu_utilization_ratio{{uuid="{UNALLOCATED}"}}"#),
            "",
        ),
        (format!(r#"gpu_utilization_ratio{{uuid="{SHARED}"}}"#), ""),
        (
            format!(r#"gpu_utilization_ratio{{uuid="{IDLE_ALLOCATED}"}}"#),
            "vllm-2",
        ),
        ("gpuscale_exporter_nvml_up".to_string(), ""),
    ] {
        let r = prom.query(&q).expect("query");
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        let l = &r[0]["metric"];
        assert_eq!(l["pod"].as_str().unwrap_or(""), pod, "{q}: pod label: {l}");
        assert_eq!(l["exporter_pod"], "gpuscale-exporter-x7k2p", "{q}: {l}");
        assert_eq!(l["exporter_namespace"], "gpuscale", "{q}: {l}");
        assert_eq!(l["node"], "e2e-node", "{q}: {l}");
        for k in ["service", "endpoint"] {
            assert!(l[k].is_null(), "{q}: target label {k} kept: {l}");
        }
        if pod.is_empty() {
            assert!(
                l["container"].is_null(),
                "{q}: the exporter's container: {l}"
            );
        }
    }
}

/// Every family the exporter serves on the scenario is charted by a dashboard.
fn every_served_family_is_charted(exporter: &Exporter) {
    let exposition = exporter.scrape();
    let charted = charted_names();
    let uncharted: Vec<&String> = exposition
        .families
        .keys()
        .filter(|f| !charted.contains(*f))
        .collect();
    assert!(
        uncharted.is_empty(),
        "exporter families no dashboard shows: {uncharted:?}"
    );
}
