//! Installing gpuscale: the Helm chart and the kustomize trees give the same
//! objects, lint and render for default and non-default values, validate
//! against Kubernetes 1.33 and 1.37, and carry the rules and dashboards of
//! alerts/ and dashboards/ unchanged.

use gpuscale_e2e::bins::repo_root;
use gpuscale_e2e::deploy::{
    KUSTOMIZATIONS, assert_same_objects, by_key, chart_as_kustomize, helm_lint, helm_render,
    is_hook, kustomize, kustomize_as_chart, objects, stdout_of, write,
};
use gpuscale_e2e::python::validate_manifests;
use serde_json::{Value, json};

/// What a platform team changes most: registry, Prometheus behind Thanos,
/// no cert-manager, KEDA, NetworkPolicies, another Prometheus release.
fn custom_values() -> Value {
    json!({
        "image": {"repository": "registry.example.com/gpu/gpuscale", "tag": "0.1.0-rc1"},
        "imagePullSecrets": [{"name": "regcred"}],
        "exporter": {
            "runtimeClassName": "",
            "hostProc": false,
            "extraArgs": ["--no-pods"],
            "port": 9500,
            "podMonitor": {"enabled": true},
            "serviceMonitor": {"enabled": false},
        },
        "adapter": {
            "replicas": 3,
            "prometheusUrl": "http://thanos-query.monitoring.svc:9090",
            "metricsConfig": "presets: [gpu_pressure]\nmetrics: []\n",
            "tls": {"certManager": false, "secretName": "adapter-tls", "caBundle": "Q0EgUEVN"},
            "keda": {"enabled": true, "clientCaSecret": "keda-client-ca"},
        },
        "activator": {"enabled": true, "replicas": 3, "extraArgs": ["--queue-length=500"]},
        "monitoringLabels": {"release": "prometheus"},
        "dashboards": {"enabled": false},
        "networkPolicy": {"enabled": true, "apiServerCIDRs": ["10.0.0.0/24"]},
    })
}

/// What `helm install` with the default values creates (the CRD is a
/// template: there is no `crds/`).
fn default_render() -> String {
    helm_render(&json!({}), "gpuscale", "gpuscale").expect("default render")
}

#[test]
fn helm_lint_passes_for_default_and_custom_values() {
    let no_apiservices = json!({"adapter": {"apiServices":
        {"external": false, "customV1beta2": false, "customV1beta1": false}}});
    for values in [json!({}), custom_values(), no_apiservices] {
        let findings = helm_lint(&values);
        assert!(findings.is_empty(), "helm lint {values}: {findings:?}");
    }
}

#[test]
fn chart_and_kustomize_give_the_same_objects_by_default() {
    // The uninstall hook is left out: kustomize has no hooks (docs/install.md,
    // "Uninstall", runs its command by hand).
    let helm = chart_as_kustomize(&default_render());
    let kust = kustomize_as_chart(&kustomize("deploy"));
    assert_same_objects(&helm, &kust, "deploy/helm/gpuscale and deploy/");
    assert!(kust.len() >= 25, "{} objects", kust.len());
}

