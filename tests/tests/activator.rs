//! The activator on real HTTP against the fake Kubernetes API: a parked
//! Deployment whose endpoint turns Ready after a simulated cold start (the
//! test starts the backend when the scale patch arrives), and the issue's
//! stories: 200 requests held through a wake, SSE streaming, bounds,
//! hang-ups, a replica killed mid-wake, no adapter, routing by `model`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_e2e::activator::{
    Activator, Backend, deployment, deployments, response, routes, send, slice, slices,
};
use gpuscale_e2e::kubeapi::{Cluster, KubeFake};
use serde_json::Value;

const NS: &str = "inference";

fn cluster(models: &[&str]) -> KubeFake {
    let fake = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    });
    for m in models {
        fake.put(&deployments(), deployment(NS, m, 0));
        fake.put(&slices(), slice(NS, m, 1, false));
    }
    fake
}

/// An activator "a" with the one route `chat`.
fn chat_activator(dir: &std::path::Path, fake: &KubeFake, flags: &[&str]) -> Activator {
    Activator::start(dir, "a", fake, &routes(NS, &[("chat", None)]), flags)
}

fn pending(route: &str) -> String {
    format!("gpuscale_activator_pending_requests{{namespace=\"inference\",route=\"{route}\"}}")
}

/// Waits for the first scale patch of `name`, then (after `cold`) starts
/// its backend and marks the endpoint Ready.
fn wake_when_patched(fake: &KubeFake, name: &str, cold: Duration) -> (Backend, Instant) {
    wake_slow_backend(fake, name, cold, Duration::ZERO)
}

/// As [`wake_when_patched`], with a backend that answers after `delay`.
fn wake_slow_backend(
    fake: &KubeFake,
    name: &str,
    cold: Duration,
    delay: Duration,
) -> (Backend, Instant) {
    let end = Instant::now() + Duration::from_secs(20);
    let patch = loop {
        if let Some(p) = fake.scale_patches().into_iter().find(|p| p.name == name) {
            break p;
        }
        assert!(Instant::now() < end, "no scale patch for {name}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(patch.replicas, 1, "woken to wakeReplicas");
    std::thread::sleep(cold);
    let backend = Backend::start_with(name, delay);
    fake.put(&slices(), slice(NS, name, backend.port, true));
    (backend, Instant::now())
}

fn chat(port: u16, seq: usize, model: &str) -> std::net::TcpStream {
    let body = format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#);
    send(
        port,
        "/v1/chat/completions",
        "models.test",
        &format!("x-seq: {seq}\r\n"),
        &body,
    )
}

#[test]
fn two_hundred_requests_held_through_a_wake_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["chat"]);
    let a = Activator::start(dir.path(), "a", &fake, &routes(NS, &[("chat", None)]), &[]);
    let first = Instant::now();
    let mut held = Vec::new();
    for i in 0..200 {
        held.push(chat(a.port, i, "m"));
        a.wait_value(&pending("chat"), (i + 1) as f64);
    }
    // The wake signal came within a second of the first held request.
    let patch = fake
        .scale_patches()
        .into_iter()
        .find(|p| p.name == "chat")
        .expect("woken");
    let signal = patch
        .at
        .duration_since(std::time::SystemTime::now() - first.elapsed())
        .unwrap_or_default();
    assert!(
        signal < Duration::from_secs(1),
        "wake signal after {signal:?}"
    );
    assert_eq!(
        fake.scale_patches().len(),
        1,
        "one wake, not one per request"
    );
    let in_flight = "gpuscale_activator_in_flight_requests{namespace=\"inference\",route=\"chat\"}";
    a.wait_value(in_flight, 200.0);
    let (backend, _) = wake_slow_backend(&fake, "chat", Duration::ZERO, Duration::from_secs(1));
    for (i, s) in held.into_iter().enumerate() {
        let (code, _, body) = response(s);
        assert_eq!((code, body.as_str()), (200, "ok chat"), "request {i}");
    }
    let want: Vec<String> = (0..200).map(|i| i.to_string()).collect();
    assert_eq!(backend.seqs(), want, "forwarded in arrival order");
    a.wait_value(&pending("chat"), 0.0);
    a.wait_value(in_flight, 0.0);
    a.wait_value(
        "gpuscale_activator_cold_start_seconds_count{namespace=\"inference\",route=\"chat\"}",
        1.0,
    );
    a.wait_value(
        "gpuscale_activator_held_seconds_count{namespace=\"inference\",route=\"chat\"}",
        200.0,
    );
    a.wait_value(
        "gpuscale_activator_wake_signal_seconds_count{namespace=\"inference\",route=\"chat\"}",
        1.0,
    );
    // Warm now: forwarded at once, with the headers a proxy adds.
    let (code, _, _) = response(chat(a.port, 200, "m"));
    assert_eq!(code, 200);
    let headers = backend.last_headers();
    assert!(headers.contains("x-forwarded-for: 127.0.0.1"), "{headers}");
    assert!(
        headers.contains("x-forwarded-host: models.test"),
        "{headers}"
    );
    assert!(
        !headers.contains("connection: close"),
        "hop-by-hop header forwarded: {headers}"
    );
}

