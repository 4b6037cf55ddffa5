//! Scale-to-zero's safe defaults: a target KEDA also scales is left to
//! KEDA (reported, never parked: no park/wake loop), and a parked target
//! whose activation stays unknown past `activation.unknownAfter` is woken
//! (fail-open) unless its policy says `StayParked`. The real adapter and
//! Prometheus against the in-memory Kubernetes API.

use std::time::{Duration, Instant};

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::kubeapi::KubeFake;
use serde_json::{Value, json};

/// Idle windows (`idle.for`) of the stories' policies.
const WINDOW: Duration = Duration::from_secs(2);

fn short(name: &str, target: &str, extra: Value) -> Value {
    let mut p = policy(name, "Deployment", target, "other-gw", extra);
    p["spec"]["idle"]["for"] = json!("2s");
    p
}

fn scaled_objects() -> gpuscale_e2e::kubeapi::Gvr {
    gvr("keda.sh", "v1alpha1", "scaledobjects")
}

/// KEDA's CRD, as far as discovery needs it.
fn keda_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "scaledobjects.keda.sh"},
        "spec": {"group": "keda.sh", "scope": "Namespaced",
            "names": {"plural": "scaledobjects", "kind": "ScaledObject", "singular": "scaledobject"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true}]}})
}

fn policy_events(kube: &KubeFake, reason: &str) -> Vec<String> {
    events(kube)
        .into_iter()
        .filter(|(r, _)| r == reason)
        .map(|(_, n)| n)
        .collect()
}

/// `keda` is idle and a ScaledObject names it; `free` beside it is idle
/// too. `free` parks; `keda` is reported (`OwnerConflict`, a Warning Event
/// naming the ScaledObject, the conflicts metric) and never scaled over
/// five idle windows.
#[test]
fn a_target_keda_scales_is_reported_and_never_parked() {
    let (_series, port) = Series::serve(&exposition(Load::default()));
    let prom = Prometheus::start(port);
    let kube = fake();
    kube.put(
        &gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        keda_crd(),
    );
    kube.put(
        &scaled_objects(),
        json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "keda-chat", "namespace": NS},
            "spec": {"scaleTargetRef": {"name": "keda"}, "minReplicaCount": 1}}),
    );
    for name in ["keda", "free"] {
        kube.put(&deployments(), deployment(name, 2, 2));
        kube.put(&policies(), short(name, name, json!({})));
    }
    let dir = dir();
    let started = Instant::now();
    let adapter = controller(
        &kube,
        &prom.url,
        "a",
        &dir,
        &["--scale-to-zero-resync-interval=1s"],
    );
    eventually("free parked", || {
        (replicas(&kube, "free") == 0).then_some(())
    });
    eventually("five idle windows with keda reported", || {
        let reported = reason(&kube, "keda") == "OwnerConflict";
        (reported && started.elapsed() > 5 * WINDOW).then_some(())
    });
    let on_keda = kube.scale_patches_of("keda");
    assert!(on_keda.is_empty(), "keda scaled: {on_keda:?}");
    assert_eq!(replicas(&kube, "keda"), 2);
    assert_eq!(status(&kube, "keda")["parked"], Value::Null);
    let notes = policy_events(&kube, "OwnerConflict");
    assert!(
        notes.iter().any(|n| n.contains("ScaledObject keda-chat")),
        "{:?}",
        events(&kube)
    );
    let conditions = status(&kube, "keda")["conditions"].clone();
    let has =
        |type_: &str, status: &str| {
            conditions.as_array().into_iter().flatten().any(|c| {
                c["type"] == type_ && c["status"] == status && c["reason"] == "OwnerConflict"
            })
        };
    assert!(
        has("Ready", "False") && has("OwnerConflict", "True"),
        "{conditions}"
    );
    let metric = r#"gpuscale_scale_to_zero_conflicts{namespace="inference",policy="keda",owner_kind="ScaledObject"} 1"#;
    eventually("the conflicts metric", || {
        adapter
            .self_metrics()
            .lines()
            .any(|l| l == metric)
            .then_some(())
    });
}

/// A target parked by an earlier round, as its status records it.
fn parked_policy(name: &str, extra: Value) -> Value {
    let mut p = short(name, name, extra);
    p["status"] = json!({"phase": "Parked", "parked": {
        "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "replicas": 2, "at": "2026-12-01T10:00:00Z"}});
    p
}

/// Prometheus is unreachable from the start, so every activation read is
/// unknown. `open` (`unknownAfter: 3s`, default `Wake`) is woken to
/// `wake.replicas` with reason `ActivationUnknownTooLong`; `closed`
/// (`StayParked`) stays at 0; both show since when activation is unknown
/// in their status and the self-metric.
#[test]
fn activation_unknown_past_unknown_after_wakes_unless_told_to_stay() {
    let kube = fake();
    let dead = format!("http://127.0.0.1:{}", gpuscale_e2e::free_port());
    let after = |when: &str| {
        json!({"activation": {"metric": "gateway_pending",
        "labelSelector": "service=other-gw", "unknownAfter": "3s", "whenUnknown": when}})
    };
    kube.put(&deployments(), deployment("open", 0, 0));
    kube.put(&deployments(), deployment("closed", 0, 0));
    kube.put(&policies(), parked_policy("open", after("Wake")));
    kube.put(&policies(), parked_policy("closed", after("StayParked")));
    let dir = dir();
    let adapter = controller(
        &kube,
        &dead,
        "a",
        &dir,
        &["--scale-to-zero-resync-interval=1s"],
    );
    eventually("open woken after unknownAfter", || {
        (replicas(&kube, "open") == 1).then_some(())
    });
    // The status and the Event follow the scale.
    eventually("open says why it was woken", || {
        (reason(&kube, "open") == "ActivationUnknownTooLong").then_some(())
    });
    eventually("a fail-open Woken Event", || {
        policy_events(&kube, "Woken")
            .iter()
            .any(|n| n.contains("fail-open"))
            .then_some(())
    });
    eventually("closed says it stays parked", || {
        let s = status(&kube, "closed");
        let says = s["message"].as_str().unwrap_or("").contains("StayParked");
        (says && s["activationUnknownSince"].is_string()).then_some(())
    });
    assert_eq!(replicas(&kube, "closed"), 0);
    let patched = kube.scale_patches_of("closed");
    assert!(patched.is_empty(), "{patched:?}");
    eventually("the unknown-since metric", || {
        sample(
            &adapter,
            "gpuscale_scale_to_zero_activation_unknown_since_seconds",
            "closed",
        )
    });
}
