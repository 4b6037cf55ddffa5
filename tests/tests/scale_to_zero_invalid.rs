//! A policy the controller cannot read is reported, never silently
//! dropped: a Warning Event `InvalidPolicy` naming the field and the error,
//! `gpuscale_scale_to_zero_invalid_policies`, and every other policy
//! served as before. (Written straight into the simulated cluster, as a
//! CRD older than the controller or validation turned off lets through.)

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::procs::eventually;
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
