//! The scale-to-zero controller as a cluster runs it: the real adapter
//! binary with `--scale-to-zero`, its real `kube` client against the
//! in-memory Kubernetes API (discovery, `scale` and `status` subresources,
//! Leases, Events), and a real Prometheus scraping series the test changes.

use std::time::{Duration, Instant};

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::adapter::procs::{eventually, get};
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::kubeapi::KubeFake;
use serde_json::{Value, json};

/// The world of the policy stories: one fake cluster, one controller, a
/// real Prometheus scraping the series `load` says.
struct World {
    load: Load,
    series: Series,
    kube: KubeFake,
    adapter: Adapter,
    _prom: Prometheus,
}

impl World {
    /// Serves `load` from now on; Prometheus scrapes it within a second.
    fn set(&mut self, change: impl FnOnce(&mut Load)) {
        change(&mut self.load);
        self.series.set(&exposition(self.load));
    }

    fn replicas(&self, name: &str) -> i64 {
        replicas(&self.kube, name)
    }

    fn status(&self, name: &str) -> Value {
        status(&self.kube, name)
    }

    fn reason(&self, name: &str) -> String {
        reason(&self.kube, name)
    }

    fn waking_since(&self, target: &str) -> Option<String> {
        let family = "gpuscale_scale_to_zero_waking_since_seconds";
        sample(&self.adapter, family, target)
    }
}

/// The targets: five Deployments up (warming one not Ready, owned one
/// under an HPA that may go to zero), cold parked earlier by this
/// controller, a Job.
fn put_targets(kube: &KubeFake) {
    for (name, replicas, ready) in [
        ("chat", 2, 2),
        ("bursty", 1, 1),
        ("paused", 1, 1),
        ("typo", 1, 1),
        ("adhoc", 1, 1),
        ("warming", 2, 1),
        ("owned", 1, 1),
    ] {
        kube.put(&deployments(), deployment(name, replicas, ready));
    }
    // Parked earlier by this controller (its policy's status records 1 replica).
    kube.put(&deployments(), deployment("cold", 0, 0));
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
}

/// Wake to the count recorded at parking (the default is 1 replica).
fn restore() -> Value {
    json!({"wake": {"restoreParked": true}})
}

/// `p` as this controller leaves a policy whose target it parked from 1
/// replica: the record in its status.
fn parked_earlier(mut p: Value) -> Value {
    p["status"] = json!({"phase": "Parked", "parked": {
        "target": p["spec"]["target"].clone(), "replicas": 1, "at": "2026-12-01T10:00:00Z"}});
    p
}

/// One policy per story, each on its own target: two that park, one that wakes, and one per refusal.
fn put_policies(kube: &KubeFake) {
    let other = |name: &str, target: &str, extra: Value| {
        policy(name, "Deployment", target, "other-gw", extra)
    };
    for p in [
        policy("chat", "Deployment", "chat", "chat-gw", restore()),
        other(
            "bursty",
            "bursty",
            json!({"idle": {"metric": "queue_depth", "labelSelector": "pod=bursty-0", "for": "6s"}}),
        ),
        parked_earlier(policy(
            "cold",
            "Deployment",
            "cold",
            "cold-gw",
            json!({"minUpDuration": "1h"}),
        )),
        other("paused", "paused", json!({"paused": true})),
        other("warming", "warming", json!({})),
        other("owned", "owned", json!({})),
        policy("job", "Job", "train", "other-gw", json!({})),
        other("ghost", "ghost", json!({})),
        other(
            "typo",
            "typo",
            json!({"idle": {"metric": "queue_dept", "for": "3s"}}),
        ),
        other(
            "adhoc",
            "adhoc",
            json!({"activation": {"query": "sum(gateway_requests_pending{${matchers}})"}}),
        ),
    ] {
        kube.put(&policies(), p);
    }
}

fn policy_world() -> World {
    let load = Load {
        cold_pending: 1,
        ..Load::default()
    };
    let (series, port) = Series::serve(&exposition(load));
    let prom = Prometheus::start(port);
    let kube = fake();
    put_targets(&kube);
    put_policies(&kube);
    let adapter = controller(&kube, &prom.url, "a", &dir(), &[]);
    World {
        load,
        series,
        kube,
        adapter,
        _prom: prom,
    }
}

