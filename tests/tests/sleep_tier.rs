//! The sleep tier on the request path: the activator binary against the
//! fake Kubernetes API, in front of the fake vLLM (vLLM's wire protocol,
//! sleep mode on). A model put to sleep is left out of forwarding; a held
//! request wakes it in about its wake time and is answered; an activator
//! restarted while the model sleeps finds it asleep from the pod itself;
//! a sleeping server restarted is seen awake. And the exporter on the NVML
//! simulator sees the sleeping server's VRAM go and come back.

use std::time::{Duration, Instant};

use gpuscale_e2e::activator::{
    Activator, deployment, deployments, response, routes, send, slice, slices,
};
use gpuscale_e2e::exporter::Exporter;
use gpuscale_e2e::kubeapi::{Cluster, KubeFake};
use gpuscale_nvml_sim::live;
use gpuscale_sim::node::vllm::{Config, FakeVllm, Vram};
use serde_json::Value;

const NS: &str = "inference";
const READY: &str = "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"chat\"}";
const WOKEN: &str =
    "gpuscale_activator_sleep_wake_seconds_count{namespace=\"inference\",route=\"chat\"}";
const COLD: &str =
    "gpuscale_activator_cold_start_seconds_count{namespace=\"inference\",route=\"chat\"}";

fn cluster(port: u16) -> KubeFake {
    let fake = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: std::sync::Arc::new(|_: &Value| (true, String::new())),
    });
    // Up, one Ready endpoint: the fake vLLM.
    fake.put(&deployments(), deployment(NS, "chat", 1));
    fake.put(&slices(), slice(NS, "chat", port, true));
    fake
}

fn chat(a: &Activator) -> (u16, Duration) {
    let began = Instant::now();
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;
    let (code, _, _) = response(send(
        a.port,
        "/v1/chat/completions",
        "models.test",
        "",
        body,
    ));
    (code, began.elapsed())
}

/// `POST path` straight to the model server, as the controller's sleep
/// stage does.
fn to_server(port: u16, path: &str) -> u16 {
    response(send(port, path, "127.0.0.1", "", "")).0
}

#[test]
fn a_held_request_wakes_a_sleeping_model_and_restarts_read_the_state_from_the_pod() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let wake = Duration::from_secs(1);
    let vllm = FakeVllm::start(Config::new("chat", wake), rt.handle()).expect("the fake vLLM");
    let port: u16 = vllm
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let fake = cluster(port);
    let dir = tempfile::tempdir().expect("a temp dir");
    let routes = format!(
        "{}  sleep: {{probeInterval: 200ms}}\n",
        routes(NS, &[("chat", None)])
    );
    let a = Activator::start(dir.path(), "a", &fake, &routes, &[]);
    a.wait_value(READY, 1.0);
    assert_eq!(chat(&a).0, 200, "awake: forwarded at once");

    assert_eq!(to_server(port, "/sleep?level=1"), 200);
    a.wait_value(READY, 0.0);
    let (code, took) = chat(&a);
    assert_eq!(code, 200, "woken and answered");
    assert!(
        took >= wake && took < wake + Duration::from_millis(1500),
        "{took:?}"
    );
    a.wait_value(READY, 1.0);
    assert_eq!(a.value(WOKEN), Some(1.0));
    // No cold start observed (the histogram has no series yet).
    let cold = a.value(COLD);
    assert!(
        cold.is_none_or(|c| c == 0.0),
        "a wake from sleep is no cold start: {cold:?}"
    );
    assert_eq!(vllm.transitions(), (1, 1));

    // The activator goes while the model sleeps; a new one reads the
    // state from the pod and wakes it for the next request.
    drop(a);
    assert_eq!(to_server(port, "/sleep"), 200);
    let b = Activator::start(dir.path(), "b", &fake, &routes, &[]);
    b.wait_value(READY, 0.0);
    assert_eq!(chat(&b).0, 200);
    assert_eq!(vllm.transitions(), (2, 2));

    // A sleeping server restarted is awake again: forwarded, no wake.
    assert_eq!(to_server(port, "/sleep"), 200);
    b.wait_value(READY, 0.0);
    vllm.restart();
    b.wait_value(READY, 1.0);
    let (code, took) = chat(&b);
    assert_eq!(code, 200);
    assert!(took < wake, "no wake after a restart: {took:?}");
    assert_eq!(b.value(WOKEN), Some(1.0));
}

const GPU: &str = "GPU-5a000000-0000-4000-8000-000000000000";
const SCENARIO: &str = r#"
node: sleep-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-5a000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
"#;
const MIB: f64 = 1024.0 * 1024.0;

#[test]
fn the_exporter_sees_a_sleeping_models_vram_released_and_taken_back() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(&scenario, SCENARIO).expect("the scenario");
    let live_dir = dir.path().join("live");
    let mut cfg = Config::new("chat", Duration::from_millis(300));
    cfg.vram = Some(Vram {
        dir: live_dir.clone(),
        uuid: GPU.into(),
        pid: 4242,
        awake_mib: 24_576,
        asleep_mib: 2_458,
    });
    let vllm = FakeVllm::start(cfg, rt.handle()).expect("the fake vLLM");
    let port: u16 = vllm
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let e = Exporter::simulate_env(&scenario, &[], &[(live::ENV_LIVE, &live_dir)]);
    let used = |want: f64| {
        move |m: &gpuscale_e2e::exporter::Metrics| {
            m.get("gpu_memory_used_bytes", &[("uuid", GPU)]) == Some(want * MIB)
                && m.get("gpu_process_memory_used_bytes", &[("pid", "4242")]) == Some(want * MIB)
        }
    };
    e.scrape_until("the awake server's 24 GiB", used(24_576.0));
    assert_eq!(to_server(port, "/sleep?level=1"), 200);
    e.scrape_until("the sleeping server's VRAM released", used(2_458.0));
    assert_eq!(to_server(port, "/wake_up"), 200);
    e.scrape_until("the woken server's VRAM back", used(24_576.0));
}
