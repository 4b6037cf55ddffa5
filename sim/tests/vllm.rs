//! The fake vLLM on its wire protocol: put to sleep it holds a model
//! request until woken (vLLM's paused scheduler), or answers 503 in vLLM's
//! error shape when configured as earlier releases did; it keeps `/v1/models` and `/health`, releases its VRAM in
//! the NVML simulator's live process list and says so on `/is_sleeping`;
//! `/wake_up` takes its wake time and it answers again. Without sleep mode
//! the endpoints are not there (404); a restart comes back awake.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gpuscale_nvml_sim::live;
use gpuscale_sim::node::vllm::{Asleep, Config, FakeVllm, Vram};

const GPU: &str = "GPU-aaaaaaaa-0000-4000-8000-000000000000";

/// One HTTP/1.1 request; (status, body, how long it took).
fn call(url: &str, method: &str, path: &str) -> (u16, String, Duration) {
    let addr = url.trim_start_matches("http://");
    let began = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let body = if method == "POST" && path.starts_with("/v1/") {
        r#"{"model":"m","prompt":"hello"}"#
    } else {
        ""
    };
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body, began.elapsed())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn a_sleeping_fake_vllm_answers_503_releases_its_vram_and_wakes_in_its_wake_time() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut cfg = Config::new("llama-8b", Duration::from_millis(400));
    cfg.asleep = Asleep::Reject;
    cfg.vram = Some(Vram {
        dir: dir.path().to_owned(),
        uuid: GPU.into(),
        pid: 50_016,
        awake_mib: 24_576,
        asleep_mib: 2_458,
    });
    let vllm = FakeVllm::start(cfg, rt.handle()).expect("the fake starts");
    let url = vllm.url();
    let vram = || live::processes_in(dir.path(), GPU);
    assert_eq!(vram(), [(50_016, 24_576)]);
    assert_eq!(call(&url, "POST", "/v1/completions").0, 200);
    let (_, metrics, _) = call(&url, "GET", "/metrics");
    assert!(
        metrics.contains("vllm:request_success_total{model_name=\"llama-8b\",engine=\"0\",finished_reason=\"stop\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("vllm:num_requests_running{model_name=\"llama-8b\",engine=\"0\"} 0"));

    assert_eq!(
        call(&url, "GET", "/is_sleeping").1,
        r#"{"is_sleeping":false}"#
    );
    let (status, body, _) = call(&url, "POST", "/sleep?level=1");
    assert_eq!((status, body.as_str()), (200, ""));
    assert_eq!(
        call(&url, "GET", "/is_sleeping").1,
        r#"{"is_sleeping":true}"#
    );
    assert_eq!(vram(), [(50_016, 2_458)], "VRAM released");
    let (status, body, _) = call(&url, "POST", "/v1/chat/completions");
    assert_eq!(status, 503, "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(error["error"]["code"], 503, "{body}");
    assert!(error["error"]["message"].is_string(), "{body}");
    assert_eq!(call(&url, "GET", "/v1/models").0, 200);
    assert_eq!(call(&url, "GET", "/health").0, 200);

    let (status, _, took) = call(&url, "POST", "/wake_up");
    assert_eq!(status, 200);
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(
        call(&url, "GET", "/is_sleeping").1,
        r#"{"is_sleeping":false}"#
    );
    assert_eq!(vram(), [(50_016, 24_576)], "VRAM held again");
    assert_eq!(call(&url, "POST", "/v1/completions").0, 200);
    assert_eq!(vllm.transitions(), (1, 1));
    assert_eq!(call(&url, "POST", "/sleep?level=3").0, 400);
    drop(vllm);
    assert!(vram().is_empty(), "a stopped server holds no VRAM");
}

#[test]
fn wake_up_with_tags_wakes_parts_and_a_restart_comes_back_awake() {
    let rt = runtime();
    let mut cfg = Config::new("m", Duration::from_millis(10));
    cfg.asleep = Asleep::Reject;
    let vllm = FakeVllm::start(cfg, rt.handle()).expect("the fake starts");
    let url = vllm.url();
    assert_eq!(call(&url, "POST", "/sleep?level=2").0, 200);
    assert_eq!(call(&url, "POST", "/wake_up?tags=weights").0, 200);
    assert_eq!(
        call(&url, "GET", "/is_sleeping").1,
        r#"{"is_sleeping":true}"#
    );
    assert_eq!(call(&url, "POST", "/v1/completions").0, 503);
    assert_eq!(call(&url, "POST", "/wake_up?tags=kv_cache").0, 200);
    assert_eq!(
        call(&url, "GET", "/is_sleeping").1,
        r#"{"is_sleeping":false}"#
    );
    assert_eq!(call(&url, "POST", "/sleep").0, 200);
    vllm.restart();
    assert_eq!(
        call(&url, "GET", "/is_sleeping").1,
        r#"{"is_sleeping":false}"#
    );
    assert_eq!(call(&url, "POST", "/v1/completions").0, 200);
}

#[test]
fn without_sleep_mode_the_endpoints_are_not_there() {
    let rt = runtime();
    let mut cfg = Config::new("m", Duration::from_millis(10));
    cfg.sleep_mode = false;
    let vllm = FakeVllm::start(cfg, rt.handle()).expect("the fake starts");
    let url = vllm.url();
    for (method, path) in [
        ("POST", "/sleep"),
        ("POST", "/wake_up"),
        ("GET", "/is_sleeping"),
    ] {
        let (status, body, _) = call(&url, method, path);
        assert_eq!(
            (status, body.as_str()),
            (404, r#"{"detail":"Not Found"}"#),
            "{path}"
        );
    }
    assert_eq!(call(&url, "POST", "/v1/completions").0, 200);
}

#[test]
fn a_request_to_a_sleeping_server_waits_for_the_wake_and_is_answered() {
    let rt = runtime();
    let vllm = FakeVllm::start(Config::new("m", Duration::from_millis(300)), rt.handle())
        .expect("the fake starts");
    let url = vllm.url();
    assert_eq!(call(&url, "POST", "/sleep").0, 200);
    let waiting = {
        let url = url.clone();
        std::thread::spawn(move || call(&url, "POST", "/v1/completions"))
    };
    // Not answered while asleep: still open after the others below.
    assert_eq!(call(&url, "GET", "/v1/models").0, 200);
    assert!(!waiting.is_finished(), "answered while asleep");
    let (status, _, _) = call(&url, "POST", "/wake_up");
    assert_eq!(status, 200);
    let (status, body, _) = waiting.join().expect("the waiting request");
    assert_eq!(status, 200, "{body}");
    assert_eq!(vllm.transitions(), (1, 1));

    // Answers held by the story stay in flight until released.
    vllm.hold_answers();
    let held = std::thread::spawn(move || call(&url, "POST", "/v1/completions").0);
    let end = Instant::now() + Duration::from_secs(30);
    while vllm.running() == 0 {
        assert!(Instant::now() < end, "the held request never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    vllm.release_answers();
    assert_eq!(held.join().expect("the held request"), 200);
}