/// Helm never upgrades `crds/`: the CRD is a template that `helm upgrade`
/// updates and `helm uninstall` keeps; the hook that wakes parked
/// workloads before an uninstall is on by default.
#[test]
fn the_crd_is_kept_on_uninstall_and_parked_workloads_are_woken_first() {
    assert!(
        !repo_root().join("deploy/helm/gpuscale/crds").exists(),
        "a chart's crds/ is never upgraded"
    );
    let all = by_key(objects(&default_render()));
    let crd = &all["CustomResourceDefinition//scaletozeropolicies.gpuscale.dev"];
    assert_eq!(
        crd["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    let job = &all["Job/gpuscale/gpuscale-adapter-wake-parked"];
    assert_eq!(job["metadata"]["annotations"]["helm.sh/hook"], "pre-delete");
    let hooks = all.values().filter(|o| is_hook(o)).count();
    assert_eq!(hooks, 4, "ServiceAccount, ClusterRole, binding, Job");

    let off = json!({"crds": {"install": false}, "adapter": {"wakeParkedOnUninstall": false}});
    let all = by_key(objects(
        &helm_render(&off, "gpuscale", "gpuscale").expect("render"),
    ));
    assert!(
        !all.keys()
            .any(|k| k.starts_with("CustomResourceDefinition/")),
        "crds.install=false: {:?}",
        all.keys()
    );
    assert!(!all.values().any(is_hook), "no hook when switched off");
}

/// A `/scale` kind beyond apps (here an Argo Rollout) is reachable by the
/// controller and by the uninstall hook that wakes what it parked: a hook
/// without it would fail with 403 and block `helm uninstall`.
#[test]
fn target_rules_reach_the_controller_and_the_uninstall_hook() {
    let rule = json!({"apiGroups": ["argoproj.io"], "resources": ["rollouts/scale"], "verbs": ["get", "patch"]});
    let values = json!({"adapter": {"scaleToZero": {"enabled": true, "targetRules": [rule]}}});
    let all = by_key(objects(
        &helm_render(&values, "gpuscale", "gpuscale").expect("render"),
    ));
    for role in [
        "ClusterRole//gpuscale-adapter:scale-to-zero",
        "ClusterRole//gpuscale-adapter-wake-parked",
    ] {
        let rules = all
            .get(role)
            .and_then(|r| r["rules"].as_array())
            .unwrap_or_else(|| panic!("no {role} in {:?}", all.keys()));
        assert!(rules.contains(&rule), "{role}: {rules:?}");
    }
}

#[test]
fn the_activator_is_off_by_default_and_the_chart_matches_its_kustomization() {
    assert!(
        !default_render().contains("gpuscale-activator"),
        "the activator needs routes: off by default"
    );
    let values = json!({"activator": {"enabled": true}});
    let rendered = helm_render(&values, "gpuscale", "gpuscale").expect("render");
    let mut helm = chart_as_kustomize(&rendered);
    helm.retain(|key, _| key.contains("/gpuscale-activator"));
    let kust = kustomize_as_chart(&kustomize("deploy/activator"));
    assert_same_objects(&helm, &kust, "the chart and deploy/activator");
    let deploy = &kust["Deployment/gpuscale/gpuscale-activator"];
    assert_eq!(deploy["spec"]["replicas"], 2);
}

#[test]
fn custom_values_change_what_they_name() {
    let all = by_key(objects(
        &helm_render(&custom_values(), "gpu", "monitoring-gpu").expect("render"),
    ));
    let key = |k: &str| {
        all.get(k)
            .unwrap_or_else(|| panic!("{k} missing: {:?}", all.keys()))
    };
    let ds = key("DaemonSet/monitoring-gpu/gpu-gpuscale-exporter");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example.com/gpu/gpuscale:0.1.0-rc1"
    );
    assert!(pod.get("runtimeClassName").is_none());
    let args = pod["containers"][0]["args"].to_string();
    assert!(args.contains("--no-pods") && args.contains("--listen=0.0.0.0:9500"));
    assert!(!args.contains("--proc-root"), "hostProc off: {args}");
    assert_eq!(pod["imagePullSecrets"][0]["name"], "regcred");

    let deploy = key("Deployment/monitoring-gpu/gpu-gpuscale-adapter");
    assert_eq!(deploy["spec"]["replicas"], 3);
    let adapter = &deploy["spec"]["template"]["spec"];
    let args = adapter["containers"][0]["args"].to_string();
    assert!(
        args.contains("--keda-listen=0.0.0.0:9443")
            && args.contains("--keda-client-ca-file=/etc/gpuscale-adapter/keda-ca/ca.crt"),
        "{args}"
    );
    assert_eq!(adapter["volumes"][0]["secret"]["secretName"], "adapter-tls");
    let cm = key("ConfigMap/monitoring-gpu/gpu-gpuscale-adapter-metrics");
    assert_eq!(
        cm["data"]["prometheus-url"],
        "http://thanos-query.monitoring.svc:9090"
    );
    assert_eq!(
        cm["data"]["metrics.yaml"],
        "presets: [gpu_pressure]\nmetrics: []\n"
    );

    let api = key("APIService//v1beta1.external.metrics.k8s.io");
    assert_eq!(api["spec"]["caBundle"], "Q0EgUEVN");
    assert_eq!(api["spec"]["service"]["namespace"], "monitoring-gpu");
    assert!(api["spec"].get("insecureSkipTLSVerify").is_none());
    assert!(
        !all.keys()
            .any(|k| k.starts_with("Certificate/") || k.starts_with("Issuer/")),
        "no cert-manager objects without cert-manager"
    );
    assert!(
        !all.keys()
            .any(|k| k.starts_with("ServiceMonitor/monitoring-gpu/gpu-gpuscale-exporter"))
    );
    let pm = key("PodMonitor/monitoring-gpu/gpu-gpuscale-exporter");
    assert_eq!(pm["metadata"]["labels"]["release"], "prometheus");
    let rule = key("PrometheusRule/monitoring-gpu/gpu-gpuscale");
    assert_eq!(rule["metadata"]["labels"]["release"], "prometheus");
    assert!(
        !all.keys()
            .any(|k| k.starts_with("ConfigMap/monitoring-gpu/gpu-gpuscale-dashboard"))
    );

    let np = key("NetworkPolicy/monitoring-gpu/gpu-gpuscale-adapter");
    assert_eq!(
        np["spec"]["ingress"][0]["from"][0]["ipBlock"]["cidr"],
        "10.0.0.0/24"
    );
    let np = key("NetworkPolicy/monitoring-gpu/gpu-gpuscale-exporter");
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["port"], 9500);
}

