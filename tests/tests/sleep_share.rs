//! Two sleeping models on one GPU whose VRAM cannot both fit: the
//! activator binary in front of two fake vLLMs (vLLM's wire protocol,
//! their VRAM live processes of the NVML simulator), the exporter on that
//! simulator with the two pods time-slicing the GPU, and a real Prometheus
//! scraping it, which the activator reads (`--prometheus-url`). Waking one
//! model puts the other to sleep first; a neighbour with a request in
//! flight is never put to sleep: the wake waits until it is answered.

use std::time::Duration;

use gpuscale_e2e::activator::{Activator, deployment, deployments, response, send, slices};
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::exporter::Exporter;
use gpuscale_e2e::kubeapi::{Cluster, KubeFake};
use gpuscale_nvml_sim::live;
use gpuscale_sim::node::vllm::{Config, FakeVllm, Vram};
use serde_json::{Value, json};

const NS: &str = "inference";
const GPU: &str = "GPU-5b000000-0000-4000-8000-000000000000";
const MIB: f64 = 1024.0 * 1024.0;
/// Each model's VRAM awake and asleep, MiB: two awake (96000) exceed the
/// GPU's 81559.
const AWAKE_MIB: u64 = 48_000;
const ASLEEP_MIB: u64 = 2_000;

/// An H100 time-sliced by the pods `chat-0` (pid 4101) and `code-0`
/// (pid 4102).
fn share_scenario() -> String {
    let mut y = format!(
        "node: share-node\ngpus:\n  - model: NVIDIA H100 80GB HBM3\n    uuid: {GPU}\n    pci_bus_id: \"00000000:18:00.0\"\n    memory_mib: 81559\npods:\n"
    );
    for (i, name) in ["chat", "code"].iter().enumerate() {
        y.push_str(&format!(
            "  - namespace: {NS}\n    name: {name}-0\n    uid: 5b00000{i}-0000-4000-8000-000000000001\n    owner: {{ kind: StatefulSet, name: {name} }}\n    containers:\n      - name: server\n        id: 5b0000000000000000000000000000000000000000000000000000000000000{i}\n        devices: [ {{ resource: nvidia.com/gpu.shared, ids: [\"{GPU}::{i}\"] }} ]\n        pids: [{}]\n",
            4101 + i
        ));
    }
    y
}

/// A fake vLLM for `name`, its VRAM a live process `pid` on the GPU.
fn server(
    name: &str,
    pid: u32,
    live_dir: &std::path::Path,
    rt: &tokio::runtime::Handle,
) -> FakeVllm {
    let mut cfg = Config::new(name, Duration::from_millis(300));
    cfg.vram = Some(Vram {
        dir: live_dir.to_owned(),
        uuid: GPU.into(),
        pid,
        awake_mib: AWAKE_MIB,
        asleep_mib: ASLEEP_MIB,
    });
    FakeVllm::start(cfg, rt).expect("a fake vLLM")
}

fn port(v: &FakeVllm) -> u16 {
    v.url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

/// The Service's EndpointSlice: the server's address and its pod.
fn slice(name: &str, port: u16) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-abc"), "namespace": NS,
            "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true},
            "targetRef": {"kind": "Pod", "namespace": NS, "name": format!("{name}-0")}}],
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}]})
}

fn routes() -> String {
    let mut out = String::from("routes:\n");
    for name in ["chat", "code"] {
        out.push_str(&format!(
            "- name: {name}\n  host: models.test\n  model: {name}\n  service: {{namespace: {NS}, name: {name}, port: http}}\n  target: {{kind: StatefulSet, name: {name}}}\n  sleep: {{probeInterval: 200ms}}\n"
        ));
    }
    out
}

/// The value of `family` on the series with every one of `labels`.
fn series(a: &Activator, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let text = a.scrape()?;
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once('{')?;
        let (set, value) = rest.rsplit_once("} ")?;
        let all = labels
            .iter()
            .all(|(k, v)| set.split(',').any(|p| p == format!("{k}=\"{v}\"")));
        (name == family && all).then(|| value.trim().parse().ok())?
    })
}

fn route_value(a: &Activator, family: &str, route: &str) -> Option<f64> {
    series(a, family, &[("route", route)])
}

/// Waits (generously: Prometheus scrapes every second, the exporter
/// collects every 200 ms) until Prometheus has `pod` at `mib`.
fn prom_reads(prom: &Prometheus, pod: &str, mib: u64) {
    let want = mib as f64 * MIB;
    eventually(&format!("Prometheus reading {pod} at {mib} MiB"), || {
        let v = prom.query(&format!("gpu_pod_memory_used_bytes{{pod=\"{pod}\"}}"))?;
        let got: f64 = v["data"]["result"][0]["value"][1].as_str()?.parse().ok()?;
        (got == want).then_some(())
    });
}

