//! The request holders' presets end to end: a real Prometheus scraping
//! series shaped as the endpoint picker (Gateway API Inference Extension and
//! llm-d), the KEDA HTTP add-on's interceptor, Knative's activator and the
//! gpuscale activator emit them, read through the external metrics API with
//! `kubectl get --raw` over TLS.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use gpuscale_e2e::adapter::client::{Adapter, KubectlOutput, kubectl_raw};
use gpuscale_e2e::adapter::holders::{NAMESPACE, exposition};
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::{self, Prometheus};
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::adapter::world::{Pki, rbac};
use gpuscale_e2e::kubeapi::KubeFake;

struct World {
    adapter: Adapter,
    alice: PathBuf,
    _prom: Prometheus,
    _kube: KubeFake,
    _series: Series,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let (series, port) = Series::serve(&exposition());
        let prom = Prometheus::start(port);
        let pki = Pki::new("gpuscale-holders-e2e-");
        let kube = KubeFake::start(pki.cluster(BTreeMap::new(), rbac(&[])));
        let adapter = pki.adapter_on("adapter", &kube, "presets: all\n", &prom.url, &[], true);
        let alice_id = pki.identity("alice", &pki.clients.client("alice", &["team-inference"]));
        let alice = pki.kubeconfig("alice", &adapter, &alice_id);
        let w = World {
            adapter,
            alice,
            _prom: prom,
            _kube: kube,
            _series: series,
        };
        eventually("the holders' series through the adapter", || {
            let out = get(
                &w,
                NAMESPACE,
                "activator_pending_requests",
                "route=llama-8b",
            );
            out.ok.then_some(())
        });
        w
    })
}

fn get(w: &World, ns: &str, metric: &str, selector: &str) -> KubectlOutput {
    let path = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector={}",
        prom::encode(selector)
    );
    kubectl_raw(&w.alice, &path)
}

/// The single value of `metric{selector}` in `ns`.
fn read(ns: &str, metric: &str, selector: &str) -> String {
    let w = world();
    let out = get(w, ns, metric, selector);
    assert!(
        out.ok,
        "kubectl failed for {metric}{{{selector}}} in {ns}: {out:?}\nadapter log:\n{}",
        w.adapter.guard.log_tail(40)
    );
    let v = out.json();
    assert_eq!(v["kind"], "ExternalMetricValueList", "{v}");
    let items = v["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{v}");
    items[0]["value"].as_str().expect("value").to_string()
}

/// The error kubectl printed for `metric{selector}` in `ns`.
fn refused(ns: &str, metric: &str, selector: &str) -> String {
    let out = get(world(), ns, metric, selector);
    assert!(
        !out.ok,
        "{metric}{{{selector}}} in {ns} was served: {out:?}"
    );
    out.stderr
}

/// Each holder preset with its selectors and the value the scripted
/// series imply.
pub(crate) const STORIES: &[(&str, &str, &str)] = &[
    // Two flows of one pool and model.
    (
        "gateway_flow_control_queue_size",
        "inference_pool=chat-pool",
        "5",
    ),
    (
        "gateway_flow_control_queue_size",
        "inference_pool=chat-pool,fairness_id=tenant-b",
        "2",
    ),
    (
        "gateway_flow_control_queue_size",
        "target_model_name=llama-8b",
        "5",
    ),
    ("gateway_pool_average_queue_size", "name=chat-pool", "2500m"),
    // A pool with no ready pod reads 0: the gauge is there.
    ("gateway_pool_ready_pods", "name=chat-pool", "0"),
    // Two interceptor replicas; the route of `other` is not counted.
    ("keda_http_pending_requests", "route_name=llama-8b", "3"),
    (
        "knative_activator_request_concurrency",
        "configuration_name=llama-8b",
        "4",
    ),
    (
        "knative_activator_request_concurrency",
        "revision_name=llama-8b-00001",
        "4",
    ),
    (
        "knative_revision_request_concurrency",
        "kn_revision_name=llama-8b-00001",
        "6",
    ),
    ("activator_pending_requests", "route=llama-8b", "3"),
    ("activator_pending_requests", "route=qwen-coder", "0"),
];

#[test]
fn each_holder_preset_reads_its_upstream_series() {
    for (metric, selector, want) in STORIES {
        assert_eq!(
            read(NAMESPACE, metric, selector),
            *want,
            "{metric}{{{selector}}}"
        );
    }
}

#[test]
fn llm_d_names_are_read_once_not_with_their_deprecated_mirror() {
    assert_eq!(
        read(
            NAMESPACE,
            "gateway_flow_control_queue_size",
            "inference_pool=code-pool"
        ),
        "4"
    );
    assert_eq!(
        read(NAMESPACE, "gateway_pool_ready_pods", "name=code-pool"),
        "2"
    );
}

#[test]
fn the_namespace_is_the_holders_label_not_the_holders_pod() {
    // The interceptor's pods run in `keda` and Knative's activator in
    // `knative-serving`: nothing is held for those namespaces.
    assert!(
        refused("keda", "keda_http_pending_requests", "route_name=llama-8b")
            .contains("ServiceUnavailable")
    );
    assert!(
        refused(
            "knative-serving",
            "knative_activator_request_concurrency",
            "configuration_name=llama-8b"
        )
        .contains("ServiceUnavailable")
    );
    assert!(
        refused(
            "knative-serving",
            "knative_revision_request_concurrency",
            "kn_configuration_name=llama-8b"
        )
        .contains("ServiceUnavailable")
    );
    assert_eq!(
        read("other", "keda_http_pending_requests", "route_name=llama-8b"),
        "7"
    );
    // The selector cannot name the namespace label to reach another one.
    let err = refused(
        NAMESPACE,
        "keda_http_pending_requests",
        "route_namespace=other",
    );
    assert!(
        err.contains("BadRequest") && err.contains("reserved"),
        "{err}"
    );
}

#[test]
fn a_route_no_holder_has_seen_is_unknown_never_zero() {
    for (metric, selector) in [
        (
            "gateway_flow_control_queue_size",
            "inference_pool=idle-pool",
        ),
        ("keda_http_pending_requests", "route_name=never-called"),
        (
            "knative_activator_request_concurrency",
            "configuration_name=never-called",
        ),
        ("activator_pending_requests", "route=never-called"),
    ] {
        let err = refused(NAMESPACE, metric, selector);
        assert!(
            err.contains("ServiceUnavailable"),
            "{metric}{{{selector}}}: {err}"
        );
    }
}