#[test]
fn server_sent_events_stream_token_by_token_and_http2_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&[]);
    let backend = Backend::start("sse");
    fake.put(&deployments(), deployment(NS, "sse", 1));
    fake.put(&slices(), slice(NS, "sse", backend.port, true));
    let a = Activator::start(dir.path(), "a", &fake, &routes(NS, &[("sse", None)]), &[]);
    a.wait_value(
        "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"sse\"}",
        1.0,
    );
    let mut s = send(a.port, "/sse", "models.test", "", "{}");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let mut text = String::new();
    while seen.len() < 6 {
        let n = std::io::Read::read(&mut s, &mut buf).unwrap();
        assert!(n > 0, "stream ended early: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        while seen.len() < 6 && text.contains(&format!("tok{}", seen.len())) {
            seen.push(start.elapsed());
        }
    }
    // Six tokens 150 ms apart: the first arrives long before the last.
    assert!(
        seen[5] - seen[0] > Duration::from_millis(500),
        "buffered: {seen:?}"
    );
    assert!(
        seen[0] < Duration::from_millis(400),
        "first token late: {seen:?}"
    );
    // HTTP/2 in (curl, prior knowledge), HTTP/1.1 to the model.
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--http2-prior-knowledge",
            "-w",
            "\n%{http_version}",
            "-H",
            "Host: models.test",
        ])
        .arg(format!("http://127.0.0.1:{}/v1/models", a.port))
        .output()
        .expect("run curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok sse\n2", "{out:?}");
}

#[test]
fn full_queue_and_wait_limit_answer_503_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["chat"]);
    let flags = [
        "--queue-length=2",
        "--max-wait=1s",
        "--retry-after=7",
        "--max-held-body=100",
    ];
    let a = chat_activator(dir.path(), &fake, &flags);
    let held = [chat(a.port, 0, "m"), chat(a.port, 1, "m")];
    a.wait_value(&pending("chat"), 2.0);
    let (code, head, body) = response(chat(a.port, 2, "m"));
    assert_eq!(code, 503, "{head}\n{body}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 7"),
        "{head}"
    );
    assert!(body.contains("already wait"), "{body}");
    let big = format!(r#"{{"model":"m","pad":"{}"}}"#, "x".repeat(200));
    let (code, _, body) = response(send(a.port, "/", "models.test", "", &big));
    assert_eq!(code, 413, "{body}");
    let started = Instant::now();
    for s in held {
        let (code, head, body) = response(s);
        assert_eq!(code, 503, "{body}");
        assert!(
            head.to_ascii_lowercase().contains("retry-after: 7"),
            "{head}"
        );
        assert!(body.contains("did not become ready"), "{body}");
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    let refused = |r: &str| {
        format!(
            "gpuscale_activator_refused_total{{namespace=\"inference\",reason=\"{r}\",route=\"chat\"}}"
        )
    };
    a.wait_value(&refused("queue_full"), 1.0);
    a.wait_value(&refused("wait_limit"), 2.0);
    a.wait_value(&refused("body_too_large"), 1.0);
    a.wait_value(&pending("chat"), 0.0);
}

#[test]
fn a_client_gone_while_held_leaves_the_queue_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["chat"]);
    let a = Activator::start(dir.path(), "a", &fake, &routes(NS, &[("chat", None)]), &[]);
    let s = chat(a.port, 0, "m");
    let kept = chat(a.port, 1, "m");
    a.wait_value(&pending("chat"), 2.0);
    drop(s);
    a.wait_value(&pending("chat"), 1.0);
    a.wait_value(
        "gpuscale_activator_abandoned_total{namespace=\"inference\",route=\"chat\"}",
        1.0,
    );
    let (backend, _) = wake_when_patched(&fake, "chat", Duration::ZERO);
    assert_eq!(response(kept).0, 200);
    assert_eq!(
        backend.seqs(),
        ["1"],
        "the abandoned request is not forwarded"
    );
}

