//! The sleep tier: a route whose model server (the fake vLLM, on vLLM's
//! wire protocol) was put to sleep holds a request, wakes the server with
//! `POST /wake_up` and forwards the request once `/is_sleeping` says false,
//! in about the server's wake time, counted as a wake from sleep and not a
//! cold start. A server without sleep mode is taken as awake.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_activator::metrics::Metrics;
use gpuscale_activator::route::Route;
use gpuscale_activator::sleep::{self, SleepSpec};
use gpuscale_sim::node::vllm::{Asleep, Config, FakeVllm};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

async fn until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One request through `addr`; the status line and how long it took.
async fn send(addr: SocketAddr, method: &str, path: &str) -> (String, Duration) {
    let began = Instant::now();
    let mut c = TcpStream::connect(addr).await.unwrap();
    let body = r#"{"model":"m","prompt":"hi"}"#;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut got)).await;
    let text = String::from_utf8_lossy(&got).into_owned();
    (
        text.lines().next().unwrap_or_default().to_owned(),
        began.elapsed(),
    )
}

fn addr(v: &FakeVllm) -> SocketAddr {
    v.url().trim_start_matches("http://").parse().unwrap()
}

fn route_with_sleep(metrics: &Arc<Metrics>) -> Arc<Route> {
    route_probing_every(metrics, Duration::from_millis(100))
}

