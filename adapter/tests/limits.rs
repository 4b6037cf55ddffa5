//! What one client can make the adapter hold or say: oversized selectors
//! are refused naming the limit (HTTP 400, gRPC INVALID_ARGUMENT) and never
//! echoed; the poll cache stays within its byte budget; streams from one
//! client never lock a new HPA key out; an out-of-range value is an error on
//! every path; `check-config` refuses a FIFO and deep nesting at once.
//! The adapter's own API handler and KEDA listener, a Prometheus fake on
//! the wire.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use gpuscale_adapter::api::Api;
use gpuscale_adapter::config::MetricsConfig;
use gpuscale_adapter::keda::proto::external_scaler_client::ExternalScalerClient;
use gpuscale_adapter::keda::proto::{GetMetricsRequest, ScaledObjectRef};
use gpuscale_adapter::keda::{self, Scaler};
use gpuscale_adapter::prometheus::{
    CacheSettings, ClientSettings, PollCache, PromClient, PromProvider,
};
use gpuscale_adapter::selfmetrics::SelfMetrics;
use gpuscale_conn::Limits;
use http::{HeaderMap, Method, Uri};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tonic::Code;
use tonic::transport::Channel;

/// A Prometheus that answers every instant query with one series: 1.83e300
/// when the query is about namespace `huge`, else 2.
async fn prometheus() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = vec![0u8; 16 * 1024];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&seen);
                let v = if head.contains("%22huge%22") {
                    "1.83e300"
                } else {
                    "2"
                };
                let body = format!(
                    r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1,"{v}"]}}]}}}}"#
                );
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    url
}

struct World {
    cache: Arc<PollCache>,
    metrics: Arc<SelfMetrics>,
    api: Api<PromProvider>,
    config: Arc<MetricsConfig>,
}

async fn world(settings: CacheSettings) -> World {
    let url = prometheus().await;
    let client = PromClient::new(&ClientSettings {
        url,
        bearer_token_file: None,
        ca_file: None,
        headers: vec![],
        timeout: Duration::from_secs(10),
        max_concurrency: 8,
    })
    .unwrap();
    let metrics = Arc::new(SelfMetrics::default());
    let cache = Arc::new(PollCache::new(Arc::new(client), metrics.clone(), settings));
    tokio::spawn(cache.clone().run_poller());
    let config = Arc::new(
        MetricsConfig::parse("metrics:\n  - name: m\n    query: sum(q{${matchers}})\n").unwrap(),
    );
    let api = Api::new(
        PromProvider::new(config.clone(), cache.clone()),
        None,
        metrics.clone(),
    );
    World {
        cache,
        metrics,
        api,
        config,
    }
}