#[test]
fn bad_values_fail_at_install_with_a_clear_message() {
    for (values, needle) in [
        (
            json!({"exporter": {"colectInterval": "5s"}}),
            "additional properties 'colectInterval' not allowed",
        ),
        (
            json!({"adapter": {"prometheusUrl": "prometheus:9090"}}),
            "/adapter/prometheusUrl",
        ),
        (
            json!({"adapter": {"tls": {"certManager": false, "secretName": "t"}}}),
            "/adapter/tls/caBundle",
        ),
        (
            json!({"networkPolicy": {"enabled": true}}),
            "/networkPolicy/apiServerCIDRs",
        ),
        (json!({"adapter": {"replicas": 0}}), "/adapter/replicas"),
    ] {
        let err = helm_render(&values, "gpuscale", "gpuscale").expect_err("rejected");
        assert!(err.contains(needle), "{values}: {err}");
    }
}

#[test]
fn every_manifest_validates_for_kubernetes_1_33_and_1_37() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = vec![
        write(dir.path(), "helm-default.yaml", &default_render()),
        write(
            dir.path(),
            "helm-custom.yaml",
            &helm_render(&custom_values(), "gpu", "monitoring-gpu").expect("render"),
        ),
    ];
    for k in KUSTOMIZATIONS {
        files.push(write(
            dir.path(),
            &format!("{}.yaml", k.replace('/', "_")),
            &kustomize(k),
        ));
    }
    files.push(repo_root().join("deploy/examples/gpu-validation-job.yaml"));
    files.push(repo_root().join("deploy/prometheus/configmap.yaml"));
    if let Err(e) = validate_manifests(&files) {
        panic!("{e}");
    }
}

