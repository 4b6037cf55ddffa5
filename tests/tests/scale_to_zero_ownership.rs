//! Scale-to-zero owns what it touches: deleting a policy wakes what it
//! parked (its finalizer), a second policy on a target is a `Conflict`, a
//! target an operator scaled to 0 is not woken, a changed `spec.target`
//! is refused and the first target woken. The real adapter, `kubectl` and
//! Prometheus against the in-memory Kubernetes API.

use std::process::Command;

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::kubeapi::KubeFake;
use serde_json::{Value, json};

const FINALIZER: &str = "gpuscale.dev/scale-to-zero";

/// A policy on Deployment `target` that parks after 2 s idle and wakes on
/// `gateway`'s pending requests, created at `created` (RFC 3339).
fn owned(name: &str, target: &str, gateway: &str, created: &str, extra: Value) -> Value {
    let mut p = policy(name, "Deployment", target, gateway, extra);
    p["metadata"]["creationTimestamp"] = json!(created);
    p["spec"]["idle"]["for"] = json!("2s");
    p
}

fn finalizers(kube: &KubeFake, name: &str) -> Value {
    kube.get(&policies(), NS, name)
        .map(|p| p["metadata"]["finalizers"].clone())
        .unwrap_or(Value::Null)
}

/// The cluster: `del` parks and is then deleted; `first` and `second` on
/// one target; `manual` at 0 by hand with activation; `moved` parked
/// `old` and now names `new`.
fn cluster() -> KubeFake {
    let kube = KubeFake::start(gpuscale_e2e::kubeapi::Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: std::sync::Arc::new(|_: &Value| (true, String::new())),
    });
    for (name, n) in [
        ("del", 3),
        ("shared", 2),
        ("manual", 0),
        ("old", 0),
        ("new", 1),
    ] {
        kube.put(&deployments(), deployment(name, n, n));
    }
    // Parked by an earlier controller; its policy was deleted meanwhile.
    let mut orphan = deployment("orphan", 0, 0);
    orphan["metadata"]["annotations"] = json!({"gpuscale.dev/parked-replicas": "2"});
    kube.put(&deployments(), orphan);
    let t0 = "2026-12-01T10:00:00Z";
    let t1 = "2026-12-01T11:00:00Z";
    for p in [
        owned("del", "del", "other-gw", t0, json!({})),
        owned("second", "shared", "other-gw", t1, json!({})),
        owned("first", "shared", "other-gw", t0, json!({})),
        owned("manual", "manual", "chat-gw", t0, json!({})),
    ] {
        kube.put(&policies(), p);
    }
    let mut moved = owned("moved", "new", "other-gw", t0, json!({}));
    moved["status"] = json!({"phase": "Parked", "parked": {
        "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "old"},
        "replicas": 2, "at": t0}});
    kube.put(&policies(), moved);
    kube
}

#[test]
fn owns_what_it_parks_and_nothing_else() {
    let load = Load {
        chat_pending: 1,
        ..Load::default()
    };
    let (_series, port) = Series::serve(&exposition(load));
    let prom = Prometheus::start(port);
    let kube = cluster();
    let dir = dir();
    let adapter = controller(&kube, &prom.url, "a", &dir, &[]);
    an_orphan_is_woken_at_start(&kube);
    one_owner_per_target(&kube);
    a_manual_zero_is_not_woken(&kube);
    a_changed_target_is_refused(&kube);
    deleting_a_parked_policy_wakes_its_target(&kube, &dir);
    drop(adapter);
    the_uninstall_command_wakes_everything(&kube, &dir);
}

/// `orphan` carries the parked annotation and no policy targets it: woken
/// to the annotated count when the controller starts, with an Event.
fn an_orphan_is_woken_at_start(kube: &KubeFake) {
    eventually("orphan woken", || {
        (replicas(kube, "orphan") == 2).then_some(())
    });
    eventually("an OrphanWoken Event", || {
        events(kube)
            .iter()
            .any(|(r, _)| r == "OrphanWoken")
            .then_some(())
    });
}

