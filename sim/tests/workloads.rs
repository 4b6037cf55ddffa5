//! Workloads that run: a Deployment scaled through the API (real kubectl)
//! gets pods that hold the node's GPUs on the kubelet's pod-resources socket
//! (read with a gRPC client) and in `/proc`, turn Ready after the cold
//! start, and give their GPUs back when scaled to zero.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_nvml_sim::scenario;
use gpuscale_sim::node::SimNode;
use gpuscale_sim::node::proto::ListPodResourcesRequest;
use gpuscale_sim::node::proto::pod_resources_lister_client::PodResourcesListerClient;
use gpuscale_sim::node::workloads::Workloads;
use serde_json::{Value, json};

const SCENARIO: &str = r#"
node: sim-a
cold_start_seconds: 0.5
gpus:
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-aaaaaaaa-0000-4000-8000-000000000000, pci_bus_id: "00000000:18:00.0", memory_mib: 81559 }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-bbbbbbbb-0000-4000-8000-000000000000, pci_bus_id: "00000000:19:00.0", memory_mib: 81559 }
"#;

fn deployment(replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "default", "generation": 1},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "llm"}},
            "template": {"metadata": {"labels": {"app": "llm"}},
                "spec": {"containers": [{"name": "vllm",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
}

fn apps(plural: &str) -> (String, String, String) {
    ("apps".into(), "v1".into(), plural.into())
}

/// Polls `f` until it answers, for at most 10 s.
fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// (pod name, GPU ids) the kubelet lists.
fn listed(rt: &tokio::runtime::Runtime, socket: PathBuf) -> Vec<(String, Vec<String>)> {
    rt.block_on(async move {
        let channel = tonic::transport::Endpoint::from_static("http://kubelet")
            .connect_with_connector(tower::service_fn(move |_| {
                let socket = socket.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(socket).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            }))
            .await
            .expect("connect to the kubelet socket");
        let list = PodResourcesListerClient::new(channel)
            .list(ListPodResourcesRequest {})
            .await
            .expect("List")
            .into_inner();
        list.pod_resources
            .into_iter()
            .map(|p| {
                let ids = p
                    .containers
                    .iter()
                    .flat_map(|c| &c.devices)
                    .flat_map(|d| d.device_ids.clone())
                    .collect();
                (p.name, ids)
            })
            .collect()
    })
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn scaling_a_deployment_runs_pods_on_the_node_s_gpus() {
    let scenario = scenario::parse(SCENARIO, "test").unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let node = Arc::new(SimNode::start(&scenario, rt.handle()).expect("simulated node"));
    let _workloads = Workloads::start(node.clone(), Duration::from_secs_f64(0.5));
    let tmp = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tmp.path().join("kubeconfig");
    node.api()
        .write_kubeconfig(&kubeconfig)
        .expect("write kubeconfig");
    node.api().put(&apps("deployments"), deployment(0));
    assert_eq!(node.free_devices("nvidia.com/gpu").len(), 2);

    kubectl(&kubeconfig, &["scale", "deployment/llm", "--replicas=2"]);
    let pods = until("two pods", || {
        let pods = node.api().list(&gvr_pods(), "default");
        (pods.len() == 2).then_some(pods)
    });
    for p in &pods {
        assert_eq!(p["metadata"]["labels"]["app"], "llm");
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "ReplicaSet");
        assert!(
            owner["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("llm-"))
        );
    }
    their_replicaset_owns(&node, &pods[0]);
    // Not Ready until the cold start has passed, the GPUs held already.
    assert!(pods.iter().all(|p| !ready(p)), "{pods:?}");
    let held = listed(&rt, node.socket());
    assert_eq!(held.len(), 2, "{held:?}");
    let mut gpus: Vec<String> = held.iter().flat_map(|(_, ids)| ids.clone()).collect();
    gpus.sort();
    assert_eq!(
        gpus,
        scenario
            .gpus
            .iter()
            .map(|g| g.uuid.clone())
            .collect::<Vec<_>>()
    );
    assert!(node.free_devices("nvidia.com/gpu").is_empty());
    assert_eq!(
        std::fs::read_dir(node.proc_root())
            .map(Iterator::count)
            .ok(),
        Some(2)
    );
    until("ready pods and readyReplicas 2", || {
        let d = node.api().get(&apps("deployments"), "default", "llm")?;
        let pods = node.api().list(&gvr_pods(), "default");
        (d["status"]["readyReplicas"] == 2 && pods.iter().all(ready)).then_some(())
    });

    // A third pod finds no GPU: not placed, and said so in the log.
    kubectl(&kubeconfig, &["scale", "deployment/llm", "--replicas=3"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(node.api().list(&gvr_pods(), "default").len(), 2);

    kubectl(&kubeconfig, &["scale", "deployment/llm", "--replicas=0"]);
    until("no pods", || {
        node.api()
            .list(&gvr_pods(), "default")
            .is_empty()
            .then_some(())
    });
    until("GPUs released", || {
        (listed(&rt, node.socket()).is_empty() && node.free_devices("nvidia.com/gpu").len() == 2)
            .then_some(())
    });
    let d = node.api().get(&apps("deployments"), "default", "llm");
    assert_eq!(d.map(|d| d["status"]["replicas"].clone()), Some(json!(0)));

    statefulset_pods_are_named_by_ordinal(&node);
}

/// A Deployment's pod is owned by its ReplicaSet, by name and uid, and the
/// ReplicaSet by the Deployment.
fn their_replicaset_owns(node: &SimNode, pod: &Value) {
    let owner = &pod["metadata"]["ownerReferences"][0];
    let rs = until("the ReplicaSet", || {
        node.api()
            .list(&apps("replicasets"), "default")
            .into_iter()
            .find(|r| r["metadata"]["name"] == owner["name"])
    });
    assert_eq!(rs["metadata"]["uid"], owner["uid"]);
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    assert_eq!(rs["spec"]["replicas"], 2);
}

/// A StatefulSet's pods are named by ordinal and owned by it.
fn statefulset_pods_are_named_by_ordinal(node: &SimNode) {
    let mut sts = deployment(1);
    sts["kind"] = json!("StatefulSet");
    sts["metadata"]["name"] = json!("db");
    node.api().put(&apps("statefulsets"), sts);
    until("db-0 ready", || {
        let s = node.api().get(&apps("statefulsets"), "default", "db")?;
        let pod = node.api().get(&gvr_pods(), "default", "db-0")?;
        let owner = pod["metadata"]["ownerReferences"][0]["kind"].clone();
        (s["status"]["readyReplicas"] == 1 && owner == "StatefulSet").then_some(())
    });
}

/// A vLLM Deployment's pod runs the fake vLLM on an address of its own,
/// Running and not Ready until the cold start has passed; its Service's
/// EndpointSlice lists that address and the target port, and the model
/// answers there; scaled to 0 the pod, the slice's endpoint and the server
/// go.
#[test]
fn a_vllm_pod_answers_on_its_own_address_through_its_services_slice() {
    let scenario = scenario::parse(SCENARIO, "test").unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let node = Arc::new(SimNode::start(&scenario, rt.handle()).expect("simulated node"));
    let _workloads = Workloads::start(node.clone(), Duration::from_secs_f64(0.5));
    let mut d = deployment(1);
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("vllm/vllm-openai:latest");
    d["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--model", "Qwen/Qwen2.5-0.5B-Instruct"]);
    d["spec"]["template"]["spec"]["containers"][0]["ports"] =
        json!([{"name": "http", "containerPort": 8000}]);
    node.api().put(
        &("".into(), "v1".into(), "services".into()),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "llm", "namespace": "default"},
            "spec": {"selector": {"app": "llm"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    );
    node.api().put(&apps("deployments"), d);
    let pod = until("a pod with an IP", || {
        let pods = node.api().list(&gvr_pods(), "default");
        pods.into_iter().find(|p| p["status"]["podIP"].is_string())
    });
    let ip = pod["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(ip.starts_with("127.") && ip != "127.0.0.1", "{ip}");
    assert_eq!(pod["status"]["phase"], "Running");
    assert_eq!(
        pod["spec"]["containers"][0]["image"],
        "vllm/vllm-openai:latest"
    );
    let slices = (
        "discovery.k8s.io".into(),
        "v1".into(),
        "endpointslices".into(),
    );
    let endpoint = until("the pod Ready in the slice", || {
        let s = node.api().get(&slices, "default", "llm-sim")?;
        let e = s["endpoints"][0].clone();
        (e["conditions"]["ready"] == true).then_some(s)
    });
    assert_eq!(endpoint["endpoints"][0]["addresses"][0], ip.as_str());
    assert_eq!(endpoint["ports"][0]["port"], 8000, "{endpoint}");
    let models = get(&format!("{ip}:8000"), "/v1/models").expect("the pod answers");
    assert!(
        models.contains("\"id\":\"Qwen/Qwen2.5-0.5B-Instruct\""),
        "{models}"
    );

    node.api().put(&apps("deployments"), deployment(0));
    until("no endpoint", || {
        let s = node.api().get(&slices, "default", "llm-sim")?;
        (s["endpoints"] == json!([])).then_some(())
    });
    until("the server gone", || {
        get(&format!("{ip}:8000"), "/v1/models")
            .is_err()
            .then_some(())
    });
}

/// The body of a plain HTTP/1.1 GET.
fn get(addr: &str, path: &str) -> std::io::Result<String> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// The binary: the scenario's node in the API for kubectl, the exporter's
/// flags printed, and everything removed on SIGINT.
#[test]
fn gpuscale_sim_serves_kubectl_until_interrupted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = tmp.path().join("scenario.yaml");
    std::fs::write(&scenario, SCENARIO).expect("write scenario");
    let kubeconfig = tmp.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuscale-sim"))
        .arg("--scenario")
        .arg(&scenario)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--dir")
        .arg(tmp.path().join("nodes"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start gpuscale-sim");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut printed = String::new();
    while !printed.contains("--proc-root") {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut out, &mut line).expect("read stdout");
        assert!(n > 0, "gpuscale-sim ended early: {printed}");
        printed.push_str(&line);
    }
    let socket = tmp.path().join("nodes/sim-a/kubelet.sock");
    assert!(
        printed.contains(&format!("--pod-resources-socket {}", socket.display())),
        "{printed}"
    );
    assert!(socket.exists());
    assert_eq!(
        kubectl(&kubeconfig, &["get", "nodes", "-o", "name"]).trim(),
        "node/sim-a"
    );
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-INT", &pid]).status();
    assert!(killed.is_ok_and(|s| s.success()));
    let status = child.wait().expect("wait for gpuscale-sim");
    assert!(status.success(), "{status}");
    assert!(!kubeconfig.exists() && !socket.exists());
}

fn gvr_pods() -> (String, String, String) {
    (String::new(), "v1".into(), "pods".into())
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}
