//! A fake vLLM server on vLLM's wire protocol, for the sleep tier's
//! stories: its OpenAI-compatible model endpoints, `/metrics` with vLLM's
//! series names and labels, and sleep mode's development endpoints as
//! vLLM's API server has them (`vllm/entrypoints/openai/api_server.py`,
//! registered only with `VLLM_SERVER_DEV_MODE=1` and `--enable-sleep-mode`):
//!
//! - `POST /sleep?level=N` (default 1): answers 200 with an empty body once
//!   the engine sleeps (the configured sleep time);
//! - `POST /wake_up` (optionally `?tags=weights`, `?tags=kv_cache`, both may
//!   repeat): answers 200 with an empty body once awake (the wake time; a
//!   level-2 sleep's reload time); with tags only those parts wake, and the
//!   engine is awake once both have;
//! - `GET /is_sleeping`: `{"is_sleeping": true|false}`.
//!
//! A server started without sleep mode answers those paths 404
//! (`{"detail":"Not Found"}`, as FastAPI does for a route never
//! registered). While asleep or waking, a model request
//! (`/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`) is what
//! [`Asleep`] says: by default it waits until the engine is awake and is
//! then answered, as vLLM does (its `/sleep` pauses the engine's scheduler,
//! `vllm/v1/engine/core.py` `sleep` → `pause_scheduler`, and a request
//! added meanwhile is scheduled once `/wake_up` resumes it; vLLM itself
//! answers no 503 for it); [`Asleep::Reject`] answers 503 instead, as the
//! "protected endpoints" of earlier vLLM releases did
//! (`docs/source/features/sleep_mode.md`), in vLLM's error shape
//! (`ErrorResponse{error: ErrorInfo}`, `vllm/entrypoints/openai/protocol.py`).
//! `/v1/models` and `/health` keep answering. The server's VRAM is a live
//! process of the NVML simulator ([`gpuscale_nvml_sim::live`]): its awake
//! figure while awake, waking or falling asleep, its asleep figure once
//! asleep.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;

/// The VRAM the server holds, as a live process of the NVML simulator.
#[derive(Debug, Clone, PartialEq)]
pub struct Vram {
    /// The live processes' directory (`GPUSCALE_SIM_LIVE_PROCESSES`).
    pub dir: PathBuf,
    /// The GPU (or MIG instance) the server runs on.
    pub uuid: String,
    pub pid: u32,
    pub awake_mib: u64,
    pub asleep_mib: u64,
}

/// What a model request gets while the engine sleeps or wakes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Asleep {
    /// Accepted and answered once awake (vLLM's paused scheduler).
    #[default]
    Queue,
    /// `503` at once (earlier releases' protected endpoints).
    Reject,
}

/// How the fake server behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The served model name (`--served-model-name`), the `model_name` label.
    pub model: String,
    /// Started with `--enable-sleep-mode` and `VLLM_SERVER_DEV_MODE=1`.
    pub sleep_mode: bool,
    /// `POST /sleep` until the engine sleeps.
    pub sleep: Duration,
    /// `POST /wake_up` until awake after a level-1 sleep.
    pub wake: Duration,
    /// The same after a level-2 sleep (the weights reloaded).
    pub reload: Duration,
    /// How long a completion takes to answer.
    pub answer: Duration,
    /// A model request while asleep or waking.
    pub asleep: Asleep,
    pub vram: Option<Vram>,
}

impl Config {
    /// A server with sleep mode, waking in `wake`; no VRAM published.
    pub fn new(model: &str, wake: Duration) -> Self {
        Self {
            model: model.to_owned(),
            sleep_mode: true,
            sleep: Duration::from_millis(50),
            wake,
            reload: wake * 3,
            answer: Duration::from_millis(20),
            asleep: Asleep::Queue,
            vram: None,
        }
    }
}

