//! The controller's `sleep` stage: the real adapter binary with
//! `--scale-to-zero` against the in-memory Kubernetes API, a real
//! Prometheus, and the fake vLLM (vLLM's wire protocol) as the target's
//! pod. An idle target's pod is put to sleep (status `Sleeping`, Event
//! `Slept`) and woken when the target is busy again; a pod without sleep
//! mode is reported (`SleepModeNotEnabled`) and left awake, as is one
//! serving a request (`RequestsInFlight`) until it is done; a sleeping
//! server restarted is seen awake; a controller restarted while the pod
//! sleeps finds the state from the pod. The self-metric
//! `gpuscale_scale_to_zero_sleeping_pods` counts the pods asleep.

use std::time::Duration;

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::kubeapi::KubeFake;
use gpuscale_sim::node::vllm::{Config, FakeVllm};
use serde_json::{Value, json};

fn port_of(v: &FakeVllm) -> u16 {
    v.url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

/// A Deployment `name` at one Ready replica, with its one pod on
/// 127.0.0.1 (the fake vLLM).
fn put_target(kube: &KubeFake, name: &str) {
    kube.put(
        &deployments(),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "server"}]}}},
            "status": {"replicas": 1, "readyReplicas": 1}}),
    );
    kube.put(
        &gvr("", "v1", "pods"),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-0"), "namespace": NS, "labels": {"app": name}},
            "spec": {"containers": [{"name": "server"}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
}

/// A policy on `target` idle on its pod's queue for 5 min (so it does
/// not park here), its pods put to sleep after 2 s of idle.
fn sleep_policy(target: &str, port: u16) -> Value {
    policy(
        &format!("{target}-policy"),
        "Deployment",
        target,
        if target == "chat" {
            "chat-gw"
        } else {
            "other-gw"
        },
        json!({
            "idle": {"metric": "queue_depth", "labelSelector": format!("pod={target}-0"), "threshold": 0, "for": "300s"},
            "sleep": {"after": "2s", "level": 1, "port": port},
        }),
    )
}

fn pod_phase(kube: &KubeFake, policy: &str) -> Option<(String, Option<String>)> {
    let s = status(kube, policy);
    let p = s["sleep"].as_array()?.first()?.clone();
    Some((
        p["phase"].as_str()?.to_string(),
        p["reason"].as_str().map(String::from),
    ))
}

/// Target `slow`, idle by its rule, and one request to its server kept
/// in flight until the story releases it (its answer when the thread
/// ends): no deadline of the machine's speed decides what the controller
/// sees.
fn slow_target(
    kube: &KubeFake,
    rt: &tokio::runtime::Handle,
) -> (FakeVllm, std::thread::JoinHandle<String>) {
    let slow = FakeVllm::start(Config::new("slow", Duration::from_millis(300)), rt)
        .expect("a slow fake vLLM");
    slow.hold_answers();
    put_target(kube, "slow");
    let mut p = sleep_policy("slow", port_of(&slow));
    p["spec"]["idle"]["labelSelector"] = json!("pod=bursty-0");
    kube.put(&policies(), p);
    let addr = slow.url().trim_start_matches("http://").to_string();
    let request = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).expect("connect");
        let body = r#"{"model":"slow","prompt":"hi"}"#;
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        std::io::Write::write_all(&mut c, head.as_bytes()).expect("send");
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut c, &mut out);
        out
    });
    eventually("slow's request in flight", || {
        (slow.running() == 1).then_some(())
    });
    (slow, request)
}

/// Waits for `gpuscale_scale_to_zero_sleeping_pods` of `target` at `want`.
fn sleeping_pods(adapter: &Adapter, target: &str, want: &str) {
    let family = "gpuscale_scale_to_zero_sleeping_pods";
    eventually(&format!("{family} of {target} at {want}"), || {
        (sample(adapter, family, target).as_deref() == Some(want)).then_some(())
    });
}

