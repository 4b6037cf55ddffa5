//! Real `kubectl` against the simulated cluster's Kubernetes API over TLS,
//! with the kubeconfig it writes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use gpuscale_sim::kubeapi::{Cluster, KubeFake};

struct Kubectl {
    fake: KubeFake,
    dir: tempfile::TempDir,
    config: PathBuf,
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

impl Kubectl {
    fn new() -> Self {
        let fake = KubeFake::start_bare(Cluster::default()).expect("start");
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("kubeconfig");
        fake.write_kubeconfig(&config).expect("write kubeconfig");
        Self { fake, dir, config }
    }

    /// `kubectl` on this cluster, output piped (a later `--request-timeout`
    /// in `args` wins over the default).
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.config)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .arg("--request-timeout=10s")
            .args(args)
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.command(args);
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().expect("run kubectl");
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            std::io::Write::write_all(&mut pipe, text.as_bytes()).expect("stdin");
        }
        child.wait_with_output().expect("kubectl output")
    }

    /// Runs and expects success; stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.ok_in(args, None)
    }

    fn ok_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "kubectl {args:?} failed:\n{e}\n{o}");
        o.into_owned()
    }

    /// Runs and expects failure; stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args, None);
        assert!(!out.status.success(), "kubectl {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// The namespace the examples live in.
const INFERENCE: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: inference}\n";

const POLICY: &str = "apiVersion: gpuscale.dev/v1alpha1
kind: ScaleToZeroPolicy
metadata: {name: chat, namespace: inference}
spec:
  target: {apiVersion: apps/v1, kind: Deployment, name: chat}
  idle: {metric: vllm_queue_depth, labelSelector: workload=chat, threshold: 0, for: 15m}
  activation: {metric: gateway_pending, labelSelector: service=chat-gateway, threshold: 0}
";

fn path(p: &str) -> String {
    repo(p).to_string_lossy().into_owned()
}

/// A cluster with namespace `inference` and the vLLM example applied.
fn with_example() -> Kubectl {
    let k = Kubectl::new();
    let ns = k.ok_in(&["create", "-f", "-"], Some(INFERENCE));
    assert!(ns.contains("namespace/inference created"), "{ns}");
    let out = k.ok(&["apply", "-f", &path("deploy/examples/vllm.yaml")]);
    assert!(out.contains("deployment.apps/chat created"), "{out}");
    assert!(out.contains("service/chat created"), "{out}");
    k
}

fn json(k: &Kubectl, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).expect("kubectl -o json")
}

#[test]
fn lists_applies_examples_and_custom_resources_once_their_crd_exists() {
    let k = Kubectl::new();
    let empty = k.run(&["get", "pods,deploy", "-A"], None);
    assert!(empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("No resources found"));
    let k = with_example();
    let again = k.ok(&["apply", "-f", &path("deploy/examples/vllm.yaml")]);
    assert!(again.contains("deployment.apps/chat unchanged"), "{again}");
    let listed = k.ok(&["get", "pods,deploy", "-A"]);
    assert!(listed.contains("chat"), "{listed}");
    let refused = k.run(&["apply", "-f", "-"], Some(POLICY));
    assert!(!refused.status.success(), "a policy before its CRD");
    let crd = k.ok(&[
        "apply",
        "-f",
        &path("deploy/adapter/scaletozeropolicy-crd.yaml"),
    ]);
    assert!(
        crd.contains(
            "customresourcedefinition.apiextensions.k8s.io/scaletozeropolicies.gpuscale.dev created"
        ),
        "{crd}"
    );
    let created = k.ok_in(&["apply", "-f", "-"], Some(POLICY));
    assert!(
        created.contains("scaletozeropolicy.gpuscale.dev/chat created"),
        "{created}"
    );
    let table = k.ok(&["get", "stz", "-n", "inference"]);
    assert!(
        table.starts_with("NAME   TARGET"),
        "the CRD's printer columns: {table}"
    );
    assert!(table.contains("chat   chat"), "{table}");
    let all = k.ok(&["get", "pods,deploy,scaletozeropolicies", "-A"]);
    assert!(all.contains("scaletozeropolicy.gpuscale.dev/chat"), "{all}");
    let short = k.ok(&["get", "stz", "-n", "inference", "-o", "name"]);
    assert_eq!(short.trim(), "scaletozeropolicy.gpuscale.dev/chat");
    k.ok(&["delete", "crd", "scaletozeropolicies.gpuscale.dev"]);
    assert!(
        k.fake.list(&policies(), "inference").is_empty(),
        "CRs go with their CRD"
    );
}

