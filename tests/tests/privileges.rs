//! What the install grants and opens, on the rendered objects (Helm's own
//! engine and `kubectl kustomize`): the adapter's RBAC is the table of
//! docs/security.md and the scale-to-zero part exists only with the
//! controller on; KEDA's listener asks for client certificates unless
//! opened explicitly; the GKE and OpenShift overlays; the chart values for
//! mounts, environment and web-config TLS. Every rendering validates for
//! Kubernetes 1.33 and 1.37.

use std::collections::BTreeSet;

use gpuscale_e2e::bins::repo_root;
use gpuscale_e2e::deploy::{
    helm_render, kustomize, kustomize_with, objects, whole_numbers, without_helm_bookkeeping, write,
};
use gpuscale_e2e::python::validate_manifests;
use serde_json::{Value, json};

/// (role, API group, resource, verb).
type Grant = (String, String, String, String);

const SA: &str = "gpuscale-adapter";

fn render(values: &Value) -> Vec<Value> {
    objects(&helm_render(values, "gpuscale", "gpuscale").expect("render"))
}

fn scale_to_zero_on() -> Value {
    json!({"adapter": {"scaleToZero": {"enabled": true}}})
}

/// Roles and ClusterRoles bound to the adapter's own service account,
/// expanded into one grant per (group, resource, verb).
fn adapter_grants(objs: &[Value]) -> BTreeSet<Grant> {
    let bound: BTreeSet<String> = objs
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
        .filter(|o| {
            o["subjects"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["name"] == SA))
        })
        .filter_map(|o| o["roleRef"]["name"].as_str().map(str::to_owned))
        .collect();
    let mut grants = BTreeSet::new();
    for role in objs
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
    {
        let name = role["metadata"]["name"].as_str().unwrap_or("?");
        if !bound.contains(name) {
            continue;
        }
        for rule in role["rules"].as_array().into_iter().flatten() {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            for g in list("apiGroups") {
                for r in list("resources") {
                    for v in list("verbs") {
                        grants.insert((name.into(), g.clone(), r.clone(), v));
                    }
                }
            }
        }
    }
    grants
}

/// The backticked words of a table cell.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The rows of the tables of docs/security.md whose header starts with
/// `| role | API group | resources |`: the adapter's calls, or (`names`)
/// those of its self-managed certificate, which name their objects.
fn documented_grants(names: bool) -> BTreeSet<Grant> {
    let doc = std::fs::read_to_string(repo_root().join("docs/security.md")).expect("security.md");
    let mut grants = BTreeSet::new();
    for table in doc.split("\n| role | API group | resources |").skip(1) {
        let header: Vec<&str> = table
            .lines()
            .next()
            .unwrap_or("")
            .split('|')
            .map(str::trim)
            .collect();
        if header.contains(&"names") != names {
            continue;
        }
        let verbs = 4 + header
            .iter()
            .position(|h| *h == "verbs")
            .expect("a verbs column");
        for line in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let role = ticked(cells[1]).into_iter().next().expect("a role");
            let group = if cells[2] == "core" {
                String::new()
            } else {
                ticked(cells[2]).concat()
            };
            for r in ticked(cells[3]) {
                for v in ticked(cells[verbs]) {
                    grants.insert((role.clone(), group.clone(), r.clone(), v));
                }
            }
        }
    }
    assert!(
        !grants.is_empty(),
        "no such table in docs/security.md (names: {names})"
    );
    grants
}

/// `deploy` with the scale-to-zero component, as a user's overlay adds it.
fn deploy_with_scale_to_zero() -> Vec<Value> {
    objects(&kustomize_with(
        "deploy",
        &["deploy/components/scale-to-zero"],
    ))
}

