//! A policy the controller cannot read is reported, never silently
//! dropped: a Warning Event `InvalidPolicy` naming the field and the error,
//! `gpuscale_scale_to_zero_invalid_policies`, and every other policy
//! served as before. (Written straight into the simulated cluster, as a
//! CRD older than the controller or validation turned off lets through.)

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::kubeapi::KubeFake;
use serde_json::json;

fn invalid_gauge(adapter: &gpuscale_e2e::adapter::client::Adapter) -> Option<String> {
    adapter.self_metrics().lines().find_map(|l| {
        l.strip_prefix("gpuscale_scale_to_zero_invalid_policies ")
            .map(str::to_string)
    })
}

#[test]
fn an_undecodable_policy_gets_a_warning_naming_the_field_and_the_others_are_served() {
    let kube = fake();
    kube.put(&deployments(), deployment("chat", 2, 2));
    kube.put(&deployments(), deployment("sleepy", 1, 1));
    kube.put(
        &policies(),
        policy("chat", "Deployment", "chat", "chat-gw", json!({})),
    );
    let bad = policy(
        "sleepy",
        "Deployment",
        "sleepy",
        "cold-gw",
        json!({"activation": {"metric": "gateway_pending", "threshold": 0, "whenUnknown": "Sleep"}}),
    );
    kube.put(&policies(), bad);
    // No Prometheus: the readable policy reads unknown and says so.
    let dead = format!("http://127.0.0.1:{}", gpuscale_e2e::free_port());
    let dir = dir();
    let adapter = controller(&kube, &dead, "a", &dir, &[]);

    let note = eventually("an InvalidPolicy Warning Event", || {
        events(&kube)
            .into_iter()
            .find(|(reason, _)| reason == "InvalidPolicy")
            .map(|(_, note)| note)
    });
    assert!(
        note.contains("spec.activation.whenUnknown") && note.contains("Sleep"),
        "the Event names the field and the value: {note}"
    );
    let warning = kube
        .list(&gvr("events.k8s.io", "v1", "events"), NS)
        .into_iter()
        .find(|e| e["reason"] == "InvalidPolicy")
        .expect("the Event");
    assert_eq!(warning["type"], "Warning");
    assert_eq!(warning["regarding"]["name"], "sleepy");
    assert_eq!(warning["regarding"]["kind"], "ScaleToZeroPolicy");
    // `kubectl describe` shows it, as it shows a real server's Events.
    let described = kubectl(
        &kube,
        &dir,
        &["describe", "scaletozeropolicy", "sleepy", "-n", NS],
    );
    assert!(
        described.contains("Warning") && described.contains("InvalidPolicy"),
        "{described}"
    );
    eventually("the invalid-policies gauge at 1", || {
        (invalid_gauge(&adapter).as_deref() == Some("1")).then_some(())
    });
    eventually("the readable policy served", || {
        (reason(&kube, "chat") == "ReadUnknown").then_some(())
    });
    assert_eq!(
        status(&kube, "sleepy"),
        serde_json::Value::Null,
        "not acted on"
    );
    assert_eq!(replicas(&kube, "sleepy"), 1);
    let log = std::fs::read_to_string(dir.join("adapter-a.log")).unwrap_or_default();
    assert!(
        log.contains("ScaleToZeroPolicy cannot be read") && log.contains("sleepy"),
        "a log line names it:\n{log}"
    );

    // Fixed: read, acted on, no longer counted.
    kube.put(
        &policies(),
        policy("sleepy", "Deployment", "sleepy", "cold-gw", json!({})),
    );
    eventually("the gauge back at 0", || {
        (invalid_gauge(&adapter).as_deref() == Some("0")).then_some(())
    });
    eventually("the fixed policy served", || {
        (reason(&kube, "sleepy") == "ReadUnknown").then_some(())
    });
}

