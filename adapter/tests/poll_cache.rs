//! The poll cache against a Prometheus HTTP fake: single-flight on a miss,
//! background re-reads, the freshness bound, and empty/NaN never becoming
//! numbers.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuscale_adapter::metric_def::{EmptyPolicy, MetricDef};
use gpuscale_adapter::prometheus::{
    CacheSettings, ClientSettings, Identity, PollCache, PromClient,
};
use gpuscale_adapter::provider::ProviderError;
use gpuscale_adapter::selfmetrics::SelfMetrics;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// What the fake answers.
#[derive(Clone, Copy)]
enum Mode {
    Value(f64),
    Empty,
    NaN,
    Down,
}

struct Fake {
    url: String,
    mode: Arc<Mutex<Mode>>,
    queries: Arc<AtomicUsize>,
    /// Most queries in flight at once.
    peak: Arc<AtomicUsize>,
    /// The head of the last request.
    last: Arc<Mutex<String>>,
}

async fn fake(mode: Mode) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mode = Arc::new(Mutex::new(mode));
    let queries = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(String::new()));
    let (peak, busy) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (m, q, l, p) = (mode.clone(), queries.clone(), last.clone(), peak.clone());
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let (m, q, l, p, b) = (m.clone(), q.clone(), l.clone(), p.clone(), busy.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                *l.lock().unwrap() = String::from_utf8_lossy(&seen).to_ascii_lowercase();
                q.fetch_add(1, Ordering::SeqCst);
                p.fetch_max(b.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                // Long enough for concurrent callers to pile up on a miss.
                tokio::time::sleep(Duration::from_millis(100)).await;
                b.fetch_sub(1, Ordering::SeqCst);
                let mode = *m.lock().unwrap();
                let (status, body) = match mode {
                    Mode::Value(v) => (200, format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1,"{v}"]}}]}}}}"#)),
                    Mode::Empty => (200, r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.to_string()),
                    Mode::NaN => (200, r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#.to_string()),
                    Mode::Down => (500, "internal error".to_string()),
                };
                let resp = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    Fake {
        url,
        mode,
        queries,
        peak,
        last,
    }
}

fn cache(url: &str, poll: Duration) -> Arc<PollCache> {
    cache_with_token(url, poll, None)
}

fn id() -> Identity {
    Identity::default()
}

fn cache_with_token(url: &str, poll: Duration, token: Option<&std::path::Path>) -> Arc<PollCache> {
    cache_with(url, poll, token, 10_000, 0.0)
}

fn cache_with(
    url: &str,
    poll: Duration,
    token: Option<&std::path::Path>,
    max_keys: usize,
    query_budget: f64,
) -> Arc<PollCache> {
    let client = PromClient::new(&ClientSettings {
        url: url.to_string(),
        bearer_token_file: token.map(|p| p.to_path_buf()),
        ca_file: None,
        headers: vec!["X-Scope-OrgID: team-a".into()],
        timeout: Duration::from_secs(10),
        max_concurrency: 4,
    })
    .unwrap();
    Arc::new(PollCache::new(
        Arc::new(client),
        Arc::new(SelfMetrics::default()),
        CacheSettings {
            poll_interval: poll,
            idle_expiry: Duration::from_secs(600),
            refresh_concurrency: 4,
            max_keys,
            max_bytes: 64 << 20,
            max_stream_keys: 1000,
            query_budget,
            // Per-key semantics; batches are read against a real
            // Prometheus in the end-to-end tests.
            batch_size: 1,
        },
    ))
}

fn def(empty: EmptyPolicy, freshness: Duration) -> Arc<MetricDef> {
    Arc::new(MetricDef {
        name: "m".into(),
        query: "q{${matchers}}".into(),
        empty,
        freshness,
        window: Duration::from_secs(60),
        description: String::new(),
        activation: 0.0,
        objects: Default::default(),
        pod_metadata: Default::default(),
        namespace_label: "namespace".into(),
    })
}