/// The engine's state.
#[derive(Debug, Clone, Default, PartialEq)]
struct State {
    /// The level it sleeps at; `None` awake.
    asleep: Option<u8>,
    /// A wake in progress: model endpoints still answer 503.
    waking: bool,
    /// Parts woken by `?tags=` since the sleep.
    woken: Vec<String>,
    running: u64,
    success: u64,
    prompt_tokens: u64,
    generation_tokens: u64,
    sleeps: u64,
    wakes: u64,
    rejected: u64,
    /// Completions are not answered until [`FakeVllm::release_answers`].
    holding: bool,
}

struct Shared {
    cfg: Config,
    state: Mutex<State>,
    /// Wakes requests waiting for the engine (awake, or answers released).
    changed: tokio::sync::Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the VRAM held now (awake or asleep).
    fn publish(&self, awake: bool) {
        let Some(v) = &self.cfg.vram else { return };
        let mib = if awake { v.awake_mib } else { v.asleep_mib };
        if let Err(e) = gpuscale_nvml_sim::live::write(&v.dir, &v.uuid, v.pid, mib) {
            tracing::warn!(error = %e, pid = v.pid, "fake vLLM: VRAM not published");
        }
    }
}

/// A running fake vLLM server; its live process goes when it is dropped.
pub struct FakeVllm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeVllm {
    /// Binds 127.0.0.1 on a free port and serves on `rt`, awake.
    ///
    /// # Errors
    /// When no port can be bound.
    pub fn start(cfg: Config, rt: &tokio::runtime::Handle) -> std::io::Result<Self> {
        Self::start_at(cfg, SocketAddr::from(([127, 0, 0, 1], 0)), rt)
    }

    /// Binds `addr` (a simulated pod's address and port) and serves on
    /// `rt`, awake.
    ///
    /// # Errors
    /// When `addr` cannot be bound (in use, or not an address of this
    /// machine).
    pub fn start_at(
        cfg: Config,
        addr: SocketAddr,
        rt: &tokio::runtime::Handle,
    ) -> std::io::Result<Self> {
        let std_listener = std::net::TcpListener::bind(addr)?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let shared = Arc::new(Shared {
            cfg,
            state: Mutex::new(State::default()),
            changed: tokio::sync::Notify::new(),
        });
        shared.publish(true);
        let serving = shared.clone();
        let task = rt.spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(std_listener) {
                Ok(l) => l,
                Err(e) => return tracing::warn!(error = %e, "fake vLLM: not listening"),
            };
            accept(listener, serving).await;
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://<address>:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn is_sleeping(&self) -> bool {
        self.shared.state().asleep.is_some()
    }

    /// (sleeps, wakes) completed so far.
    pub fn transitions(&self) -> (u64, u64) {
        let s = self.shared.state();
        (s.sleeps, s.wakes)
    }

    /// The process restarted (a pod's container restarted): a new engine,
    /// awake, holding its awake VRAM; counters start again.
    pub fn restart(&self) {
        *self.shared.state() = State::default();
        self.shared.publish(true);
        self.shared.changed.notify_waiters();
    }

    /// Completions taken from now on are not answered until
    /// [`FakeVllm::release_answers`] (a request kept in flight for a story).
    pub fn hold_answers(&self) {
        self.shared.state().holding = true;
    }

    pub fn release_answers(&self) {
        self.shared.state().holding = false;
        self.shared.changed.notify_waiters();
    }

    /// Model requests being served now (`vllm:num_requests_running`).
    pub fn running(&self) -> u64 {
        self.shared.state().running
    }
}

impl Drop for FakeVllm {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(v) = &self.shared.cfg.vram {
            let _ = gpuscale_nvml_sim::live::remove(&v.dir, &v.uuid, v.pid);
        }
    }
}

async fn accept(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "fake vLLM: accept failed");
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| respond(shared.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "fake vLLM: connection ended");
            }
        });
    }
}

type Answer = Response<Full<Bytes>>;