/// The probe of a client that sends a body of nearly 1 MiB (the default
/// `--max-held-body`) and hangs up while held:
/// the body is read while held, the hang-up seen, the request never
/// reaches the woken model (a generation nobody would read).
#[test]
fn a_client_gone_after_a_large_body_is_never_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["chat"]);
    let a = chat_activator(dir.path(), &fake, &[]);
    let big = format!(
        r#"{{"model":"m","prompt":"{}"}}"#,
        "x".repeat((1 << 20) - 1024)
    );
    let s = send(
        a.port,
        "/v1/completions",
        "models.test",
        "x-seq: 0\r\n",
        &big,
    );
    let kept = chat(a.port, 1, "m");
    a.wait_value(&pending("chat"), 2.0);
    // Both bodies read while held: the large one and chat()'s.
    let small = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#.len();
    a.wait_value(
        "gpuscale_activator_held_body_bytes",
        (big.len() + small) as f64,
    );
    drop(s);
    a.wait_value(
        "gpuscale_activator_abandoned_total{namespace=\"inference\",route=\"chat\"}",
        1.0,
    );
    let (backend, _) = wake_when_patched(&fake, "chat", Duration::ZERO);
    assert_eq!(response(kept).0, 200);
    assert_eq!(
        backend.seqs(),
        ["1"],
        "the abandoned request is not forwarded"
    );
    a.wait_value("gpuscale_activator_held_body_bytes", 0.0);
}

#[test]
fn a_replica_killed_during_a_wake_leaves_the_other_holding() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["chat"]);
    let config = routes(NS, &[("chat", None)]);
    let mut a = Activator::start(dir.path(), "a", &fake, &config, &[]);
    let b = Activator::start(dir.path(), "b", &fake, &config, &[]);
    let lost = chat(a.port, 0, "m");
    a.wait_value(&pending("chat"), 1.0);
    a.proc.child.kill().unwrap();
    let _ = a.proc.child.wait();
    let (code, _, _) = response(lost);
    assert_eq!(
        code, 0,
        "a killed replica's clients see the connection drop"
    );
    // The other replica holds new requests and signals the wake itself.
    let mut held = Vec::new();
    for i in 1..=5 {
        held.push(chat(b.port, i, "m"));
        b.wait_value(&pending("chat"), i as f64);
    }
    b.wait_for("b's own wake signal", || {
        let up = b.value("gpuscale_activator_wakes_total{namespace=\"inference\",result=\"already_up\",route=\"chat\"}")?;
        (up >= 1.0).then_some(())
    });
    let (backend, _) = wake_slow_backend(
        &fake,
        "chat",
        Duration::from_millis(300),
        Duration::from_millis(300),
    );
    for s in held {
        assert_eq!(response(s).0, 200);
    }
    assert_eq!(backend.seqs(), ["1", "2", "3", "4", "5"]);
}

#[test]
fn without_the_adapter_the_activator_holds_and_wakes_by_itself() {
    // No adapter process at all: the wake is the activator's own scale
    // patch, so an adapter outage changes nothing on the wake path.
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["chat"]);
    let a = Activator::start(dir.path(), "a", &fake, &routes(NS, &[("chat", None)]), &[]);
    let s = chat(a.port, 0, "m");
    let (_backend, ready_at) = wake_when_patched(&fake, "chat", Duration::from_millis(500));
    assert_eq!(response(s).0, 200);
    assert!(ready_at.elapsed() < Duration::from_secs(5));
    a.wait_value(
        "gpuscale_activator_wakes_total{namespace=\"inference\",result=\"patched\",route=\"chat\"}",
        1.0,
    );
    // Parked again at once: the next held request wakes it just as fast.
    fake.put(&deployments(), deployment(NS, "chat", 0));
    fake.put(&slices(), slice(NS, "chat", 1, false));
    a.wait_value(
        "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"chat\"}",
        0.0,
    );
    let sent = std::time::SystemTime::now();
    let s = chat(a.port, 1, "m");
    a.wait_value(
        "gpuscale_activator_wakes_total{namespace=\"inference\",result=\"patched\",route=\"chat\"}",
        2.0,
    );
    let second = fake.scale_patches().last().expect("a second patch").at;
    let signal = second.duration_since(sent).unwrap_or_default();
    assert!(
        signal < Duration::from_secs(1),
        "second wake after {signal:?}"
    );
    drop(s);
}

#[test]
fn the_model_field_wakes_only_that_models_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["small", "large"]);
    let config = routes(
        NS,
        &[("small", Some("tiny-1b")), ("large", Some("big-70b"))],
    );
    let a = Activator::start(dir.path(), "a", &fake, &config, &[]);
    let s = chat(a.port, 0, "big-70b");
    let (_backend, _) = wake_when_patched(&fake, "large", Duration::from_millis(200));
    let (code, _, body) = response(s);
    assert_eq!((code, body.as_str()), (200, "ok large"));
    assert!(
        fake.scale_patches().iter().all(|p| p.name == "large"),
        "{:?}",
        fake.scale_patches()
    );
    let (code, _, body) = response(chat(a.port, 1, "other"));
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("other"), "{body}");
    let (code, _, body) = response(send(a.port, "/", "models.test", "", "not json"));
    assert_eq!(code, 400, "{body}");
    assert_eq!(a.value(&pending("small")), Some(0.0));
}