/// `kubectl ARGS` against `kube`, expected to fail: its stderr.
fn kubectl_refused(
    kube: &gpuscale_e2e::kubeapi::KubeFake,
    dir: &std::path::Path,
    args: &[&str],
) -> String {
    let kc = dir.join("kubeconfig-refused");
    std::fs::write(&kc, kube.kubeconfig()).expect("kubeconfig");
    let out = std::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kc.display()))
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(!out.status.success(), "kubectl {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The simulated cluster checks a policy against the shipped CRD's schema
/// as kube-apiserver does: a misspelt field is refused naming it
/// (`fieldValidation=Strict`, kubectl's default), a value of no known kind
/// is 422 naming the field and the values allowed, and without strict
/// validation the unknown field is pruned, so a misspelt required field is
/// still refused as missing.
#[test]
fn the_simulated_cluster_refuses_a_policy_its_crd_does_not_allow() {
    let dir = dir();
    let kube = fake();
    let shipped = gpuscale_e2e::bins::repo_root().join("deploy/adapter/scaletozeropolicy-crd.yaml");
    kubectl(
        &kube,
        &dir,
        &["apply", "-f", &shipped.display().to_string()],
    );
    let file = |name: &str, p: &serde_json::Value| {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, p.to_string()).expect("policy file");
        path.display().to_string()
    };

    let mut misspelt = policy("typo", "Deployment", "chat", "chat-gw", json!({}));
    let idle = misspelt["spec"]["idle"].take();
    misspelt["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("idle");
    misspelt["spec"]["idel"] = idle;
    let typo = file("typo", &misspelt);
    let err = kubectl_refused(&kube, &dir, &["apply", "-f", &typo]);
    assert!(
        err.contains("BadRequest") && err.contains(r#"unknown field "spec.idel""#),
        "{err}"
    );
    let err = kubectl_refused(&kube, &dir, &["apply", "--validate=false", "-f", &typo]);
    assert!(
        err.contains(r#"The ScaleToZeroPolicy "typo" is invalid: spec.idle: Required value"#),
        "{err}"
    );
    assert!(
        kube.get(&policies(), NS, "typo").is_none(),
        "nothing stored"
    );

    let sleep = policy(
        "sleep",
        "Deployment",
        "chat",
        "chat-gw",
        json!({"activation": {"metric": "gateway_pending", "threshold": 0, "whenUnknown": "Sleep"}}),
    );
    let err = kubectl_refused(&kube, &dir, &["apply", "-f", &file("sleep", &sleep)]);
    assert!(
        err.contains("spec.activation.whenUnknown")
            && err.contains(r#"Unsupported value: "Sleep""#)
            && err.contains(r#""Wake""#),
        "{err}"
    );
    let negative = policy(
        "negative",
        "Deployment",
        "chat",
        "chat-gw",
        json!({"wake": {"replicas": -1}}),
    );
    let err = kubectl_refused(&kube, &dir, &["apply", "-f", &file("negative", &negative)]);
    assert!(
        err.contains("spec.wake.replicas") && err.contains("greater than or equal to"),
        "{err}"
    );

    // Without strict validation an unknown field is pruned, as a real
    // server prunes it; the rest is stored.
    let mut extra = policy("extra", "Deployment", "chat", "chat-gw", json!({}));
    extra["spec"]["colour"] = json!("blue");
    kubectl(
        &kube,
        &dir,
        &["apply", "--validate=false", "-f", &file("extra", &extra)],
    );
    let stored = kube.get(&policies(), NS, "extra").expect("stored");
    assert!(stored["spec"].get("colour").is_none(), "pruned: {stored}");
    assert_eq!(stored["spec"]["idle"]["metric"], "queue_depth");

    wake_parked_names_what_validation_let_through(&kube, &dir, sleep);
}

/// What validation let through earlier (written straight into the store)
/// does not stop `wake-parked`: the readable policies are released, the
/// unreadable one is named as a failure.
fn wake_parked_names_what_validation_let_through(
    kube: &KubeFake,
    dir: &std::path::Path,
    sleep: serde_json::Value,
) {
    kube.put(&policies(), sleep);
    let kc = dir.join("kubeconfig-wake");
    std::fs::write(&kc, kube.kubeconfig()).expect("kubeconfig");
    let out = std::process::Command::new(gpuscale_e2e::bins::adapter())
        .arg("wake-parked")
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("run wake-parked");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("FAILED policy inference/sleep: cannot be read (spec.activation.whenUnknown"),
        "{said}"
    );
}
