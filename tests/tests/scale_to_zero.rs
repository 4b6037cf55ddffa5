//! The scale-to-zero controller as a cluster runs it: the real adapter
//! binary with `--scale-to-zero`, its real `kube` client against the
//! in-memory Kubernetes API (discovery, `scale` and `status` subresources,
//! Leases, Events), and a real Prometheus scraping series the test changes.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::adapter::procs::{eventually, get};
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::kubeapi::{Cluster, Gvr, KubeFake};
use serde_json::{Value, json};

const NS: &str = "inference";

fn gvr(g: &str, v: &str, r: &str) -> Gvr {
    (g.into(), v.into(), r.into())
}

fn deployments() -> Gvr {
    gvr("apps", "v1", "deployments")
}

fn policies() -> Gvr {
    gvr("gpuscale.dev", "v1alpha1", "scaletozeropolicies")
}

/// Series the test sets; Prometheus scrapes them every second.
#[derive(Clone)]
struct Series(Arc<Mutex<String>>);

impl Series {
    fn serve(initial: &str) -> (Self, u16) {
        let series = Series(Arc::new(Mutex::new(initial.to_string())));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind series");
        let port = listener.local_addr().expect("addr").port();
        let body = series.clone();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                let mut buf = [0u8; 2048];
                let _ = conn.read(&mut buf);
                let text = body.0.lock().map(|s| s.clone()).unwrap_or_default();
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        (series, port)
    }

    fn set(&self, text: &str) {
        if let Ok(mut s) = self.0.lock() {
            *s = text.to_string();
        }
    }
}

/// Queue depth of the `chat` pods and pending requests at two gateways, as
/// a PodMonitor scrape gives them.
fn exposition(queue: u32, chat_pending: u32) -> String {
    format!(
        "# TYPE vllm:num_requests_waiting gauge\n\
         vllm:num_requests_waiting{{namespace=\"{NS}\",pod=\"chat-0\",container=\"server\",model_name=\"m\"}} {queue}\n\
         # TYPE gateway_requests_pending gauge\n\
         gateway_requests_pending{{namespace=\"{NS}\",service=\"chat-gw\"}} {chat_pending}\n\
         gateway_requests_pending{{namespace=\"{NS}\",service=\"other-gw\"}} 0\n"
    )
}

const CONFIG: &str = "metrics:\n  - name: queue_depth\n    query: sum(vllm:num_requests_waiting{${matchers}})\n  - name: gateway_pending\n    query: sum(gateway_requests_pending{${matchers}})\n";

fn deployment(name: &str, replicas: i64, ready: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": ready}})
}

fn policy(name: &str, kind: &str, target: &str, gateway: &str, extra: Value) -> Value {
    let api = if kind == "Job" { "batch/v1" } else { "apps/v1" };
    let mut spec = json!({
        "target": {"apiVersion": api, "kind": kind, "name": target},
        "idle": {"metric": "queue_depth", "threshold": 0, "for": "3s"},
        "activation": {"metric": "gateway_pending", "labelSelector": format!("service={gateway}"), "threshold": 0},
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({"apiVersion": "gpuscale.dev/v1alpha1", "kind": "ScaleToZeroPolicy",
        "metadata": {"name": name, "namespace": NS, "generation": 1}, "spec": spec})
}

fn fake() -> KubeFake {
    KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    })
}

fn dir() -> PathBuf {
    tempfile::Builder::new()
        .prefix("gpuscale-stz-")
        .tempdir()
        .expect("tempdir")
        .keep()
}

fn controller(kube: &KubeFake, prom_url: &str, identity: &str, dir: &std::path::Path) -> Adapter {
    let kc = dir.join(format!("kubeconfig-{identity}"));
    std::fs::write(&kc, kube.kubeconfig()).expect("kubeconfig");
    let cfg = dir.join("metrics.yaml");
    std::fs::write(&cfg, CONFIG).expect("config");
    Adapter::start(
        &[
            "--dev".into(),
            format!("--kubeconfig={}", kc.display()),
            format!("--config={}", cfg.display()),
            format!("--prometheus-url={prom_url}"),
            "--poll-interval=1s".into(),
            "--scale-to-zero".into(),
            "--scale-to-zero-lease-namespace=gpuscale".into(),
            format!("--scale-to-zero-identity={identity}"),
            "--scale-to-zero-lease-duration=3s".into(),
            "--scale-to-zero-wake-interval=1s".into(),
            "--scale-to-zero-check-interval=1s".into(),
        ],
        dir.join(format!("adapter-{identity}.log")),
    )
}