fn policies() -> (String, String, String) {
    (
        "gpuscale.dev".into(),
        "v1alpha1".into(),
        "scaletozeropolicies".into(),
    )
}

#[test]
fn server_side_apply_creates_and_updates_with_its_field_manager() {
    let k = Kubectl::new();
    k.ok_in(&["create", "-f", "-"], Some(INFERENCE));
    let out = k.ok(&[
        "apply",
        "--server-side",
        "-f",
        &path("deploy/examples/vllm.yaml"),
    ]);
    assert!(
        out.contains("deployment.apps/chat serverside-applied"),
        "{out}"
    );
    let yaml = std::fs::read_to_string(repo("deploy/examples/vllm.yaml")).expect("example");
    let changed = yaml.replacen("spec:\n  selector:", "spec:\n  replicas: 3\n  selector:", 1);
    assert_ne!(
        changed, yaml,
        "the example's Deployment spec starts with its selector"
    );
    let out = k.ok_in(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&changed),
    );
    assert!(
        out.contains("deployment.apps/chat serverside-applied"),
        "{out}"
    );
    let d = json(
        &k,
        &[
            "get",
            "deploy",
            "chat",
            "-n",
            "inference",
            "--show-managed-fields",
        ],
    );
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["generation"], 2);
    assert_eq!(d["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["name"],
        "vllm"
    );
}

#[test]
fn patches_merge_strategic_and_json() {
    let k = with_example();
    let d = ["deploy", "chat", "-n", "inference"];
    let run = |kind: &str, body: &str| {
        let mut args = vec!["patch"];
        args.extend(d);
        args.extend(["--type", kind, "-p", body]);
        k.ok(&args)
    };
    run("merge", r#"{"metadata":{"labels":{"tier":"gpu"}}}"#);
    run(
        "strategic",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"vllm","env":[{"name":"HF_HOME","value":"/cache"}]}]}}}}"#,
    );
    run(
        "json",
        r#"[{"op":"replace","path":"/spec/replicas","value":2}]"#,
    );
    let got = json(&k, &["get", "deploy", "chat", "-n", "inference"]);
    assert_eq!(got["metadata"]["labels"]["tier"], "gpu");
    let c = &got["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["image"], "vllm/vllm-openai:v0.11.0",
        "the strategic patch merged by name"
    );
    assert_eq!(c["env"][0]["value"], "/cache");
    assert_eq!(got["spec"]["replicas"], 2);
    assert_eq!(got["metadata"]["generation"], 3, "labels are not spec");
    k.ok(&["label", "deploy", "chat", "-n", "inference", "team=ml"]);
    k.ok(&["annotate", "deploy", "chat", "-n", "inference", "note=x"]);
    let got = json(&k, &["get", "deploy", "chat", "-n", "inference"]);
    assert_eq!(
        (
            got["metadata"]["labels"]["team"].as_str(),
            got["metadata"]["annotations"]["note"].as_str()
        ),
        (Some("ml"), Some("x"))
    );
    k.ok(&[
        "apply",
        "-f",
        &path("deploy/adapter/scaletozeropolicy-crd.yaml"),
    ]);
    k.ok_in(&["apply", "-f", "-"], Some(POLICY));
    let refused = k.fails(&[
        "patch",
        "stz",
        "chat",
        "-n",
        "inference",
        "--type",
        "strategic",
        "-p",
        "{}",
    ]);
    assert!(
        refused.contains("UnsupportedMediaType") || refused.contains("unknown format"),
        "{refused}"
    );
}

#[test]
fn scale_writes_the_scale_subresource_of_deployments_and_custom_resources() {
    let k = with_example();
    let out = k.ok(&["scale", "deploy/chat", "-n", "inference", "--replicas=2"]);
    assert!(out.contains("deployment.apps/chat scaled"), "{out}");
    let raw = k.ok(&[
        "get",
        "--raw",
        "/apis/apps/v1/namespaces/inference/deployments/chat/scale",
    ]);
    let scale: serde_json::Value = serde_json::from_str(&raw).expect("Scale");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app.kubernetes.io/name=chat");
    assert_eq!(k.fake.scale_patches().last().map(|p| p.replicas), Some(2));
    k.ok_in(&["apply", "-f", "-"], Some(SCALED_CRD));
    k.ok_in(&["apply", "-f", "-"], Some("apiVersion: example.dev/v1\nkind: Pool\nmetadata: {name: p, namespace: inference}\nspec: {size: 1, selector: \"app=pool\"}\n"));
    k.ok(&["scale", "pools/p", "-n", "inference", "--replicas=4"]);
    let pool = json(&k, &["get", "pool", "p", "-n", "inference"]);
    assert_eq!(pool["spec"]["size"], 4);
    let raw = k.ok(&[
        "get",
        "--raw",
        "/apis/example.dev/v1/namespaces/inference/pools/p/scale",
    ]);
    let scale: serde_json::Value = serde_json::from_str(&raw).expect("Scale");
    assert_eq!(
        (
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["selector"].as_str()
        ),
        (Some(4), Some("app=pool"))
    );
}