#[test]
fn an_idle_target_sleeps_wakes_when_busy_and_a_pod_without_sleep_mode_is_reported() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let chat = FakeVllm::start(Config::new("chat", Duration::from_millis(300)), rt.handle())
        .expect("the fake vLLM");
    let mut plain_cfg = Config::new("bursty", Duration::from_millis(300));
    plain_cfg.sleep_mode = false;
    let plain = FakeVllm::start(plain_cfg, rt.handle()).expect("a fake vLLM without sleep mode");
    let mut load = Load::default();
    let (series, prom_port) = Series::serve(&exposition(load));
    let prom = Prometheus::start(prom_port);
    let kube = fake();
    put_target(&kube, "chat");
    put_target(&kube, "bursty");
    kube.put(&policies(), sleep_policy("chat", port_of(&chat)));
    kube.put(&policies(), sleep_policy("bursty", port_of(&plain)));
    // A third server serves one long request when the controller starts.
    let (slow, request) = slow_target(&kube, rt.handle());
    let work = dir();
    let adapter = controller(&kube, &prom.url, "a", &work, &[]);

    let asleep = Some(("Sleeping".to_string(), None));
    eventually("chat's pod asleep", || {
        (pod_phase(&kube, "chat-policy") == asleep && chat.is_sleeping()).then_some(())
    });
    assert!(
        events(&kube)
            .iter()
            .any(|(r, n)| r == "Slept" && n.contains("chat-0"))
    );
    assert_eq!(replicas(&kube, "chat"), 1, "asleep, not parked");
    sleeping_pods(&adapter, "chat", "1");
    let reported = Some(("Awake".to_string(), Some("SleepModeNotEnabled".to_string())));
    eventually("bursty's pod reported", || {
        (pod_phase(&kube, "bursty-policy") == reported).then_some(())
    });
    assert!(
        events(&kube)
            .iter()
            .any(|(r, n)| r == "CannotSleep" && n.contains("bursty-0"))
    );
    assert!(!plain.is_sleeping());
    sleeping_pods(&adapter, "bursty", "0");

    // Never put to sleep while serving; asleep once the request is done.
    let serving = Some(("Awake".to_string(), Some("RequestsInFlight".to_string())));
    eventually("slow's pod left awake while serving", || {
        (pod_phase(&kube, "slow-policy") == serving).then_some(())
    });
    assert!(!slow.is_sleeping());
    slow.release_answers();
    let answer = request.join().expect("the request thread");
    assert!(answer.starts_with("HTTP/1.1 200"), "answered: {answer}");
    eventually("slow's pod asleep once done", || {
        (pod_phase(&kube, "slow-policy") == asleep && slow.is_sleeping()).then_some(())
    });

    // The controller goes while the pod sleeps; a new one finds the state
    // from the pod: still asleep, not put to sleep a second time.
    drop(adapter);
    let slept = chat.transitions();
    let adapter = controller(&kube, &prom.url, "b", &work, &[]);
    eventually("the new controller to lead", || {
        leads(&adapter).then_some(())
    });
    // Its own rounds have read the pod: it counts it asleep.
    sleeping_pods(&adapter, "chat", "1");
    assert_eq!(pod_phase(&kube, "chat-policy"), asleep);
    assert_eq!(chat.transitions(), slept, "nothing done twice");

    // Requests pending at its gateway (activation active, queue still
    // idle): the controller wakes the pod.
    load.chat_pending = 3;
    series.set(&exposition(load));
    let awake = Some(("Awake".to_string(), None));
    eventually("chat's pod woken", || {
        (pod_phase(&kube, "chat-policy") == awake && !chat.is_sleeping()).then_some(())
    });
    assert!(events(&kube).iter().any(|(r, _)| r == "WokenFromSleep"));
    sleeping_pods(&adapter, "chat", "0");

    // Idle again, asleep again; then the server restarts: seen awake,
    // and put back to sleep by the next rounds.
    load.chat_pending = 0;
    series.set(&exposition(load));
    eventually("chat's pod asleep again", || {
        (chat.is_sleeping() && chat.transitions().0 == 2).then_some(())
    });
    chat.restart();
    eventually("the restarted pod put back to sleep", || {
        (chat.is_sleeping() && chat.transitions().0 == 1).then_some(())
    });
    drop(prom);
}