/// A chunked request (no declared length) with `chunks` of `size` bytes,
/// sent in one write: the activator may answer 413 and close before it has
/// read the rest, so a failed write is left for the read of the answer.
fn chunked(port: u16, seq: usize, chunks: usize, size: usize) -> std::net::TcpStream {
    use std::io::Write as _;
    let mut s =
        std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the activator");
    let mut req = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: models.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nx-seq: {seq}\r\n\r\n"
    );
    for _ in 0..chunks {
        req.push_str(&format!("{size:x}\r\n{}\r\n", "x".repeat(size)));
    }
    req.push_str("0\r\n\r\n");
    let _ = s.write_all(req.as_bytes());
    s
}

#[test]
fn a_chunked_body_while_held_is_capped_at_max_held_body() {
    let dir = tempfile::tempdir().unwrap();
    let fake = cluster(&["chat"]);
    let flags = ["--max-held-body=100"];
    let a = chat_activator(dir.path(), &fake, &flags);
    // 3 × 50 bytes, no Content-Length: read while held, refused past 100.
    let (code, _, body) = response(chunked(a.port, 0, 3, 50));
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("over 100 bytes"), "{body}");
    a.wait_value(
        "gpuscale_activator_refused_total{namespace=\"inference\",reason=\"body_too_large\",route=\"chat\"}",
        1.0,
    );
    a.wait_value(&pending("chat"), 0.0);
    // 2 × 40 bytes fit: held, then forwarded whole after the wake.
    let small = chunked(a.port, 1, 2, 40);
    a.wait_value(&pending("chat"), 1.0);
    let (backend, _) = wake_when_patched(&fake, "chat", Duration::ZERO);
    let (code, _, body) = response(small);
    assert_eq!((code, body.as_str()), (200, "ok chat"));
    assert_eq!(backend.seqs(), ["1"]);
    let headers = backend.last_headers();
    assert!(headers.contains("content-length: 80"), "{headers}");
}

#[test]
fn the_chart_grants_a_role_per_fronted_namespace_naming_its_targets() {
    use gpuscale_e2e::deploy::{by_key, helm_render, objects};
    let routes = "routes:\n\
        - {name: a, service: {namespace: ns-a, name: a, port: 80}, target: {kind: Deployment, name: a}}\n\
        - {name: b, service: {namespace: ns-a, name: b, port: 80}, target: {kind: StatefulSet, name: b}}\n\
        - {name: a2, service: {namespace: ns-a, name: a2, port: 80}, target: {kind: Deployment, name: a}}\n\
        - {name: c, service: {namespace: ns-c, name: c, port: 80}, target: {kind: Deployment, name: c}}\n";
    let values = serde_json::json!({"activator": {"enabled": true, "routes": routes}});
    let all = by_key(objects(
        &helm_render(&values, "gpuscale", "gpuscale").unwrap(),
    ));
    assert!(
        all.keys()
            .all(|k| !(k.starts_with("Cluster") && k.ends_with("/gpuscale-activator"))),
        "nothing cluster-wide: {:?}",
        all.keys()
    );
    let rules = |ns: &str| all[&format!("Role/{ns}/gpuscale-activator")]["rules"].clone();
    let scale = |resource: &str, names: &[&str]| {
        serde_json::json!({"apiGroups": ["apps"], "resources": [resource],
            "resourceNames": names, "verbs": ["get", "patch"]})
    };
    let slices = serde_json::json!({"apiGroups": ["discovery.k8s.io"],
        "resources": ["endpointslices"], "verbs": ["list", "watch"]});
    assert_eq!(
        rules("ns-a"),
        serde_json::json!([
            slices,
            scale("deployments/scale", &["a"]),
            scale("statefulsets/scale", &["b"])
        ])
    );
    assert_eq!(
        rules("ns-c"),
        serde_json::json!([slices, scale("deployments/scale", &["c"])])
    );
    for ns in ["ns-a", "ns-c"] {
        let binding = &all[&format!("RoleBinding/{ns}/gpuscale-activator")];
        assert_eq!(binding["roleRef"]["kind"], "Role");
        assert_eq!(binding["subjects"][0]["namespace"], "gpuscale");
    }
    let empty = serde_json::json!({"activator": {"enabled": true, "routes": "routes: []"}});
    let e = helm_render(&empty, "gpuscale", "gpuscale").unwrap_err();
    assert!(e.contains("activator.routes: no routes"), "{e}");
}