/// A custom kind with a scale subresource on non-default paths.
const SCALED_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pools.example.dev}
spec:
  group: example.dev
  scope: Namespaced
  names: {plural: pools, singular: pool, kind: Pool}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.size, labelSelectorPath: .spec.selector}
";

#[test]
fn delete_with_a_finalizer_marks_until_the_finalizer_is_removed() {
    let k = Kubectl::new();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: default, finalizers: [example.dev/hold]}\ndata: {a: b}\n";
    k.ok_in(&["create", "-f", "-"], Some(cm));
    k.ok(&["delete", "configmap", "held", "--wait=false"]);
    let held = json(&k, &["get", "configmap", "held"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    k.ok(&[
        "patch",
        "configmap",
        "held",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let gone = k.fails(&["get", "configmap", "held"]);
    assert!(
        gone.contains(r#"Error from server (NotFound): configmaps "held" not found"#),
        "{gone}"
    );
}

#[test]
fn typed_create_generators_work_for_the_kinds_sent_as_protobuf() {
    let k = Kubectl::new();
    k.ok(&["create", "namespace", "gen"]);
    k.ok(&[
        "create",
        "configmap",
        "c",
        "-n",
        "gen",
        "--from-literal=a=b",
    ]);
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "-n",
        "gen",
        "--from-literal=k=v",
    ]);
    k.ok(&["create", "serviceaccount", "sa", "-n", "gen"]);
    let cm = json(&k, &["get", "configmap", "c", "-n", "gen"]);
    assert_eq!(cm["data"]["a"], "b");
    let secret = json(&k, &["get", "secret", "s", "-n", "gen"]);
    assert_eq!(secret["data"]["k"], "dg==", "base64 of v");
    k.ok(&[
        "create",
        "deployment",
        "d",
        "-n",
        "gen",
        "--image=vllm/vllm-openai:v0.11.0",
        "--replicas=2",
        "--port=8000",
        "--",
        "vllm",
        "serve",
    ]);
    let d = json(&k, &["get", "deployment", "d", "-n", "gen"]);
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "d", "{d}");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "vllm/vllm-openai:v0.11.0", "{d}");
    assert_eq!(c["ports"][0]["containerPort"], 8000, "{d}");
    assert_eq!(c["command"], serde_json::json!(["vllm", "serve"]), "{d}");
    assert_eq!(
        d["spec"]["template"]["metadata"]["labels"]["app"], "d",
        "{d}"
    );
    // A kind whose protobuf the cluster does not read is refused, naming
    // the way that works.
    let refused = k.fails(&["create", "job", "j", "-n", "gen", "--image=busybox"]);
    assert!(
        refused.contains("unsupported media type") && refused.contains("kubectl apply"),
        "{refused}"
    );
}