/// One cluster, one controller, every policy story that needs a healthy
/// Prometheus: park after the window, a busy read restarts it, wake on
/// activation, waking until Ready, and each refusal while the others work.
#[test]
fn parks_idle_targets_wakes_them_and_says_why_it_refuses() {
    let mut w = policy_world();
    let quiet = busy_read_restarts_the_window(&mut w);
    parks_after_the_idle_window(&w);
    wakes_on_activation(&mut w);
    waking_until_a_pod_is_ready(&w);
    // Idle again inside minUpDuration → not parked (checked with the refusals).
    w.set(|l| l.cold_pending = 0);
    parks_a_whole_window_after_the_last_busy_read(&w, quiet);
    refuses_with_a_reason_while_the_others_work(&w);
    exports_what_it_did(&w);
}

/// One busy read while bursty's window is open restarts the window; returns
/// when the load went quiet again.
fn busy_read_restarts_the_window(w: &mut World) -> Instant {
    eventually("bursty's idle window open", || {
        w.status("bursty")["idleSince"].as_str().map(|_| ())
    });
    w.set(|l| l.bursty_queue = 2);
    eventually("bursty read busy", || {
        (w.reason("bursty") == "Busy").then_some(())
    });
    w.set(|l| l.bursty_queue = 0);
    Instant::now()
}

/// Idle for the whole window on good reads → parked, the replica count
/// recorded, the status and an Event saying why.
fn parks_after_the_idle_window(w: &World) {
    eventually("chat parked", || (w.replicas("chat") == 0).then_some(()));
    eventually("chat's status says Parked", || {
        (w.status("chat")["phase"] == "Parked").then_some(())
    });
    assert_eq!(w.status("chat")["parked"]["replicas"], 2, "the park record");
    // The record lives in the policy: the target is written only through
    // its scale subresource, so the controller needs no patch on workloads.
    let chat = w.kube.get(&deployments(), NS, "chat").expect("chat");
    assert!(
        chat["metadata"]["annotations"]
            .get("gpuscale.dev/parked-replicas")
            .is_none()
    );
    let writes: Vec<String> = w
        .kube
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET ") && r.contains("/deployments/"))
        .filter(|r| !r.split('?').next().unwrap_or("").ends_with("/scale"))
        .collect();
    assert!(
        writes.is_empty(),
        "writes to a Deployment beside its scale: {writes:?}"
    );
    assert!(
        events(&w.kube)
            .iter()
            .any(|(r, n)| r == "Parked" && n.contains("idle")),
        "{:?}",
        events(&w.kube)
    );
}

/// Activation → woken to the recorded count within an interval or two,
/// with a Woken Event.
fn wakes_on_activation(w: &mut World) {
    w.set(|l| l.chat_pending = 3);
    let asked = Instant::now();
    eventually("chat woken", || (w.replicas("chat") == 2).then_some(()));
    eprintln!(
        "wake: {:?} from the series change (1 s scrape, 1 s poll, 1 s wake interval)",
        asked.elapsed()
    );
    eventually("a Woken Event", || {
        events(&w.kube)
            .iter()
            .any(|(r, _)| r == "Woken")
            .then_some(())
    });
}