/// Wait (without asserting on time) until the fake has answered `n` queries.
async fn queries_reach(f: &Fake, n: usize) {
    while f.queries.load(Ordering::SeqCst) < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the answer of the n-th query land in the cache.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_miss_runs_one_query_however_many_requests_wait() {
    let f = fake(Mode::Value(4.0)).await;
    let c = cache(&f.url, Duration::from_secs(3600));
    let d = def(EmptyPolicy::Error, Duration::from_secs(30));
    let gets = (0..20).map(|_| c.get(d.clone(), "q{namespace=\"a\"}".into(), id()));
    for r in futures::future::join_all(gets).await {
        assert_eq!(r.unwrap()[0].value, 4.0);
    }
    assert_eq!(f.queries.load(Ordering::SeqCst), 1);
    // A later request is answered from memory.
    c.get(d, "q{namespace=\"a\"}".into(), id()).await.unwrap();
    assert_eq!(f.queries.load(Ordering::SeqCst), 1);
    assert_eq!(c.len(), 1);
}

#[tokio::test]
async fn a_failed_reread_keeps_the_last_value_within_its_freshness() {
    let f = fake(Mode::Value(2.5)).await;
    let c = cache(&f.url, Duration::from_millis(50));
    tokio::spawn(c.clone().run_poller());
    let fresh = def(EmptyPolicy::Error, Duration::from_secs(3600));
    assert_eq!(
        c.get(fresh.clone(), "q1".into(), id()).await.unwrap()[0].value,
        2.5
    );
    *f.mode.lock().unwrap() = Mode::Down;
    let seen = f.queries.load(Ordering::SeqCst);
    queries_reach(&f, seen + 2).await;
    assert_eq!(c.get(fresh, "q1".into(), id()).await.unwrap()[0].value, 2.5);
}

#[tokio::test]
async fn past_its_freshness_a_failed_read_is_an_error() {
    let f = fake(Mode::Value(2.5)).await;
    let c = cache(&f.url, Duration::from_millis(50));
    tokio::spawn(c.clone().run_poller());
    let stale = def(EmptyPolicy::Error, Duration::from_millis(1));
    c.get(stale.clone(), "q2".into(), id()).await.ok();
    *f.mode.lock().unwrap() = Mode::Down;
    let seen = f.queries.load(Ordering::SeqCst);
    queries_reach(&f, seen + 2).await;
    let err = c.get(stale, "q2".into(), id()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Unavailable(m) if m.contains("HTTP 500")),
        "{err:?}"
    );
}