fn route_probing_every(metrics: &Arc<Metrics>, probe_interval: Duration) -> Arc<Route> {
    let mut spec = support::spec(None);
    spec.sleep = Some(SleepSpec {
        port: None,
        probe_interval,
        wake_timeout: Duration::from_secs(5),
        level: 1,
        vram: None,
    });
    Route::new(spec, metrics.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_request_wakes_a_sleeping_model_in_its_wake_time() {
    let wake = Duration::from_millis(600);
    let vllm = FakeVllm::start(Config::new("m", wake), &tokio::runtime::Handle::current()).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = route_with_sleep(&metrics);
    route.set_endpoints(vec![addr(&vllm)]);
    tokio::spawn(sleep::run(route.clone(), metrics.clone(), None));
    let proxy = support::proxy(route.clone(), metrics.clone(), support::bounds()).await;
    let (status, _) = send(proxy, "POST", "/v1/completions").await;
    assert!(status.contains(" 200"), "awake: {status}");

    // The controller's sleep stage puts the server to sleep.
    let (status, _) = send(addr(&vllm), "POST", "/sleep?level=1").await;
    assert!(status.contains(" 200"), "{status}");
    let ready = metrics
        .ready_endpoints
        .with_label_values(&["inference", "chat"]);
    until("the sleeping endpoint to be left out", || ready.get() == 0).await;

    let (status, took) = send(proxy, "POST", "/v1/completions").await;
    assert!(status.contains(" 200"), "woken and answered: {status}");
    assert!(
        took >= wake && took < wake + Duration::from_secs(1),
        "{took:?}"
    );
    assert_eq!(vllm.transitions(), (1, 1));
    let woke = metrics.sleep_wake.with_label_values(&["inference", "chat"]);
    assert_eq!(woke.get_sample_count(), 1);
    assert!(woke.get_sample_sum() >= wake.as_secs_f64() && woke.get_sample_sum() < 1.6);
    let cold = metrics.cold_start.with_label_values(&["inference", "chat"]);
    assert_eq!(
        cold.get_sample_count(),
        0,
        "a wake from sleep is no cold start"
    );
    assert_eq!(ready.get(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_sleep_mode_is_taken_as_awake() {
    let mut cfg = Config::new("m", Duration::from_millis(10));
    cfg.sleep_mode = false;
    let vllm = FakeVllm::start(cfg, &tokio::runtime::Handle::current()).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = route_with_sleep(&metrics);
    route.set_endpoints(vec![addr(&vllm)]);
    tokio::spawn(sleep::run(route.clone(), metrics.clone(), None));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ready = metrics
        .ready_endpoints
        .with_label_values(&["inference", "chat"]);
    assert_eq!(ready.get(), 1, "404 on /is_sleeping: awake");
    let proxy = support::proxy(route, metrics.clone(), support::bounds()).await;
    let (status, _) = send(proxy, "POST", "/v1/completions").await;
    assert!(status.contains(" 200"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_reached_a_server_as_it_fell_asleep_is_woken_for_and_answered() {
    let vllm = FakeVllm::start(
        Config::new("m", Duration::from_millis(200)),
        &tokio::runtime::Handle::current(),
    )
    .unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = route_with_sleep(&metrics);
    route.set_endpoints(vec![addr(&vllm)]);
    let proxy = support::proxy(route.clone(), metrics.clone(), support::bounds()).await;
    // Asleep before any probe saw it: the request is forwarded, and the
    // server (vLLM's paused scheduler) keeps it open.
    let (status, _) = send(addr(&vllm), "POST", "/sleep").await;
    assert!(status.contains(" 200"), "{status}");
    let request = tokio::spawn(send(proxy, "POST", "/v1/completions"));
    let open = metrics.in_flight.with_label_values(&["inference", "chat"]);
    until("the request forwarded and open", || open.get() == 1).await;
    assert_eq!(vllm.transitions(), (1, 0));

    // The first probe finds the server asleep under an open request.
    tokio::spawn(sleep::run(route.clone(), metrics.clone(), None));
    let (status, _) = request.await.unwrap();
    assert!(
        status.contains(" 200"),
        "woken for it and answered: {status}"
    );
    assert_eq!(vllm.transitions(), (1, 1));
    let held = metrics.held.with_label_values(&["inference", "chat"]);
    assert_eq!(held.get_sample_count(), 0, "forwarded, never held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_from_a_server_asleep_leaves_it_out_at_once_and_another_503_does_not() {
    let mut cfg = Config::new("m", Duration::from_millis(10));
    cfg.asleep = Asleep::Reject;
    let vllm = FakeVllm::start(cfg, &tokio::runtime::Handle::current()).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = route_with_sleep(&metrics);
    route.set_endpoints(vec![addr(&vllm)]);
    let ready = metrics
        .ready_endpoints
        .with_label_values(&["inference", "chat"]);
    assert!(
        !sleep::answered_asleep(&route, addr(&vllm), &metrics).await,
        "awake: a 503 of its own"
    );
    assert_eq!(ready.get(), 1);
    let (status, _) = send(addr(&vllm), "POST", "/sleep").await;
    assert!(status.contains(" 200"), "{status}");
    let (status, _) = send(addr(&vllm), "POST", "/v1/completions").await;
    assert!(status.contains(" 503"), "{status}");
    assert!(sleep::answered_asleep(&route, addr(&vllm), &metrics).await);
    assert_eq!(ready.get(), 0, "left out before any probe");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_rejects_while_asleep_is_woken_by_the_next_request_not_the_next_probe() {
    let wake = Duration::from_millis(200);
    let mut cfg = Config::new("m", wake);
    cfg.asleep = Asleep::Reject;
    let vllm = FakeVllm::start(cfg, &tokio::runtime::Handle::current()).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    // Probes far apart: only the 503 itself can tell the activator.
    let route = route_probing_every(&metrics, Duration::from_secs(600));
    route.set_endpoints(vec![addr(&vllm)]);
    tokio::spawn(sleep::run(route.clone(), metrics.clone(), None));
    let proxy = support::proxy(route.clone(), metrics.clone(), support::bounds()).await;
    let (status, _) = send(proxy, "POST", "/v1/completions").await;
    assert!(status.contains(" 200"), "awake: {status}");

    let (status, _) = send(addr(&vllm), "POST", "/sleep?level=1").await;
    assert!(status.contains(" 200"), "{status}");
    let (status, _) = send(proxy, "POST", "/v1/completions").await;
    assert!(
        status.contains(" 503"),
        "the server's own answer, passed on: {status}"
    );
    let ready = metrics
        .ready_endpoints
        .with_label_values(&["inference", "chat"]);
    assert_eq!(ready.get(), 0, "left out on that 503, before any probe");

    let (status, took) = send(proxy, "POST", "/v1/completions").await;
    assert!(
        status.contains(" 200"),
        "held, woken and answered: {status}"
    );
    assert!(took >= wake, "{took:?}");
    assert_eq!(vllm.transitions(), (1, 1));
}