fn answer(status: StatusCode, content_type: &'static str, body: String) -> Answer {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    resp
}

fn json_answer(status: StatusCode, v: &serde_json::Value) -> Answer {
    answer(status, "application/json", v.to_string())
}

fn empty() -> Answer {
    answer(StatusCode::OK, "application/json", String::new())
}

fn not_found() -> Answer {
    json_answer(StatusCode::NOT_FOUND, &json!({"detail": "Not Found"}))
}

const SLEEP_PATHS: [&str; 3] = ["/sleep", "/wake_up", "/is_sleeping"];
const MODEL_PATHS: [&str; 3] = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"];

async fn respond(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Answer, Infallible> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let method = req.method().clone();
    // The body is read whole first (a model request's JSON).
    let body = req.into_body().collect().await.map(|b| b.to_bytes());
    if SLEEP_PATHS.contains(&path.as_str()) && !shared.cfg.sleep_mode {
        return Ok(not_found());
    }
    Ok(match (method, path.as_str()) {
        (Method::POST, "/sleep") => sleep(&shared, &query).await,
        (Method::POST, "/wake_up") => wake_up(&shared, &query).await,
        (Method::GET, "/is_sleeping") => {
            let asleep = shared.state().asleep.is_some();
            json_answer(StatusCode::OK, &json!({"is_sleeping": asleep}))
        }
        (Method::POST, p) if MODEL_PATHS.contains(&p) => {
            let tokens = body.map_or(0, |b| b.len() as u64 / 4);
            complete(&shared, p, tokens).await
        }
        (Method::GET, "/v1/models") => json_answer(
            StatusCode::OK,
            &json!({"object": "list", "data": [
                {"id": shared.cfg.model, "object": "model", "owned_by": "vllm", "root": shared.cfg.model}
            ]}),
        ),
        (Method::GET, "/health") => answer(StatusCode::OK, "application/json", String::new()),
        (Method::GET, "/metrics") => answer(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics(&shared),
        ),
        _ => not_found(),
    })
}

/// `level` from the query: 1 when absent.
fn level(query: &str) -> Result<u8, String> {
    match params(query, "level").first().map(String::as_str) {
        None => Ok(1),
        Some("1") => Ok(1),
        Some("2") => Ok(2),
        Some(v) => Err(format!("level {v:?}: 1 or 2")),
    }
}

/// The values of `name` in a query string (repeated keys kept).
fn params(query: &str, name: &str) -> Vec<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
        .collect()
}

async fn sleep(shared: &Shared, query: &str) -> Answer {
    let level = match level(query) {
        Ok(l) => l,
        Err(e) => return json_answer(StatusCode::BAD_REQUEST, &json!({"detail": e})),
    };
    tokio::time::sleep(shared.cfg.sleep).await;
    {
        let mut s = shared.state();
        if s.asleep.is_none() {
            s.sleeps += 1;
        }
        s.asleep = Some(s.asleep.map_or(level, |l| l.max(level)));
        s.woken.clear();
    }
    shared.publish(false);
    empty()
}

async fn wake_up(shared: &Shared, query: &str) -> Answer {
    let tags = params(query, "tags");
    let level = {
        let mut s = shared.state();
        let Some(level) = s.asleep else {
            return empty();
        };
        s.waking = true;
        level
    };
    // The memory comes back first, then the weights are copied in.
    shared.publish(true);
    let took = if level == 2 {
        shared.cfg.reload
    } else {
        shared.cfg.wake
    };
    tokio::time::sleep(took).await;
    let mut s = shared.state();
    s.waking = false;
    let all = ["weights", "kv_cache"];
    if tags.is_empty() {
        s.woken = all.map(str::to_owned).to_vec();
    } else {
        s.woken.extend(tags);
    }
    if all.iter().all(|t| s.woken.iter().any(|w| w == t)) && s.asleep.is_some() {
        s.asleep = None;
        s.wakes += 1;
    }
    drop(s);
    shared.changed.notify_waiters();
    empty()
}