#[test]
fn the_adapters_rbac_is_the_table_in_docs_security() {
    let documented = documented_grants(false);
    let on = adapter_grants(&render(&scale_to_zero_on()));
    assert_eq!(
        on, documented,
        "the chart's adapter RBAC vs docs/security.md"
    );
    let kust = adapter_grants(&deploy_with_scale_to_zero());
    assert_eq!(kust, documented, "deploy/ + the scale-to-zero component");

    // Off (the default): no controller, none of its grants.
    let off = adapter_grants(&render(&json!({})));
    let controller = |g: &Grant| g.0.ends_with(":scale-to-zero") || g.0.ends_with(":leader-lease");
    let want: BTreeSet<Grant> = documented
        .iter()
        .filter(|g| !controller(g))
        .cloned()
        .collect();
    assert_eq!(off, want, "the default chart");
    assert!(
        !off.iter()
            .any(|g| g.3 != "list" && g.3 != "get" && g.3 != "watch"),
        "no write by default: {off:?}"
    );
    assert_eq!(
        adapter_grants(&objects(&kustomize("deploy"))),
        want,
        "deploy/"
    );
    let args = |objs: &[Value]| {
        objs.iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == SA)
            .map(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].to_string())
            .expect("the adapter's Deployment")
    };
    assert!(args(&render(&scale_to_zero_on())).contains("\"--scale-to-zero\""));
    assert!(!args(&render(&json!({}))).contains("--scale-to-zero"));

    // Its own serving certificate (no cert-manager, no Secret) adds the
    // rows of the second table.
    let mut self_tls = scale_to_zero_on();
    self_tls["adapter"]["tls"] = json!({"certManager": false});
    let mut want = documented.clone();
    want.extend(documented_grants(true));
    assert_eq!(
        adapter_grants(&render(&self_tls)),
        want,
        "with the self-managed certificate"
    );

    let err = helm_render(
        &json!({"adapter": {"extraArgs": ["--scale-to-zero"]}}),
        "gpuscale",
        "gpuscale",
    )
    .expect_err("the flag without its RBAC");
    assert!(err.contains("adapter.scaleToZero.enabled"), "{err}");
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind}/{name} missing"))
}

