//! `gpuscale-adapter doctor` against the simulated cluster: it names who
//! serves each metrics APIService and suggests the chart values for the
//! mode that fits (beside KEDA, alone), changes nothing, and says so
//! clearly, exiting non-zero, when the API does not answer.

use std::process::Command;

use gpuscale_e2e::kubeapi::{Cluster, Gvr, KubeFake, core};
use serde_json::{Value, json};

fn gvr(group: &str, version: &str, resource: &str) -> Gvr {
    (group.into(), version.into(), resource.into())
}

/// A GPU node as the API shows it.
fn gpu_node(kube: &KubeFake) {
    kube.put(
        &core("nodes"),
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"nodeInfo": {"kubeletVersion": "v1.33.2", "osImage": "Ubuntu 24.04",
                "containerRuntimeVersion": "containerd://2.0.0", "kernelVersion": "6.8.0",
                "architecture": "amd64", "operatingSystem": "linux", "machineID": "m",
                "systemUUID": "s", "bootID": "b", "kubeProxyVersion": ""}}}),
    );
}

/// KEDA as its chart installs it: its CRDs, its operator, and the
/// external metrics APIService pointing at its metrics server.
fn install_keda(kube: &KubeFake) {
    for (plural, kind) in [
        ("scaledobjects", "ScaledObject"),
        ("triggerauthentications", "TriggerAuthentication"),
    ] {
        kube.put(
            &gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.keda.sh")},
                "spec": {"group": "keda.sh", "scope": "Namespaced",
                    "names": {"plural": plural, "kind": kind},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true}]}}),
        );
    }
    kube.put(
        &core("namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "keda"}}),
    );
    kube.put(
        &gvr("apps", "v1", "deployments"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "keda-operator", "namespace": "keda",
                "labels": {"app.kubernetes.io/name": "keda-operator"}},
            "spec": {"selector": {"matchLabels": {"app": "keda-operator"}},
                "template": {"metadata": {"labels": {"app": "keda-operator"}},
                    "spec": {"containers": [{"name": "keda-operator", "image": "keda"}]}}}}),
    );
    kube.put(
        &gvr("apiregistration.k8s.io", "v1", "apiservices"),
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.external.metrics.k8s.io",
                "labels": {"app.kubernetes.io/part-of": "keda-operator"}},
            "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100,
                "service": {"namespace": "keda", "name": "keda-operator-metrics-apiserver", "port": 443}}}),
    );
}

/// Runs the doctor with `--output FORMAT`: (succeeded, stdout, stderr).
fn doctor(kube: &KubeFake, format: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("kubeconfig");
    kube.write_kubeconfig(&kc).expect("kubeconfig");
    let out = Command::new(gpuscale_e2e::bins::adapter())
        .arg("doctor")
        .arg(format!("--kubeconfig={}", kc.display()))
        .arg(format!("--output={format}"))
        .output()
        .expect("the adapter runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn report(kube: &KubeFake) -> (bool, Value) {
    let (ok, out, err) = doctor(kube, "json");
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (ok, v)
}

fn owner<'a>(r: &'a Value, api_service: &str) -> &'a Value {
    let all = r["api_services"].as_array().expect("api_services");
    let a = all.iter().find(|a| a["name"] == api_service);
    &a.unwrap_or_else(|| panic!("{api_service} in {r}"))["owner"]
}

fn present<'a>(r: &'a Value, component: &str) -> &'a Value {
    let all = r["components"].as_array().expect("components");
    let c = all.iter().find(|c| c["name"] == component);
    &c.unwrap_or_else(|| panic!("{component} in {r}"))["present"]
}

#[test]
fn beside_keda_names_its_apiservice_and_suggests_the_values_that_leave_it() {
    let kube = KubeFake::start(Cluster::default());
    gpu_node(&kube);
    install_keda(&kube);
    let (ok, r) = report(&kube);
    assert!(
        !ok,
        "KEDA's APIService conflicts with a default install: {r}"
    );
    assert_eq!(owner(&r, "v1beta1.external.metrics.k8s.io"), "keda", "{r}");
    assert_eq!(owner(&r, "v1beta1.custom.metrics.k8s.io"), "none", "{r}");
    assert_eq!(present(&r, "KEDA"), true, "{r}");
    assert_eq!(present(&r, "prometheus-adapter"), false, "{r}");
    assert_eq!(r["mode"], "beside KEDA");
    let values = &r["values"];
    assert_eq!(values["adapter.apiServices.external"], false, "{r}");
    assert_eq!(values["adapter.apiServices.customV1beta2"], true, "{r}");
    assert_eq!(values["adapter.apiServices.customV1beta1"], true, "{r}");
    assert_eq!(values["adapter.keda.enabled"], true, "{r}");
    let conflicts = r["conflicts"].to_string();
    assert!(
        conflicts.contains("keda/keda-operator-metrics-apiserver"),
        "{r}"
    );
    assert_eq!(r["failed_reads"], json!([]), "{r}");

    let (ok, text, _) = doctor(&kube, "text");
    assert!(!ok);
    for line in [
        "v1beta1.external.metrics.k8s.io: KEDA (Service keda/keda-operator-metrics-apiserver)",
        "Mode: beside KEDA",
        "--set adapter.apiServices.external=false",
        "--set adapter.keda.enabled=true",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    // The doctor only reads.
    let writes: Vec<String> = kube
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}

#[test]
fn an_empty_cluster_installs_alone() {
    let kube = KubeFake::start(Cluster::default());
    gpu_node(&kube);
    let (ok, r) = report(&kube);
    assert!(ok, "{r}");
    assert_eq!(r["mode"], "alone");
    for name in [
        "v1beta1.external.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
        "v1beta1.custom.metrics.k8s.io",
    ] {
        assert_eq!(owner(&r, name), "none", "{r}");
    }
    assert_eq!(r["values"]["adapter.apiServices.external"], true, "{r}");
    assert_eq!(present(&r, "KEDA"), false, "{r}");
    assert_eq!(r["kubelet"]["verdict"], "ok", "{r}");
    assert_eq!(r["conflicts"], json!([]), "{r}");
}

#[test]
fn an_api_that_does_not_answer_is_a_failed_read_never_absent() {
    let kube = KubeFake::start(Cluster::default());
    kube.set_down(true);
    let (ok, r) = report(&kube);
    assert!(!ok, "{r}");
    assert_eq!(owner(&r, "v1beta1.external.metrics.k8s.io"), &Value::Null);
    assert_eq!(present(&r, "KEDA"), &Value::Null, "not known, not absent");
    assert!(
        r["values"].get("adapter.apiServices.external").is_none(),
        "{r}"
    );
    let failed = r["failed_reads"].as_array().expect("failed_reads");
    assert_eq!(failed.len(), 5, "{r}");
    assert!(
        failed[0]
            .as_str()
            .is_some_and(|f| f.starts_with("reading APIServices: ")),
        "{r}"
    );

    let (ok, text, err) = doctor(&kube, "text");
    assert!(!ok);
    assert!(
        text.contains("NOT KNOWN (could not read the APIServices)"),
        "{text}"
    );
    assert!(
        err.contains("doctor: ") && err.contains("5 failed read(s)"),
        "{err}"
    );
}