/// The controller is gone (an uninstall): `wake-parked` wakes what
/// `first` parked, removes every finalizer, and says so.
fn the_uninstall_command_wakes_everything(kube: &KubeFake, dir: &std::path::Path) {
    assert_eq!(replicas(kube, "shared"), 0, "still parked by first");
    let kc = dir.join("kubeconfig-uninstall");
    std::fs::write(&kc, kube.kubeconfig()).expect("kubeconfig");
    let out = Command::new(gpuscale_e2e::bins::adapter())
        .arg("wake-parked")
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("the adapter runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("Deployment shared woken to 2"), "{said}");
    assert_eq!(replicas(kube, "shared"), 2);
    for p in kube.list(&policies(), NS) {
        let left = p["metadata"]["finalizers"].as_array().cloned();
        assert!(left.unwrap_or_default().is_empty(), "{p}");
    }
}

/// `second` is younger: `Conflict`, an Event naming `first`; only `first`
/// parks `shared`.
fn one_owner_per_target(kube: &KubeFake) {
    eventually("second in Conflict", || {
        (reason(kube, "second") == "Conflict").then_some(())
    });
    let conditions = status(kube, "second")["conditions"].clone();
    assert!(
        conditions
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Conflict" && c["status"] == "True"),
        "{conditions}"
    );
    assert!(
        events(kube)
            .iter()
            .any(|(r, n)| r == "Conflict" && n.contains("first")),
        "{:?}",
        events(kube)
    );
    eventually("first parks shared", || {
        (replicas(kube, "shared") == 0).then_some(())
    });
    // The status is written after the scale: its record follows.
    eventually("first records the park", || {
        (status(kube, "first")["parked"]["replicas"] == 2).then_some(())
    });
    assert_eq!(status(kube, "second")["parked"], Value::Null);
    let on_shared = kube.scale_patches_of("shared");
    assert_eq!(on_shared.len(), 1, "{on_shared:?}");
}

/// `manual` sits at 0 with its activation active, but nobody recorded a
/// park: left at 0, and the status says why.
fn a_manual_zero_is_not_woken(kube: &KubeFake) {
    eventually("manual refused", || {
        (reason(kube, "manual") == "ManualZero").then_some(())
    });
    assert_eq!(replicas(kube, "manual"), 0);
}

/// `moved` recorded a park of `old` and now names `new`: `old` is woken to
/// its recorded count, `new` is left alone, and the status says why.
fn a_changed_target_is_refused(kube: &KubeFake) {
    eventually("moved refused", || {
        (reason(kube, "moved") == "TargetChanged").then_some(())
    });
    assert_eq!(replicas(kube, "old"), 2);
    assert_eq!(replicas(kube, "new"), 1);
}

/// `del` parks from 3; `kubectl delete` → woken to 3, a `Released` Event,
/// the finalizer gone and with it the policy.
fn deleting_a_parked_policy_wakes_its_target(kube: &KubeFake, dir: &std::path::Path) {
    eventually("del parked", || (replicas(kube, "del") == 0).then_some(()));
    eventually("del's park recorded", || {
        (status(kube, "del")["parked"]["replicas"] == 3).then_some(())
    });
    assert_eq!(finalizers(kube, "del"), json!([FINALIZER]));
    kubectl(
        kube,
        dir,
        &[
            "-n",
            NS,
            "delete",
            "scaletozeropolicy",
            "del",
            "--wait=false",
        ],
    );
    eventually("del woken to its recorded count", || {
        (replicas(kube, "del") == 3).then_some(())
    });
    eventually("del gone", || {
        kube.get(&policies(), NS, "del").is_none().then_some(())
    });
    assert!(
        events(kube)
            .iter()
            .any(|(r, n)| r == "Released" && n.contains("woken to 3")),
        "{:?}",
        events(kube)
    );
}