/// cold (parked earlier, its activation active from the start) is woken
/// within the first rounds; it is Waking, with its wake time exported,
/// until a pod is Ready.
fn waking_until_a_pod_is_ready(w: &World) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.replicas("cold") != 1 {
        assert!(
            Instant::now() < deadline,
            "cold not woken: replicas {}, status {}",
            w.replicas("cold"),
            w.status("cold")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eventually("cold Waking with its wake time", || {
        let waking = w.status("cold")["phase"] == "Waking";
        (waking && w.waking_since("cold").is_some()).then_some(())
    });
    w.kube.put(&deployments(), deployment("cold", 1, 1));
    eventually("cold Active once Ready", || {
        let active = w.status("cold")["phase"] == "Active";
        (active && w.waking_since("cold").is_none()).then_some(())
    });
}

/// bursty parks a whole window after its last busy read, not before.
fn parks_a_whole_window_after_the_last_busy_read(w: &World, quiet: Instant) {
    eventually("bursty parked", || {
        (w.replicas("bursty") == 0).then_some(())
    });
    let held = quiet.elapsed();
    assert!(
        held >= Duration::from_secs(5),
        "bursty parked {held:?} after its busy read; its window is 6 s"
    );
}

/// Refusals, each with its reason in the status; the others stay up.
fn refuses_with_a_reason_while_the_others_work(w: &World) {
    eventually("refusal reasons", || {
        let got: Vec<String> = [
            "paused", "warming", "owned", "job", "ghost", "typo", "adhoc", "cold",
        ]
        .iter()
        .map(|p| w.reason(p))
        .collect();
        (got == [
            "Paused",
            "PodsNotReady",
            "HPAOwnsZero",
            "TargetNotScalable",
            "TargetNotFound",
            "UnknownMetric",
            "QueryNotAllowed",
            "MinUpDuration",
        ])
        .then_some(())
    });
    for name in ["paused", "warming", "owned", "cold"] {
        assert_ne!(w.replicas(name), 0, "{name} must not be parked");
    }
    assert_eq!(w.status("ghost")["conditions"][0]["status"], "False");
    assert_eq!(w.status("adhoc")["conditions"][0]["status"], "False");
}

/// `/debug/scalers` and the self-metrics say who leads and count the park,
/// the wake, the refusals and the policies in error.
fn exports_what_it_did(w: &World) {
    let debug = get(&format!(
        "http://127.0.0.1:{}/debug/scalers",
        w.adapter.metrics_port
    ))
    .expect("debug/scalers");
    let debug: Value = serde_json::from_str(&debug.1).expect("JSON");
    assert_eq!(debug["leader"], true);
    let metrics = w.adapter.self_metrics();
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
    assert!(metrics.contains("gpuscale_scale_to_zero_policies{phase=\"Error\"} 4"));
}

/// A cluster holding only the chat Deployment (2 Ready replicas) and its
/// policy, changed by `extra`.
fn chat_cluster(extra: Value) -> KubeFake {
    let kube = fake();
    kube.put(&deployments(), deployment("chat", 2, 2));
    kube.put(
        &policies(),
        policy("chat", "Deployment", "chat", "chat-gw", extra),
    );
    kube
}

/// Prometheus unreachable for longer than the idle window: nothing is
/// parked, and the status says why; a rule given as a PromQL query is as
/// unknown as a configured metric.
#[test]
fn prometheus_down_never_parks() {
    let kube = chat_cluster(
        json!({"idle": {"query": "sum(vllm:num_requests_waiting{${matchers}})", "for": "3s"}}),
    );
    let dead = format!("http://127.0.0.1:{}", gpuscale_e2e::free_port());
    let dir = dir();
    let _adapter = controller(&kube, &dead, "a", &dir, &["--scale-to-zero-allow-queries"]);
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
/// within the lease duration, and nothing is parked or woken twice. The
/// activation rule is a PromQL query (allowed by the flag), read through
/// the same poll cache.
#[test]
fn one_leader_acts_and_the_other_takes_over() {
    let mut load = Load::default();
    let (series, port) = Series::serve(&exposition(load));
    let prom = Prometheus::start(port);
    let kube = chat_cluster(
        json!({"activation": {"query": "sum(gateway_requests_pending{${matchers}})",
                                  "labelSelector": "service=chat-gw"},
               "wake": {"restoreParked": true}}),
    );
    let dir = dir();
    let allow = ["--scale-to-zero-allow-queries"];
    let a = controller(&kube, &prom.url, "a", &dir, &allow);
    let b = controller(&kube, &prom.url, "b", &dir, &allow);
    eventually("parked once", || {
        (replicas(&kube, "chat") == 0).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(kube.scale_patches().len(), 1, "{:?}", kube.scale_patches());
    let leaders: Vec<bool> = [&a, &b].iter().map(|x| leads(x)).collect();
    assert_eq!(leaders.iter().filter(|l| **l).count(), 1, "{leaders:?}");
    let (leader, follower) = if leaders[0] { (a, b) } else { (b, a) };
    let standby = follower.self_metrics();
    assert!(
        standby.contains("gpuscale_scale_to_zero_policies{phase=\"Parked\"} 0"),
        "a standby reports no policy:\n{standby}"
    );
    drop(leader);
    let lost = Instant::now();
    eventually("the follower takes the Lease", || {
        leads(&follower).then_some(())
    });
    eprintln!("takeover after {:?} (lease duration 3 s)", lost.elapsed());
    load.chat_pending = 1;
    series.set(&exposition(load));
    eventually("woken by the new leader", || {
        (replicas(&kube, "chat") == 2).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let patches = kube.scale_patches();
    assert_eq!(patches.len(), 2, "one park, one wake: {patches:?}");
}
