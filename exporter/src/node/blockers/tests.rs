use serde_json::{Value, json};

use super::*;

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).expect("pod")
}

fn pdb(v: Value) -> PodDisruptionBudget {
    serde_json::from_value(v).expect("pdb")
}

fn owned(kind: &str) -> Value {
    json!([{ "apiVersion": "apps/v1", "kind": kind, "name": "x", "uid": "u", "controller": true }])
}

fn kinds(found: &[Blocker]) -> Vec<(&str, &str, &str)> {
    found
        .iter()
        .map(|b| (b.kind, b.pod.as_str(), b.detail.as_str()))
        .collect()
}

#[test]
fn each_pod_gets_the_autoscalers_reasons() {
    let pods = [
        pod(
            json!({ "metadata": { "name": "ds", "namespace": "a", "ownerReferences": owned("DaemonSet") } }),
        ),
        pod(
            json!({ "metadata": { "name": "web", "namespace": "a", "ownerReferences": owned("ReplicaSet"), "labels": { "app": "web" } } }),
        ),
        pod(json!({ "metadata": { "name": "naked", "namespace": "a" } })),
        pod(
            json!({ "metadata": { "name": "cache", "namespace": "a", "ownerReferences": owned("ReplicaSet") },
            "spec": { "containers": [], "volumes": [
                { "name": "scratch", "emptyDir": {} },
                { "name": "shm", "emptyDir": { "medium": "Memory" } },
                { "name": "host", "hostPath": { "path": "/var/x" } } ] } }),
        ),
        pod(
            json!({ "metadata": { "name": "pinned", "namespace": "a", "ownerReferences": owned("ReplicaSet"),
            "annotations": { SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true" } } }),
        ),
        pod(
            json!({ "metadata": { "name": "dns", "namespace": "kube-system", "ownerReferences": owned("ReplicaSet") } }),
        ),
        pod(
            json!({ "metadata": { "name": "done", "namespace": "a" }, "status": { "phase": "Succeeded" } }),
        ),
        pod(
            json!({ "metadata": { "name": "static", "namespace": "a", "annotations": { "kubernetes.io/config.mirror": "x" } } }),
        ),
    ];
    let pdbs = [pdb(
        json!({ "metadata": { "name": "web-pdb", "namespace": "a" },
        "spec": { "maxUnavailable": 0, "selector": { "matchLabels": { "app": "web" } } } }),
    )];
    let found = find(&BTreeMap::new(), &pods, &pdbs);
    assert_eq!(
        kinds(&found),
        [
            ("do_not_disrupt", "pinned", ""),
            ("kube_system_no_pdb", "dns", ""),
            ("local_storage", "cache", "host"),
            ("local_storage", "cache", "scratch"),
            ("no_controller", "naked", ""),
            ("pdb", "web", "web-pdb"),
            ("safe_to_evict_false", "pinned", ""),
        ]
    );
}

#[test]
fn safe_to_evict_true_lifts_what_only_the_cluster_autoscaler_refuses() {
    let pods = [pod(
        json!({ "metadata": { "name": "naked", "namespace": "kube-system",
        "annotations": { SAFE_TO_EVICT: "true" } },
        "spec": { "containers": [], "volumes": [{ "name": "scratch", "emptyDir": {} }] } }),
    )];
    assert!(find(&BTreeMap::new(), &pods, &[]).is_empty());
    let listed = [pod(
        json!({ "metadata": { "name": "c", "namespace": "a", "ownerReferences": owned("ReplicaSet"),
        "annotations": { SAFE_LOCAL_VOLUMES: "scratch" } },
        "spec": { "containers": [], "volumes": [{ "name": "scratch", "emptyDir": {} }] } }),
    )];
    assert!(find(&BTreeMap::new(), &listed, &[]).is_empty());
}

#[test]
fn the_node_s_own_annotations_block_it() {
    let ann = BTreeMap::from([
        (DO_NOT_DISRUPT.to_owned(), "true".to_owned()),
        (SCALE_DOWN_DISABLED.to_owned(), "true".to_owned()),
    ]);
    let found = find(&ann, &[], &[]);
    assert_eq!(
        kinds(&found),
        [
            ("node_do_not_disrupt", "", ""),
            ("node_scale_down_disabled", "", "")
        ]
    );
}

#[test]
fn a_pdb_blocks_by_its_status_once_computed_else_by_its_spec() {
    let spec_only =
        |spec: Value| pdb(json!({ "metadata": { "name": "p", "generation": 1 }, "spec": spec }));
    assert!(allows_none(&spec_only(json!({ "maxUnavailable": 0 }))));
    assert!(allows_none(&spec_only(json!({ "maxUnavailable": "0%" }))));
    assert!(allows_none(&spec_only(json!({ "minAvailable": "100%" }))));
    assert!(!allows_none(&spec_only(json!({ "maxUnavailable": 1 }))));
    assert!(!allows_none(&spec_only(json!({ "minAvailable": 1 }))));
    let with_status = |allowed: i32, observed: i64| {
        pdb(
            json!({ "metadata": { "name": "p", "generation": 2 }, "spec": { "minAvailable": 1 },
            "status": { "observedGeneration": observed, "disruptionsAllowed": allowed,
                "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1 } }),
        )
    };
    assert!(allows_none(&with_status(0, 2)));
    assert!(!allows_none(&with_status(1, 2)));
    assert!(
        !allows_none(&with_status(0, 1)),
        "a status of an older generation is not read"
    );
}

#[test]
fn selectors_match_as_policy_v1_says() {
    let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let sel = |v: Value| -> LabelSelector { serde_json::from_value(v).expect("selector") };
    assert!(
        selects(&sel(json!({})), &labels),
        "an empty selector matches every pod"
    );
    assert!(selects(
        &sel(
            json!({ "matchExpressions": [{ "key": "app", "operator": "In", "values": ["web"] }] })
        ),
        &labels
    ));
    assert!(!selects(
        &sel(json!({ "matchExpressions": [{ "key": "app", "operator": "DoesNotExist" }] })),
        &labels
    ));
    let p =
        pod(json!({ "metadata": { "name": "w", "namespace": "a", "labels": { "app": "web" } } }));
    let other_ns =
        pdb(json!({ "metadata": { "name": "p", "namespace": "b" }, "spec": { "selector": {} } }));
    assert!(!covers(&other_ns, &p));
    let no_selector = pdb(json!({ "metadata": { "name": "p", "namespace": "a" }, "spec": {} }));
    assert!(!covers(&no_selector, &p));
}