/// One completion for `model` through the activator: its status.
fn ask(port: u16, model: &str) -> u16 {
    let body = format!(r#"{{"model":"{model}","prompt":"hi"}}"#);
    response(send(port, "/v1/completions", "models.test", "", &body)).0
}

/// Chat awake on the GPU, the exporter and Prometheus reading it, and
/// the activator in front of both routes (code's server not yet up).
struct World {
    chat: FakeVllm,
    prom: Prometheus,
    kube: KubeFake,
    a: Activator,
    live_dir: std::path::PathBuf,
    _exporter: Exporter,
}

fn world(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> World {
    let live_dir = dir.join("live");
    let scenario = dir.join("scenario.yaml");
    std::fs::write(&scenario, share_scenario()).expect("the scenario");
    let chat = server("chat", 4101, &live_dir, rt.handle());
    let exporter = Exporter::simulate_env(&scenario, &[], &[(live::ENV_LIVE, &live_dir)]);
    exporter.scrape_until("chat's pod holding its VRAM", |m| {
        m.get("gpu_pod_memory_used_bytes", &[("pod", "chat-0")]) == Some(AWAKE_MIB as f64 * MIB)
    });
    let prom = Prometheus::start(exporter.port);
    let kube = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: std::sync::Arc::new(|_: &Value| (true, String::new())),
    });
    for name in ["chat", "code"] {
        kube.put(&deployments(), deployment(NS, name, 1));
    }
    kube.put(&slices(), slice("chat", port(&chat)));
    let flags = [
        format!("--prometheus-url={}", prom.url),
        "--vram-refresh=500ms".to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = Activator::start(dir, "a", &kube, &routes(), &flags);
    World {
        chat,
        prom,
        kube,
        a,
        live_dir,
        _exporter: exporter,
    }
}

#[test]
fn waking_a_model_puts_its_idle_neighbour_to_sleep_never_a_busy_one() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let w = world(&rt, dir.path());
    let (chat, prom, a) = (&w.chat, &w.prom, &w.a);
    let need = AWAKE_MIB as f64 * MIB;
    let vram_need = "gpuscale_activator_vram_need_bytes";
    eventually("chat's need read awake", || {
        (route_value(a, vram_need, "chat") == Some(need)).then_some(())
    });

    // Chat is put to sleep (the controller's sleep stage); code starts
    // on the room it left and is read awake.
    assert_eq!(
        response(send(port(chat), "/sleep", "127.0.0.1", "", "")).0,
        200
    );
    let sleeping = "gpuscale_activator_sleeping_endpoints";
    eventually("chat seen asleep", || {
        (route_value(a, sleeping, "chat") == Some(1.0)).then_some(())
    });
    let code = server("code", 4102, &w.live_dir, rt.handle());
    w.kube.put(&slices(), slice("code", port(&code)));
    eventually("code's need read awake", || {
        (route_value(a, vram_need, "code") == Some(need)).then_some(())
    });
    prom_reads(prom, "chat-0", ASLEEP_MIB);

    // A request for chat: 46000 MiB more do not fit in the 31559 free,
    // so idle code is put to sleep first, then chat woken and answered.
    assert_eq!(ask(a.port, "chat"), 200, "chat woken and answered");
    assert!(code.is_sleeping() && !chat.is_sleeping());
    let room = "gpuscale_activator_gpu_room_total";
    let slept = "gpuscale_activator_neighbour_sleeps_total";
    assert_eq!(
        series(a, room, &[("route", "chat"), ("outcome", "made_room")]),
        Some(1.0)
    );
    assert_eq!(
        series(a, slept, &[("route", "code"), ("result", "slept")]),
        Some(1.0)
    );
    assert_eq!(code.transitions(), (1, 0));

    a_busy_neighbour_is_never_put_to_sleep(&w, &code);
}

/// Chat serves a request kept in flight: code's wake must not put it to
/// sleep, so it waits (held) until chat's request is answered.
fn a_busy_neighbour_is_never_put_to_sleep(w: &World, code: &FakeVllm) {
    let (chat, prom, a) = (&w.chat, &w.prom, &w.a);
    let room = "gpuscale_activator_gpu_room_total";
    let slept = "gpuscale_activator_neighbour_sleeps_total";
    prom_reads(prom, "code-0", ASLEEP_MIB);
    prom_reads(prom, "chat-0", AWAKE_MIB);
    chat.hold_answers();
    let busy = std::thread::spawn({
        let port = a.port;
        move || ask(port, "chat")
    });
    eventually("chat's request in flight", || {
        (chat.running() == 1).then_some(())
    });
    let waiting = std::thread::spawn({
        let port = a.port;
        move || ask(port, "code")
    });
    eventually("code's wake waiting on chat's request", || {
        series(a, room, &[("route", "code"), ("outcome", "in_flight")]).filter(|n| *n >= 1.0)
    });
    assert!(
        !chat.is_sleeping(),
        "a neighbour serving a request is never put to sleep"
    );
    assert!(code.is_sleeping());
    assert!(!waiting.is_finished());
    chat.release_answers();
    assert_eq!(busy.join().expect("chat's request"), 200);
    assert_eq!(
        waiting.join().expect("code's request"),
        200,
        "code woken once chat was idle"
    );
    assert!(chat.is_sleeping() && !code.is_sleeping());
    assert_eq!(
        series(a, slept, &[("route", "chat"), ("result", "slept")]),
        Some(1.0)
    );
    assert_eq!(
        series(a, room, &[("route", "code"), ("outcome", "made_room")]),
        Some(1.0)
    );
}