#[test]
fn the_keda_listener_asks_for_client_certificates_unless_opened() {
    let net = json!({"enabled": true, "apiServerCIDRs": ["10.0.0.0/24"]});
    let objs = render(&json!({"adapter": {"keda": {"enabled": true}}, "networkPolicy": net}));
    let cert = find(&objs, "Certificate", "gpuscale-keda-client");
    assert_eq!(
        cert["spec"]["usages"],
        json!(["digital signature", "client auth"])
    );
    assert_eq!(cert["spec"]["issuerRef"]["name"], "gpuscale-ca");
    let pod = &find(&objs, "Deployment", SA)["spec"]["template"]["spec"];
    let args = pod["containers"][0]["args"].to_string();
    assert!(
        args.contains("--keda-client-ca-file=/etc/gpuscale-adapter/keda-ca/ca.crt"),
        "{args}"
    );
    let vol = pod["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "keda-ca"))
        .expect("keda-ca volume");
    assert_eq!(vol["secret"]["secretName"], "gpuscale-keda-client");
    assert_eq!(
        vol["secret"]["items"],
        json!([{"key": "ca.crt", "path": "ca.crt"}])
    );
    let np = find(&objs, "NetworkPolicy", SA);
    let keda = np["spec"]["ingress"]
        .as_array()
        .and_then(|i| i.iter().find(|r| r["ports"][0]["port"] == 9443))
        .expect("the KEDA rule");
    assert_eq!(
        keda["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "keda"
    );
    assert_eq!(
        keda["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "keda-operator"
    );

    // Without cert-manager: a CA Secret, or the explicit opening.
    let tls = json!({"certManager": false, "secretName": "t", "caBundle": "Q0E="});
    let err = helm_render(
        &json!({"adapter": {"keda": {"enabled": true}, "tls": tls}}),
        "gpuscale",
        "gpuscale",
    )
    .expect_err("an open listener needs saying so");
    assert!(err.contains("adapter.keda.allowAnyClient"), "{err}");
    let objs = render(&json!({"adapter": {"keda": {"enabled": true, "allowAnyClient": true}}}));
    let args = find(&objs, "Deployment", SA)["spec"]["template"]["spec"]["containers"][0]["args"]
        .to_string();
    assert!(
        args.contains("--keda-allow-any-client") && !args.contains("--keda-client-ca-file"),
        "{args}"
    );
    assert!(
        !objs
            .iter()
            .any(|o| o["kind"] == "Certificate" && o["metadata"]["name"] == "gpuscale-keda-client")
    );

    // The example authenticates with the chart's Secret: CA, cert and key.
    let example =
        std::fs::read_to_string(repo_root().join("deploy/examples/vllm-keda-external-push.yaml"))
            .expect("example");
    let auth = objects(&example)
        .into_iter()
        .find(|o| o["kind"] == "TriggerAuthentication")
        .expect("a TriggerAuthentication");
    let refs: BTreeSet<(String, String)> = auth["spec"]["secretTargetRef"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (r["parameter"].to_string(), r["name"].to_string()))
        .collect();
    let want: BTreeSet<(String, String)> = ["caCert", "tlsClientCert", "tlsClientKey"]
        .iter()
        .map(|p| (format!("\"{p}\""), "\"gpuscale-keda-client\"".to_owned()))
        .collect();
    assert_eq!(refs, want);
}

#[test]
fn platform_overlays_admit_the_pods() {
    let gke = objects(&kustomize("deploy/overlays/gke"));
    let ds = find(&gke, "DaemonSet", "gpuscale-exporter");
    let class = &ds["spec"]["template"]["spec"]["priorityClassName"];
    let quota = find(&gke, "ResourceQuota", "gpuscale-exporter-critical-pods");
    assert_eq!(quota["metadata"]["namespace"], ds["metadata"]["namespace"]);
    let expr = &quota["spec"]["scopeSelector"]["matchExpressions"][0];
    assert_eq!(expr["scopeName"], "PriorityClass");
    assert!(expr["values"].as_array().is_some_and(|v| v.contains(class)));
    let chart = render(&json!({"exporter": {"criticalPodsQuota": true}}));
    let from_chart = find(&chart, "ResourceQuota", "gpuscale-exporter-critical-pods");
    assert_eq!(
        whole_numbers(without_helm_bookkeeping(from_chart.clone())),
        whole_numbers(without_helm_bookkeeping(quota.clone())),
        "the chart's quota and the overlay's"
    );
    assert!(
        !render(&json!({}))
            .iter()
            .any(|o| o["kind"] == "ResourceQuota")
    );

    let os = objects(&kustomize("deploy/overlays/openshift"));
    let ctx = &find(&os, "Deployment", SA)["spec"]["template"]["spec"]["securityContext"];
    assert!(
        ctx.get("runAsUser").is_none() && ctx.get("runAsGroup").is_none(),
        "{ctx}"
    );
    assert_eq!(ctx["runAsNonRoot"], true);

    let ns = find(
        &objects(&kustomize("deploy/exporter")),
        "Namespace",
        "gpuscale",
    )
    .clone();
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged",
        "the exporter's hostPath volumes need it"
    );
}

#[test]
fn chart_values_reach_the_pods() {
    let extra = json!({
        "extraEnv": [{"name": "TOKEN_FILE", "value": "/etc/token/token"}],
        "extraVolumes": [{"name": "token", "secret": {"secretName": "prom-token"}}],
        "extraVolumeMounts": [{"name": "token", "mountPath": "/etc/token", "readOnly": true}],
    });
    let mut exporter = extra.clone();
    exporter["webConfig"] = json!({"secretName": "exporter-web"});
    let objs = render(&json!({"exporter": exporter, "adapter": extra}));
    for (kind, name) in [("DaemonSet", "gpuscale-exporter"), ("Deployment", SA)] {
        let pod = &find(&objs, kind, name)["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        let has = |k: &str, want: &Value| c[k].as_array().is_some_and(|a| a.contains(want));
        assert!(has("env", &extra["extraEnv"][0]), "{name}: {}", c["env"]);
        assert!(
            has("volumeMounts", &extra["extraVolumeMounts"][0]),
            "{name}"
        );
        assert!(
            pod["volumes"]
                .as_array()
                .is_some_and(|v| v.contains(&extra["extraVolumes"][0]))
        );
        let ns = json!({"name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}});
        assert!(
            has("env", &ns),
            "{name}: POD_NAMESPACE from the downward API"
        );
    }
    let c =
        &find(&objs, "DaemonSet", "gpuscale-exporter")["spec"]["template"]["spec"]["containers"][0];
    assert!(c["args"].to_string().contains("--web-config-file="));
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
    let plain = render(&json!({}));
    let c = &find(&plain, "DaemonSet", "gpuscale-exporter")["spec"]["template"]["spec"]["containers"]
        [0];
    assert!(c["readinessProbe"]["httpGet"].get("scheme").is_none());

    // No image is published: the default names none, and a render
    // without one fails with a message (not pods in ImagePullBackOff).
    let values = std::fs::read_to_string(repo_root().join("deploy/helm/gpuscale/values.yaml"))
        .expect("values.yaml");
    let defaults: Value = yaml_serde::from_str(&values).expect("values YAML");
    assert_eq!(defaults["image"]["repository"], "");
    let err = helm_render(
        &json!({"image": {"repository": ""}}),
        "gpuscale",
        "gpuscale",
    )
    .expect_err("no image");
    assert!(
        err.contains("image.repository: no image is published"),
        "{err}"
    );

    // The values' example flag is one the exporter takes.
    let example = values
        .lines()
        .find_map(|l| l.split("e.g. [\"").nth(1))
        .and_then(|l| l.split('"').next())
        .expect("the exporter's extraArgs example");
    let out = std::process::Command::new(gpuscale_e2e::bins::exporter())
        .args([example, "--help"])
        .output()
        .expect("run the exporter");
    assert!(
        out.status.success(),
        "{example}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_rendering_here_validates_for_kubernetes_1_33_and_1_37() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all_on = json!({
        "adapter": {"scaleToZero": {"enabled": true}, "keda": {"enabled": true},
            "extraVolumes": [{"name": "t", "secret": {"secretName": "t"}}],
            "extraVolumeMounts": [{"name": "t", "mountPath": "/t"}]},
        "exporter": {"criticalPodsQuota": true, "webConfig": {"secretName": "w"}},
        "networkPolicy": {"enabled": true, "apiServerCIDRs": ["10.0.0.0/24"]},
    });
    let rendered = helm_render(&all_on, "gpuscale", "gpuscale").expect("render");
    let files = [
        write(dir.path(), "helm-all-on.yaml", &rendered),
        write(
            dir.path(),
            "deploy-scale-to-zero.yaml",
            &kustomize_with("deploy", &["deploy/components/scale-to-zero"]),
        ),
    ];
    if let Err(e) = validate_manifests(&files) {
        panic!("{e}");
    }
}

/// The adapter refuses an open KEDA listener unless told, and says so
/// loudly when told (checked before it reads or connects anything).
#[test]
fn the_adapter_refuses_an_open_keda_listener_unless_told() {
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(gpuscale_e2e::bins::adapter())
            .args([
                "--tls-cert-file=/nonexistent/tls.crt",
                "--tls-key-file=/nonexistent/tls.key",
                "--keda-listen=127.0.0.1:1",
                "--config=/nonexistent/metrics.yaml",
            ])
            .args(extra)
            .output()
            .expect("run the adapter");
        assert!(!out.status.success(), "{extra:?}: no config file, no start");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    };
    let refused = run(&[]);
    assert!(
        refused.contains("--keda-listen needs --keda-client-ca-file")
            && !refused.contains("/nonexistent/metrics.yaml"),
        "refused first: {refused}"
    );
    let opened = run(&["--keda-allow-any-client"]);
    assert!(
        opened.contains("WARN")
            && opened.contains("reads every namespace's metrics")
            && opened.contains("/nonexistent/metrics.yaml"),
        "warned, then on to the config: {opened}"
    );
}