#[tokio::test]
async fn empty_and_nan_replace_the_value_with_an_error_at_once() {
    let f = fake(Mode::Value(1.0)).await;
    let c = cache(&f.url, Duration::from_millis(50));
    tokio::spawn(c.clone().run_poller());
    let d = def(EmptyPolicy::Error, Duration::from_secs(3600));
    c.get(d.clone(), "q3".into(), id()).await.unwrap();
    for (mode, needle) in [(Mode::Empty, "no series"), (Mode::NaN, "NaN")] {
        *f.mode.lock().unwrap() = mode;
        let seen = f.queries.load(Ordering::SeqCst);
        queries_reach(&f, seen + 2).await;
        let err = c.get(d.clone(), "q3".into(), id()).await.unwrap_err();
        assert!(
            matches!(&err, ProviderError::Unavailable(m) if m.contains(needle)),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn empty_is_zero_only_when_the_metric_says_so() {
    let f = fake(Mode::Empty).await;
    let c = cache(&f.url, Duration::from_secs(3600));
    let zero = def(EmptyPolicy::Zero, Duration::from_secs(30));
    assert_eq!(c.get(zero, "q4".into(), id()).await.unwrap()[0].value, 0.0);
    let strict = Arc::new(MetricDef {
        name: "strict".into(),
        ..(*def(EmptyPolicy::Error, Duration::from_secs(30))).clone()
    });
    assert!(c.get(strict, "q4".into(), id()).await.is_err());
}

#[tokio::test]
async fn tenant_header_and_rotated_bearer_token_reach_the_backend() {
    let f = fake(Mode::Value(1.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "first-token\n").unwrap();
    let c = cache_with_token(
        &format!("{}/prometheus/", f.url),
        Duration::from_secs(3600),
        Some(&token),
    );
    let d = def(EmptyPolicy::Error, Duration::from_secs(30));
    c.get(d.clone(), "up{namespace=\"a\"}".into(), id())
        .await
        .unwrap();
    let head = f.last.lock().unwrap().clone();
    assert!(
        head.starts_with(
            "get /prometheus/api/v1/query?query=up%7bnamespace%3d%22a%22%7d&timeout=10000ms "
        ),
        "{head}"
    );
    assert!(head.contains("x-scope-orgid: team-a"), "{head}");
    assert!(
        head.contains("authorization: bearer first-token\r\n"),
        "{head}"
    );
    // The file is re-read for every query.
    std::fs::write(&token, "second-token").unwrap();
    c.get(d, "up{namespace=\"b\"}".into(), id()).await.unwrap();
    assert!(
        f.last
            .lock()
            .unwrap()
            .contains("authorization: bearer second-token\r\n")
    );
}

#[tokio::test]
async fn a_full_cache_refuses_new_keys_and_keeps_serving_the_old() {
    let f = fake(Mode::Value(3.0)).await;
    let c = cache_with(&f.url, Duration::from_secs(3600), None, 2, 0.0);
    let d = def(EmptyPolicy::Error, Duration::from_secs(30));
    for q in ["q{a}", "q{b}"] {
        c.get(d.clone(), q.into(), id()).await.unwrap();
    }
    let err = c.get(d.clone(), "q{c}".into(), id()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Unavailable(m) if m.contains("poll cache is full (2 keys, --max-cached-queries)")),
        "{err:?}"
    );
    // KEDA and the scale-to-zero controller read the refusal as unknown,
    // never as idle.
    assert!(matches!(
        gpuscale_adapter::activation::classify(Err(err.clone()), 0.0),
        Ok(gpuscale_adapter::activation::Activity::Unknown(_))
    ));
    // No query was run for the refused key; the old keys are still served.
    assert_eq!(f.queries.load(Ordering::SeqCst), 2);
    assert_eq!(c.get(d, "q{a}".into(), id()).await.unwrap()[0].value, 3.0);
    let report = c.report();
    assert_eq!((report.keys, report.max_keys), (2, 2));
}

#[tokio::test]
async fn the_query_budget_stretches_the_poll_interval() {
    let f = fake(Mode::Value(1.0)).await;
    // 6 keys at 10 queries/s: 0.6 s per round instead of 0.1 s.
    let c = cache_with(&f.url, Duration::from_millis(100), None, 100, 10.0);
    let d = def(EmptyPolicy::Error, Duration::from_secs(3600));
    for i in 0..6 {
        c.get(d.clone(), format!("q{{k{i}}}"), id()).await.unwrap();
    }
    assert_eq!(c.report().poll_interval_secs, 0.1);
    tokio::spawn(c.clone().run_poller());
    queries_reach(&f, 7).await;
    assert_eq!(c.report().poll_interval_secs, 0.6);
}

#[tokio::test]
async fn re_reads_never_exceed_the_configured_concurrency() {
    let f = fake(Mode::Value(1.0)).await;
    let c = cache_with(&f.url, Duration::from_millis(50), None, 100, 0.0);
    let d = def(EmptyPolicy::Error, Duration::from_secs(3600));
    let gets = (0..12).map(|i| c.get(d.clone(), format!("q{{k{i}}}"), id()));
    futures::future::join_all(gets).await;
    tokio::spawn(c.clone().run_poller());
    queries_reach(&f, 40).await;
    // The client's --prometheus-max-concurrency (4 here) bounds misses and re-reads.
    assert!(
        f.peak.load(Ordering::SeqCst) <= 4,
        "{}",
        f.peak.load(Ordering::SeqCst)
    );
}