/// Helm reads only files inside the chart: the rendered chart carries the
/// rules and dashboards of alerts/ and dashboards/ unchanged (that its copies
/// are current is checked by gpuscale-lint's `generated` test).
#[test]
fn the_chart_carries_the_rules_and_dashboards_unchanged() {
    let all = by_key(objects(&default_render()));
    let mut groups = Vec::new();
    let mut rule_files: Vec<_> = std::fs::read_dir(repo_root().join("alerts"))
        .expect("alerts/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".rules.yml"))
        .collect();
    rule_files.sort();
    for p in rule_files {
        let doc: Value =
            yaml_serde::from_str(&std::fs::read_to_string(&p).expect("read")).expect("rules");
        groups.extend(doc["groups"].as_array().expect("groups").iter().cloned());
    }
    assert_eq!(
        all["PrometheusRule/gpuscale/gpuscale"]["spec"]["groups"],
        Value::Array(groups)
    );
    let mut dashboards = 0;
    for entry in std::fs::read_dir(repo_root().join("dashboards")).expect("dashboards/") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        let cm = &all[&format!("ConfigMap/gpuscale/gpuscale-dashboard-{stem}")];
        assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
        assert_eq!(
            cm["data"][&name].as_str(),
            Some(std::fs::read_to_string(&path).expect("read").as_str()),
            "{name}"
        );
        dashboards += 1;
    }
    assert!(dashboards >= 4);
}

/// Without cert-manager: the script's certificate is for the Service name
/// the API server dials and chains to the CA that goes into caBundle; a
/// re-run keeps the CA.
#[test]
fn make_tls_issues_a_serving_certificate_for_the_adapter_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    stdout_of(
        std::process::Command::new(repo_root().join("deploy/overlays/provided-tls/make-tls.sh"))
            .args(["--namespace", "gpu-system", "--out"])
            .arg(dir.path()),
        "openssl",
    );
    let openssl = |args: &[&str]| {
        stdout_of(
            std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir.path()),
            "openssl",
        )
    };
    assert!(openssl(&["verify", "-CAfile", "ca.crt", "tls.crt"]).contains("OK"));
    let san = openssl(&["x509", "-in", "tls.crt", "-noout", "-ext", "subjectAltName"]);
    assert!(san.contains("DNS:gpuscale-adapter.gpu-system.svc"), "{san}");
    // A second run reuses the CA left in the directory.
    let read = |name: &str| std::fs::read(dir.path().join(name)).expect("read");
    let (ca, crt) = (read("ca.crt"), read("tls.crt"));
    stdout_of(
        std::process::Command::new(repo_root().join("deploy/overlays/provided-tls/make-tls.sh"))
            .args(["--namespace", "gpu-system", "--out"])
            .arg(dir.path()),
        "openssl",
    );
    assert_eq!(read("ca.crt"), ca);
    assert_ne!(read("tls.crt"), crt);
    assert!(openssl(&["verify", "-CAfile", "ca.crt", "tls.crt"]).contains("OK"));
}

/// The Alertmanager configuration in docs/alerts.md, with the shipped inhibit
/// rules appended as the doc says, passes `amtool check-config`.
#[test]
fn the_documented_alertmanager_config_checks() {
    let root = gpuscale_e2e::bins::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/alerts.md")).expect("docs/alerts.md");
    let from = doc
        .find("A minimal Alertmanager configuration")
        .expect("the Alertmanager section of docs/alerts.md");
    let block = doc[from..]
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a yaml block in the Alertmanager section");
    let inhibit = std::fs::read_to_string(root.join("alerts/alertmanager-inhibit.yml"))
        .expect("inhibit rules");
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in [
        ("route.yml", block.to_string()),
        ("with-inhibit.yml", format!("{block}{inhibit}")),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write config");
        let out = std::process::Command::new("amtool")
            .arg("check-config")
            .arg(&path)
            .output()
            .expect("run amtool (Debian package prometheus-alertmanager)");
        assert!(
            out.status.success(),
            "amtool check-config {name}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