#[test]
fn not_found_and_already_exists_read_as_kubectl_prints_them() {
    let k = Kubectl::new();
    let err = k.fails(&["get", "deploy", "nope"]);
    assert!(
        err.contains(r#"Error from server (NotFound): deployments.apps "nope" not found"#),
        "{err}"
    );
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice, namespace: default}\n";
    k.ok_in(&["create", "-f", "-"], Some(cm));
    let err = String::from_utf8_lossy(&k.run(&["create", "-f", "-"], Some(cm)).stderr).into_owned();
    assert!(err.contains("Error from server (AlreadyExists)"), "{err}");
    assert!(
        err.contains(r#"configmaps "twice" already exists"#),
        "{err}"
    );
}

#[test]
fn get_watch_streams_changes_until_its_timeout() {
    let k = Kubectl::new();
    let child = k
        .command(&["get", "pods", "-w", "--request-timeout=3s"])
        .spawn()
        .expect("kubectl get -w");
    // The watch is open once kubectl's list has been served.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while k.fake.list_watch_counts().1 == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0", "namespace": "default"}});
    k.fake.put(&gpuscale_sim::kubeapi::core("pods"), pod);
    let out = child.wait_with_output().expect("kubectl output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("NAME") && text.contains("w-0"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (manifest, how kubectl names it) for every kind the server serves.
const KINDS: &[(&str, &str)] = &[
    (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: t-ns}\n",
        "namespaces/t-ns",
    ),
    (
        "apiVersion: v1\nkind: Node\nmetadata: {name: t-node}\n",
        "nodes/t-node",
    ),
    (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: t-pod, namespace: default}\nspec: {containers: [{name: c, image: busybox}]}\n",
        "pods/t-pod",
    ),
    (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: t-dep, namespace: default}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: busybox}]}}}\n",
        "deployments.v1.apps/t-dep",
    ),
    (
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: t-sts, namespace: default}\nspec: {serviceName: s, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: busybox}]}}}\n",
        "statefulsets.v1.apps/t-sts",
    ),
    (
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: t-rs, namespace: default}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: busybox}]}}}\n",
        "replicasets.v1.apps/t-rs",
    ),
    (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: t-hpa, namespace: default}\nspec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: t-dep}, maxReplicas: 3}\n",
        "horizontalpodautoscalers.v2.autoscaling/t-hpa",
    ),
    (
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: t-lease, namespace: default}\nspec: {holderIdentity: me}\n",
        "leases.v1.coordination.k8s.io/t-lease",
    ),
    (
        "apiVersion: v1\nkind: Event\nmetadata: {name: t-ev, namespace: default}\ninvolvedObject: {kind: Pod, name: t-pod, namespace: default}\nreason: Started\nmessage: hi\n",
        "events.v1./t-ev",
    ),
    (
        "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {name: t-ev2, namespace: default}\nregarding: {kind: Pod, name: t-pod, namespace: default}\nreason: Started\nnote: hi\naction: Start\nreportingController: x\nreportingInstance: y\neventTime: \"2026-01-01T00:00:00.000000Z\"\ntype: Normal\n",
        "events.v1.events.k8s.io/t-ev2",
    ),
    (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t-cm, namespace: default}\ndata: {a: b}\n",
        "configmaps/t-cm",
    ),
    (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: t-secret, namespace: default}\nstringData: {a: b}\n",
        "secrets/t-secret",
    ),
    (
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1beta1.t.example.com}\nspec: {group: t.example.com, version: v1beta1, service: {namespace: default, name: t}, groupPriorityMinimum: 100, versionPriority: 100}\n",
        "apiservices.v1.apiregistration.k8s.io/v1beta1.t.example.com",
    ),
    (
        "apiVersion: v1\nkind: Service\nmetadata: {name: t-svc, namespace: default}\nspec: {ports: [{port: 80}]}\n",
        "services/t-svc",
    ),
    (
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: t-eps, namespace: default}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]\n",
        "endpointslices.v1.discovery.k8s.io/t-eps",
    ),
    (
        SCALED_CRD,
        "customresourcedefinitions.v1.apiextensions.k8s.io/pools.example.dev",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: t-claim, namespace: default}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}\n",
        "resourceclaims.v1.resource.k8s.io/t-claim",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: t-slice}\nspec: {driver: gpu.nvidia.com, nodeName: t-node, pool: {name: p, generation: 1, resourceSliceCount: 1}, devices: []}\n",
        "resourceslices.v1.resource.k8s.io/t-slice",
    ),
];

#[test]
fn every_kind_is_created_read_patched_and_deleted() {
    let k = Kubectl::new();
    for (manifest, name) in KINDS {
        let ns = ["-n", "default"];
        let created = k.ok_in(&["create", "-f", "-"], Some(manifest));
        assert!(created.contains("created"), "{name}: {created}");
        let got = json(&k, &["get", name, ns[0], ns[1]]);
        assert!(got["metadata"]["uid"].is_string(), "{name}: {got}");
        let patched = k.ok(&[
            "patch",
            name,
            ns[0],
            ns[1],
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"labels":{"patched":"yes"}}}"#,
        ]);
        assert!(patched.contains("patched"), "{name}: {patched}");
        let labels = k.ok(&[
            "get",
            name,
            ns[0],
            ns[1],
            "-o",
            "jsonpath={.metadata.labels.patched}",
        ]);
        assert_eq!(labels, "yes", "{name}");
        let deleted = k.ok(&["delete", name, ns[0], ns[1], "--wait=false"]);
        assert!(deleted.contains("deleted"), "{name}: {deleted}");
        let gone = k.fails(&["get", name, ns[0], ns[1]]);
        assert!(gone.contains("(NotFound)"), "{name}: {gone}");
    }
}