fn settings(max_keys: usize, max_bytes: usize, max_stream_keys: usize) -> CacheSettings {
    CacheSettings {
        poll_interval: Duration::from_secs(60),
        idle_expiry: Duration::from_secs(600),
        refresh_concurrency: 8,
        max_keys,
        max_bytes,
        max_stream_keys,
        query_budget: 0.0,
        batch_size: 1,
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl World {
    /// GET the external metrics API: status and the `Status` message (or body).
    async fn get(&self, namespace: &str, selector: &str) -> (u16, String) {
        let uri: Uri = format!(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/m?labelSelector={}",
            encode(selector)
        )
        .parse()
        .unwrap();
        let resp = self
            .api
            .handle(&Method::GET, &uri, &HeaderMap::new(), &[])
            .await;
        let code = resp.status().as_u16();
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let msg = v["message"]
            .as_str()
            .map_or_else(|| v.to_string(), str::to_string);
        (code, msg)
    }

    /// The KEDA listener (plaintext) on a free port, with `per_client`
    /// streams per client.
    async fn keda(&self, per_client: usize) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let provider = PromProvider::new(self.config.clone(), self.cache.clone());
        let scaler = Scaler::new(Arc::new(provider), self.metrics.clone())
            .with_max_streams_per_client(per_client);
        let limits = Limits {
            max_connections: 64,
            idle_timeout: Duration::from_secs(90),
            handshake_timeout: Duration::from_secs(10),
        };
        tokio::spawn(keda::serve(listener, None, scaler, limits));
        addr
    }

    fn self_metrics(&self) -> String {
        self.metrics.render(&self.cache.report())
    }
}

fn so(namespace: &str, selector: &str) -> ScaledObjectRef {
    ScaledObjectRef {
        name: "chat".into(),
        namespace: namespace.into(),
        scaler_metadata: [("metric", "m"), ("labelSelector", selector)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

async fn client(addr: &str) -> ExternalScalerClient<Channel> {
    ExternalScalerClient::connect(addr.to_string())
        .await
        .unwrap()
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

async fn get_metrics(
    c: &mut ExternalScalerClient<Channel>,
    r: ScaledObjectRef,
) -> Result<f64, tonic::Status> {
    let resp = c
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(r),
            metric_name: "m".into(),
        })
        .await?;
    Ok(resp.into_inner().metric_values[0].metric_value_float)
}

#[tokio::test]
async fn oversized_selectors_are_refused_naming_the_limit_and_never_echoed() {
    let w = world(settings(100, 64 << 20, 100)).await;
    // 60 KB selector on the HTTP API.
    let long = format!("workload={}", "a".repeat(60 * 1024));
    let (code, msg) = w.get("team-a", &long).await;
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("over the limit of 8192"), "{msg}");
    // 10,000 values in one notin, on the HTTP API and over gRPC.
    let values: Vec<String> = (0..10_000).map(|i| format!("w{i}")).collect();
    let many = format!("workload notin ({})", values.join(","));
    assert!(many.len() < 8192 * 10);
    let addr = w.keda(4096).await;
    let mut c = client(&addr).await;
    for sel in [&long, &many] {
        let e = get_metrics(&mut c, so("team-a", sel)).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
        assert!(e.message().contains("limit"), "{}", e.message());
        assert!(e.message().len() < 300, "{}", e.message());
    }
    let hundred_one: Vec<String> = (0..101).map(|i| format!("w{i}")).collect();
    let (code, msg) = w
        .get(
            "team-a",
            &format!("workload notin ({})", hundred_one.join(",")),
        )
        .await;
    assert_eq!(code, 400);
    assert!(msg.contains("more than 100 values"), "{msg}");
    // A 2.4 MB value, an unknown key and a bad namespace are quoted by excerpt.
    for (k, v) in [
        ("targetValue".to_string(), "x".repeat(2_400_000)),
        ("k".repeat(1_000_000), "v".to_string()),
        (
            "labelSelector".to_string(),
            format!("workload={}", "b".repeat(2_400_000)),
        ),
    ] {
        let mut r = so("team-a", "");
        r.scaler_metadata.insert(k, v);
        let e = get_metrics(&mut c, r).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().len() < 300, "{} bytes", e.message().len());
    }
    let e = get_metrics(&mut c, so(&"n".repeat(1_000_000), ""))
        .await
        .unwrap_err();
    assert!(e.message().len() < 300, "{} bytes", e.message().len());
    assert_eq!(w.cache.len(), 0, "no refused request became a key");
}

/// A distinct `workload notin (…)` of 100 values, about 5 KB.
fn five_kb_selector(k: usize) -> String {
    let values: Vec<String> = (0..100)
        .map(|i| format!("{:x<48}", format!("k{k}v{i}")))
        .collect();
    format!("workload notin ({})", values.join(","))
}

#[tokio::test]
async fn the_poll_cache_holds_no_more_bytes_than_its_budget() {
    let budget = 4 << 20;
    let w = world(settings(10_000, budget, 100)).await;
    let (mut served, mut refused) = (0, 0);
    for k in 0..1_000 {
        let sel = five_kb_selector(k);
        assert!((4_900..8_192).contains(&sel.len()), "{}", sel.len());
        match w.get("team-a", &sel).await {
            (200, _) => served += 1,
            (503, msg) => {
                assert!(msg.contains("--max-cached-bytes"), "{msg}");
                refused += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    let usage = w.cache.usage();
    assert!(usage.poll.bytes <= budget, "{usage:?}");
    assert!(usage.poll.bytes > budget * 9 / 10, "{usage:?}");
    assert_eq!(usage.poll.keys, served);
    assert!(
        served > 100 && refused > 100,
        "served {served}, refused {refused}"
    );
    // Each key is charged at least its query and its selector.
    assert!(usage.poll.bytes / served > 2 * 5_000, "{usage:?}");
    let text = w.self_metrics();
    assert!(
        text.contains(&format!(
            "gpuscale_adapter_cached_bytes{{pool=\"poll\"}} {}",
            usage.poll.bytes
        )),
        "{text}"
    );
    assert!(text.contains(&format!("gpuscale_adapter_max_cached_bytes {budget}")));
    // Keys already held are still served.
    assert_eq!(w.get("team-a", &five_kb_selector(0)).await.0, 200);
}

#[tokio::test]
async fn ten_thousand_streams_from_one_client_never_lock_out_a_new_hpa_key() {
    let w = world(settings(20, 64 << 20, 50)).await;
    let addr = w.keda(4096).await;
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(client(&addr).await);
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10_000 {
        let mut c = conns[i % 3].clone();
        tasks.spawn(async move {
            let res = c
                .stream_is_active(so(&format!("ns-{i}"), "workload=chat"))
                .await;
            match res {
                Err(e) => (e.code(), None),
                Ok(resp) => {
                    let mut s = resp.into_inner();
                    match s.message().await {
                        Ok(Some(_)) => (Code::Ok, Some(s)),
                        Ok(None) => (Code::Ok, None),
                        Err(e) => (e.code(), None),
                    }
                }
            }
        });
    }
    let mut open = Vec::new();
    let mut codes = std::collections::BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        let (code, s) = r.unwrap();
        *codes.entry(format!("{code:?}")).or_insert(0) += 1;
        open.extend(s);
    }
    let usage = w.cache.usage();
    assert_eq!(usage.stream.keys, 50, "{usage:?} {codes:?}");
    assert_eq!(open.len(), 50, "{codes:?}");
    assert_eq!(usage.poll.keys, 0, "{usage:?}");
    // With the streams still open, a new HPA key and a new GetMetrics key
    // are served.
    let (code, msg) = w.get("team-b", "workload=chat").await;
    assert_eq!(code, 200, "{msg}");
    let mut c = client(&addr).await;
    assert_eq!(get_metrics(&mut c, so("team-c", "")).await.unwrap(), 2.0);
    // A stream's key that a poll asks for moves to the polls' budget.
    let (code, _) = w.get("ns-0", "workload=chat").await;
    if w.cache.usage().stream.keys < 50 {
        assert_eq!(code, 200);
        assert_eq!(w.cache.usage().poll.keys, 3);
    }
    // Refused streams are counted with their code, never OK.
    let text = w.self_metrics();
    let stream_line = |code: &str| {
        text.lines()
            .find(|l| {
                l.contains("method=\"StreamIsActive\"") && l.contains(&format!("code=\"{code}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
    };
    let refused = stream_line("UNAVAILABLE").unwrap_or(0.0)
        + stream_line("RESOURCE_EXHAUSTED").unwrap_or(0.0);
    assert!(stream_line("UNAVAILABLE").is_some(), "{text}");
    assert_eq!(refused, 9_950.0, "{text}");
    assert_eq!(stream_line("OK"), None, "{text}");
    drop(open);
}

#[tokio::test]
async fn an_out_of_range_value_is_an_error_on_http_and_grpc() {
    let w = world(settings(100, 64 << 20, 100)).await;
    let (code, msg) = w.get("huge", "").await;
    assert_eq!(code, 503, "{msg}");
    assert!(msg.contains("out of range"), "{msg}");
    let addr = w.keda(4096).await;
    let mut c = client(&addr).await;
    let e = get_metrics(&mut c, so("huge", "")).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{}", e.message());
    assert!(e.message().contains("out of range"), "{}", e.message());
    assert_eq!(get_metrics(&mut c, so("team-a", "")).await.unwrap(), 2.0);
}

/// `check-config` on `path`: exit status and stderr, or a failure when it
/// has not exited within 10 s.
fn check_config(path: &std::path::Path) -> (bool, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscale-adapter"))
        .args(["check-config", "--config"])
        .arg(path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.success(), err);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    let _ = child.wait();
    panic!("check-config {} did not exit within 10 s", path.display());
}

#[test]
fn check_config_refuses_a_fifo_and_deep_nesting_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("config.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (ok, err) = check_config(&fifo);
    assert!(!ok);
    assert!(err.contains("not a regular file"), "{err}");
    let deep = dir.path().join("deep.yaml");
    std::fs::write(&deep, "{a: ".repeat(100_000)).unwrap();
    let (ok, err) = check_config(&deep);
    assert!(!ok);
    assert!(err.contains("nest deeper than 64 levels"), "{err}");
    let big = dir.path().join("big.yaml");
    std::fs::write(&big, format!("# {}\n", "x".repeat(2 << 20))).unwrap();
    let (ok, err) = check_config(&big);
    assert!(!ok);
    assert!(err.contains("larger than"), "{err}");
}

#[tokio::test]
async fn one_client_holds_at_most_its_streams_over_all_its_connections() {
    let w = world(settings(20, 64 << 20, 50)).await;
    let addr = w.keda(5).await;
    let mut open = Vec::new();
    let mut refused = Vec::new();
    for i in 0..10 {
        let mut c = client(&addr).await;
        match c
            .stream_is_active(so("team-a", &format!("workload=w{i}")))
            .await
        {
            Ok(resp) => {
                let mut s = resp.into_inner();
                assert!(s.message().await.unwrap().is_some());
                open.push((c, s));
            }
            Err(e) => refused.push(e),
        }
    }
    assert_eq!(open.len(), 5);
    assert_eq!(refused.len(), 5);
    for e in &refused {
        assert_eq!(e.code(), Code::ResourceExhausted, "{}", e.message());
        assert!(e.message().contains("--keda-max-streams-per-client"));
    }
    // A closed stream gives its slot back (once the server sees it closed).
    open.pop();
    let mut c = client(&addr).await;
    let start = std::time::Instant::now();
    loop {
        match c.stream_is_active(so("team-a", "workload=w9")).await {
            Ok(_) => break,
            Err(e) if start.elapsed() < Duration::from_secs(10) => {
                assert_eq!(e.code(), Code::ResourceExhausted);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the slot never came back: {e}"),
        }
    }
}