fn replicas(kube: &KubeFake, name: &str) -> i64 {
    kube.get(&deployments(), NS, name)
        .and_then(|d| d["spec"]["replicas"].as_i64())
        .unwrap_or(-1)
}

fn status(kube: &KubeFake, name: &str) -> Value {
    kube.get(&policies(), NS, name)
        .map(|p| p["status"].clone())
        .unwrap_or(Value::Null)
}

fn reason(kube: &KubeFake, name: &str) -> String {
    status(kube, name)["reason"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Whether the adapter says it holds the Lease (a sample line, not HELP).
fn leads(adapter: &Adapter) -> bool {
    adapter
        .self_metrics()
        .lines()
        .any(|l| l == "gpuscale_scale_to_zero_leader 1")
}

fn events(kube: &KubeFake) -> Vec<(String, String)> {
    kube.list(&gvr("events.k8s.io", "v1", "events"), NS)
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["note"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// One cluster, one controller, every policy story that needs a healthy
/// Prometheus: park after the window, wake on activation, and each refusal.
#[test]
fn parks_idle_targets_wakes_them_and_says_why_it_refuses() {
    let (series, port) = Series::serve(&exposition(0, 0));
    let prom = Prometheus::start(port);
    let kube = fake();
    for (name, replicas, ready) in [
        ("chat", 2, 2),
        ("paused", 1, 1),
        ("warming", 2, 1),
        ("owned", 1, 1),
    ] {
        kube.put(&deployments(), deployment(name, replicas, ready));
    }
    kube.put(
        &gvr("batch", "v1", "jobs"),
        json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": NS}, "spec": {}}),
    );
    kube.put(
        &gvr("autoscaling", "v2", "horizontalpodautoscalers"),
        json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "owned", "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "owned"},
                 "minReplicas": 0, "maxReplicas": 4}}),
    );
    for p in [
        policy("chat", "Deployment", "chat", "chat-gw", json!({})),
        policy(
            "paused",
            "Deployment",
            "paused",
            "other-gw",
            json!({"paused": true}),
        ),
        policy("warming", "Deployment", "warming", "other-gw", json!({})),
        policy("owned", "Deployment", "owned", "other-gw", json!({})),
        policy("job", "Job", "train", "other-gw", json!({})),
        policy("ghost", "Deployment", "ghost", "other-gw", json!({})),
        policy(
            "typo",
            "Deployment",
            "paused",
            "other-gw",
            json!({"idle": {"metric": "queue_dept", "for": "3s"}}),
        ),
    ] {
        kube.put(&policies(), p);
    }
    let dir = dir();
    let adapter = controller(&kube, &prom.url, "a", &dir);

    // Idle for the whole window on good reads → parked, recorded, explained.
    eventually("chat parked", || {
        (replicas(&kube, "chat") == 0).then_some(())
    });
    let chat = kube.get(&deployments(), NS, "chat").expect("chat");
    assert_eq!(
        chat["metadata"]["annotations"]["gpuscale.dev/parked-replicas"],
        "2"
    );
    eventually("chat's status says Parked", || {
        (status(&kube, "chat")["phase"] == "Parked").then_some(())
    });
    assert!(
        events(&kube)
            .iter()
            .any(|(r, n)| r == "Parked" && n.contains("idle")),
        "{:?}",
        events(&kube)
    );

    // Activation → woken to the recorded count within an interval or two.
    series.set(&exposition(0, 3));
    let asked = Instant::now();
    eventually("chat woken", || {
        (replicas(&kube, "chat") == 2).then_some(())
    });
    eprintln!(
        "wake: {:?} from the series change (1 s scrape, 1 s poll, 1 s wake interval)",
        asked.elapsed()
    );
    eventually("a Woken Event", || {
        events(&kube)
            .iter()
            .any(|(r, _)| r == "Woken")
            .then_some(())
    });

    // Refusals, each with its reason; the others stay up.
    eventually("refusal reasons", || {
        let got: Vec<String> = ["paused", "warming", "owned", "job", "ghost", "typo"]
            .iter()
            .map(|p| reason(&kube, p))
            .collect();
        (got == [
            "Paused",
            "PodsNotReady",
            "HPAOwnsZero",
            "TargetNotScalable",
            "TargetNotFound",
            "UnknownMetric",
        ])
        .then_some(())
    });
    for name in ["paused", "warming", "owned"] {
        assert_ne!(replicas(&kube, name), 0, "{name} must not be parked");
    }
    assert_eq!(status(&kube, "ghost")["conditions"][0]["status"], "False");
    let debug = get(&format!(
        "http://127.0.0.1:{}/debug/scalers",
        adapter.metrics_port
    ))
    .expect("debug/scalers");
    let debug: Value = serde_json::from_str(&debug.1).expect("JSON");
    assert_eq!(debug["leader"], true);
    let metrics = adapter.self_metrics();
    assert!(
        metrics.contains("gpuscale_scale_to_zero_leader 1"),
        "{metrics}"
    );
    assert!(metrics.contains(&format!(
        "gpuscale_scale_to_zero_parks_total{{namespace=\"{NS}\",target=\"chat\"}} 1"
    )));
    assert!(metrics.contains(&format!(
        "gpuscale_scale_to_zero_wakes_total{{namespace=\"{NS}\",target=\"chat\"}} 1"
    )));
    assert!(metrics.contains("gpuscale_scale_to_zero_refusals_total{reason=\"HPAOwnsZero\"}"));
}

/// Prometheus unreachable for longer than the idle window: nothing is
/// parked, and the status says why.
#[test]
fn prometheus_down_never_parks() {
    let kube = fake();
    kube.put(&deployments(), deployment("chat", 2, 2));
    kube.put(
        &policies(),
        policy("chat", "Deployment", "chat", "chat-gw", json!({})),
    );
    let dead = format!("http://127.0.0.1:{}", gpuscale_e2e::free_port());
    let dir = dir();
    let _adapter = controller(&kube, &dead, "a", &dir);
    eventually("ReadUnknown in the status", || {
        (reason(&kube, "chat") == "ReadUnknown").then_some(())
    });
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(replicas(&kube, "chat"), 2);
    assert!(kube.scale_patches().is_empty());
    assert_eq!(reason(&kube, "chat"), "ReadUnknown");
    assert!(events(&kube).iter().any(|(r, _)| r == "ReadUnknown"));
}

/// Two replicas, one Lease: one acts; when it dies the other takes over
/// within the lease duration, and nothing is parked twice.
#[test]
fn one_leader_acts_and_the_other_takes_over() {
    let (series, port) = Series::serve(&exposition(0, 0));
    let prom = Prometheus::start(port);
    let kube = fake();
    kube.put(&deployments(), deployment("chat", 2, 2));
    kube.put(
        &policies(),
        policy("chat", "Deployment", "chat", "chat-gw", json!({})),
    );
    let dir = dir();
    let a = controller(&kube, &prom.url, "a", &dir);
    let b = controller(&kube, &prom.url, "b", &dir);
    eventually("parked once", || {
        (replicas(&kube, "chat") == 0).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(kube.scale_patches().len(), 1, "{:?}", kube.scale_patches());
    let leaders: Vec<bool> = [&a, &b].iter().map(|x| leads(x)).collect();
    assert_eq!(leaders.iter().filter(|l| **l).count(), 1, "{leaders:?}");
    let (leader, follower) = if leaders[0] { (a, b) } else { (b, a) };
    drop(leader);
    let lost = Instant::now();
    eventually("the follower takes the Lease", || {
        leads(&follower).then_some(())
    });
    eprintln!("takeover after {:?} (lease duration 3 s)", lost.elapsed());
    series.set(&exposition(0, 1));
    eventually("woken by the new leader", || {
        (replicas(&kube, "chat") == 2).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let patches = kube.scale_patches();
    assert_eq!(patches.len(), 2, "one park, one wake: {patches:?}");
}