/// A model request enters the engine (counted running): at once while
/// awake; while asleep or waking it waits until awake ([`Asleep::Queue`])
/// or gets vLLM's 503 error ([`Asleep::Reject`]).
async fn admitted(shared: &Shared) -> Result<(), Answer> {
    loop {
        let changed = shared.changed.notified();
        {
            let mut s = shared.state();
            if s.asleep.is_none() && !s.waking {
                s.running += 1;
                return Ok(());
            }
            if shared.cfg.asleep == Asleep::Reject {
                s.rejected += 1;
                let msg = "The model is sleeping; wake it with POST /wake_up";
                let body = json!({"error": {"message": msg, "type": "ServiceUnavailableError", "param": null, "code": 503}});
                return Err(json_answer(StatusCode::SERVICE_UNAVAILABLE, &body));
            }
        }
        changed.await;
    }
}

async fn complete(shared: &Shared, path: &str, prompt_tokens: u64) -> Answer {
    if let Err(rejected) = admitted(shared).await {
        return rejected;
    }
    loop {
        let changed = shared.changed.notified();
        if !shared.state().holding {
            break;
        }
        changed.await;
    }
    tokio::time::sleep(shared.cfg.answer).await;
    let generated = 16;
    {
        let mut s = shared.state();
        s.running = s.running.saturating_sub(1);
        s.success += 1;
        s.prompt_tokens += prompt_tokens;
        s.generation_tokens += generated;
    }
    let object = if path.ends_with("chat/completions") {
        "chat.completion"
    } else {
        "text_completion"
    };
    json_answer(
        StatusCode::OK,
        &json!({"id": "cmpl-fake", "object": object, "model": shared.cfg.model,
                "choices": [{"index": 0, "text": "ok", "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": generated, "total_tokens": prompt_tokens + generated}}),
    )
}

/// vLLM's own series names and labels (`model_name`, `engine`, in that
/// order; `vllm/v1/metrics/loggers.py`).
fn metrics(shared: &Shared) -> String {
    let s = shared.state().clone();
    let labels = format!(
        "model_name=\"{}\",engine=\"0\"",
        shared.cfg.model.replace('"', "\\\"")
    );
    let kv = if s.asleep.is_some() {
        0.0
    } else {
        s.running.min(64) as f64 / 64.0
    };
    let gauge = |name: &str, help: &str, v: f64| {
        format!(
            "# HELP vllm:{name} {help}\n# TYPE vllm:{name} gauge\nvllm:{name}{{{labels}}} {v}\n"
        )
    };
    let counter = |name: &str, help: &str, extra: &str, v: u64| {
        format!(
            "# HELP vllm:{name}_total {help}\n# TYPE vllm:{name}_total counter\nvllm:{name}_total{{{labels}{extra}}} {v}\n"
        )
    };
    [
        gauge(
            "num_requests_running",
            "Number of requests in model execution batches.",
            s.running as f64,
        ),
        gauge(
            "num_requests_waiting",
            "Number of requests waiting to be processed.",
            0.0,
        ),
        gauge(
            "kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            kv,
        ),
        counter(
            "request_success",
            "Count of successfully processed requests.",
            ",finished_reason=\"stop\"",
            s.success,
        ),
        counter(
            "prompt_tokens",
            "Number of prefill tokens processed.",
            "",
            s.prompt_tokens,
        ),
        counter(
            "generation_tokens",
            "Number of generation tokens processed.",
            "",
            s.generation_tokens,
        ),
    ]
    .concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_as_fastapi_reads_them() {
        assert_eq!(level(""), Ok(1));
        assert_eq!(level("level=2"), Ok(2));
        assert!(level("level=3").is_err());
        assert_eq!(
            params("tags=weights&tags=kv_cache", "tags"),
            ["weights", "kv_cache"]
        );
    }
}