#[test]
fn token_and_access_reviews_are_answered() {
    let k = Kubectl::new();
    let review = "apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec: {token: nope}\n";
    let out = k.ok_in(&["create", "-f", "-", "-o", "json"], Some(review));
    let v: serde_json::Value = serde_json::from_str(&out).expect("TokenReview");
    assert_eq!(v["status"]["authenticated"], false);
    let sar = "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec: {user: u, resourceAttributes: {verb: get, resource: pods}}\n";
    let out = k.ok_in(&["create", "-f", "-", "-o", "json"], Some(sar));
    let v: serde_json::Value = serde_json::from_str(&out).expect("SubjectAccessReview");
    assert_eq!(v["status"]["allowed"], true);
}

/// A policy with the CRD applied, in namespace `inference`.
fn with_policy() -> Kubectl {
    let k = with_example();
    k.ok(&[
        "apply",
        "-f",
        &path("deploy/adapter/scaletozeropolicy-crd.yaml"),
    ]);
    k.ok_in(&["apply", "-f", "-"], Some(POLICY));
    k
}

#[test]
fn printer_columns_above_priority_zero_show_only_with_wide() {
    let k = with_policy();
    let plain = k.ok(&["get", "stz", "-n", "inference"]);
    let wide = k.ok(&["get", "stz", "-n", "inference", "-o", "wide"]);
    let header = |t: &str| t.lines().next().unwrap_or("").split_whitespace().count();
    assert!(
        header(&plain) < header(&wide),
        "priority-1 columns are only in -o wide:\n{plain}\n{wide}"
    );
    assert_eq!(header(&plain), 5, "{plain}");
}

#[test]
fn describe_shows_the_events_written_through_events_k8s_io() {
    let k = with_policy();
    let uid = json(&k, &["get", "stz", "chat", "-n", "inference"])["metadata"]["uid"].clone();
    let event = format!(
        "apiVersion: events.k8s.io/v1
kind: Event
metadata: {{name: chat.parked, namespace: inference}}
eventTime: 2026-12-02T10:00:00.000000Z
reportingController: gpuscale.dev/scale-to-zero
reportingInstance: gpuscale-adapter-0
action: Park
reason: Parked
type: Normal
note: idle for 15m, scaled to 0
regarding: {{apiVersion: gpuscale.dev/v1alpha1, kind: ScaleToZeroPolicy, name: chat, namespace: inference, uid: {uid}}}
"
    );
    k.ok_in(&["create", "-f", "-"], Some(&event));
    let core = k.ok(&["get", "events", "-n", "inference"]);
    assert!(core.contains("Parked"), "the core view lists it: {core}");
    let described = k.ok(&["describe", "stz", "chat", "-n", "inference"]);
    let events = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("an Events section: {described}"));
    assert!(
        events.contains("Parked") && events.contains("idle for 15m, scaled to 0"),
        "{described}"
    );
}

/// The CRD's CEL rules (`x-kubernetes-validations`) are not evaluated:
/// kubectl says so on every write of a policy, naming each rule, and with
/// `--validate=warn` it prints the unknown fields the server pruned.
#[test]
fn writes_of_a_resource_with_cel_rules_warn_that_they_were_not_evaluated() {
    let k = with_example();
    k.ok(&[
        "apply",
        "-f",
        &path("deploy/adapter/scaletozeropolicy-crd.yaml"),
    ]);
    for args in [
        &["apply", "-f", "-"][..],
        &["apply", "--server-side", "-f", "-"][..],
    ] {
        let out = k.run(args, Some(POLICY));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubectl {args:?}: {err}");
        let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("Warning: ")).collect();
        for rule in [
            "spec.activation (x-kubernetes-validations): has(self.metric) != has(self.query)",
            "spec.idle (x-kubernetes-validations): has(self.metric) != has(self.query)",
            "spec.target (x-kubernetes-validations): self == oldSelf",
        ] {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains("did not evaluate the CEL rule of") && w.ends_with(rule)),
                "kubectl {args:?}: no warning naming {rule}:\n{err}"
            );
        }
    }
    let misspelt = POLICY
        .replace("spec:\n", "spec:\n  minUpDuraton: 30m\n")
        .replace("chat, namespace", "chat2, namespace");
    let out = k.run(&["create", "--validate=warn", "-f", "-"], Some(&misspelt));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Warning: unknown field \"spec.minUpDuraton\""),
        "--validate=warn prints the pruned field:\n{err}"
    );
}
