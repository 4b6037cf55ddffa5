//! The `externalscaler.ExternalScaler` service over the provider and poll
//! cache the HTTP API uses, so a (metric, namespace, selector) costs one
//! query however many HPAs, ScaledObjects and push streams ask for it.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status};

use super::clients::{Peer, Slot, StreamSlots};
use super::proto::external_scaler_server::ExternalScaler;
use super::proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use super::trigger::Trigger;
use gpuscale_signals::activation::{self, Activity};
use gpuscale_signals::limits::excerpt;
use gpuscale_signals::metric_def::MetricDef;
use gpuscale_signals::provider::{ProviderError, Reading};
use gpuscale_signals::quantity;
use gpuscale_signals::watch::WatchProvider;

/// A push stream re-sends its state this often (a heartbeat for proxies
/// and for KEDA), besides sending at once when the state changes.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// `--keda-max-streams-per-client`'s default.
pub const DEFAULT_STREAMS_PER_CLIENT: usize = 4096;

/// What the scaler counts (the adapter's self-metrics implement it):
/// each call by method and gRPC code, and the push streams open.
pub trait Counts: Send + Sync + 'static {
    /// One call of `method` answered with `code` (`OK`, `UNAVAILABLE`...).
    fn keda_request(&self, method: &'static str, code: &'static str);
    /// Push streams opened (+1) or closed (-1).
    fn keda_streams(&self, delta: i64);
}

/// The KEDA external scaler, on any [`WatchProvider`].
pub struct Scaler<P> {
    provider: Arc<P>,
    metrics: Arc<dyn Counts>,
    slots: Arc<StreamSlots>,
}

impl<P> Clone for Scaler<P> {
    fn clone(&self) -> Self {
        Self {
            provider: self.provider.clone(),
            metrics: self.metrics.clone(),
            slots: self.slots.clone(),
        }
    }
}

/// One request, checked: the trigger, its definition and threshold.
struct Checked {
    namespace: String,
    trigger: Trigger,
    def: Arc<MetricDef>,
    threshold: f64,
}

fn status(e: ProviderError) -> Status {
    match e {
        ProviderError::UnknownMetric(m) => Status::invalid_argument(format!(
            "scalerMetadata.metric: no metric named {} is configured",
            excerpt(&m)
        )),
        ProviderError::BadRequest(m) => {
            Status::invalid_argument(format!("scalerMetadata.labelSelector: {m}"))
        }
        ProviderError::Unavailable(m) => Status::unavailable(m),
    }
}

fn unknown(why: &str) -> Status {
    Status::unavailable(format!(
        "activity unknown ({why}); gpuscale never reports a workload idle on missing data"
    ))
}

impl<P: WatchProvider> Scaler<P> {
    pub fn new(provider: Arc<P>, metrics: Arc<dyn Counts>) -> Self {
        Self {
            provider,
            metrics,
            slots: StreamSlots::new(DEFAULT_STREAMS_PER_CLIENT),
        }
    }

    /// Bound the streams one client holds open (`--keda-max-streams-per-client`).
    pub fn with_max_streams_per_client(mut self, max: usize) -> Self {
        self.slots = StreamSlots::new(max);
        self
    }

    fn check(&self, r: &ScaledObjectRef) -> Result<Checked, Status> {
        gpuscale_signals::selector::validate_namespace(&r.namespace)
            .map_err(|e| Status::invalid_argument(format!("ScaledObjectRef.namespace: {e}")))?;
        let trigger = Trigger::parse(&r.scaler_metadata)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let def = self
            .provider
            .check(&trigger.metric, &r.namespace, &trigger.selector)
            .map_err(status)?;
        Ok(Checked {
            namespace: r.namespace.clone(),
            threshold: trigger.activation.unwrap_or(def.activation),
            trigger,
            def,
        })
    }

    async fn read(&self, c: &Checked) -> Result<Reading, ProviderError> {
        self.provider
            .get(&c.trigger.metric, &c.namespace, &c.trigger.selector)
            .await
    }

    fn count<T>(&self, method: &'static str, res: Result<T, Status>) -> Result<T, Status> {
        let code = res.as_ref().map_or_else(|s| s.code(), |_| Code::Ok);
        self.metrics.keda_request(method, code_name(code));
        res
    }

    async fn is_active_inner(&self, r: &ScaledObjectRef) -> Result<IsActiveResponse, Status> {
        let c = self.check(r)?;
        match activation::classify(self.read(&c).await, c.threshold).map_err(status)? {
            Activity::Active => Ok(IsActiveResponse { result: true }),
            Activity::Inactive => Ok(IsActiveResponse { result: false }),
            Activity::Unknown(why) => Err(unknown(&why)),
        }
    }

    fn metric_spec(&self, r: &ScaledObjectRef) -> Result<GetMetricSpecResponse, Status> {
        let c = self.check(r)?;
        let target = c.trigger.target.ok_or_else(|| {
            Status::invalid_argument(
                "scalerMetadata.targetValue: missing (the value per replica the HPA aims at)",
            )
        })?;
        Ok(GetMetricSpecResponse {
            metric_specs: vec![MetricSpec {
                metric_name: c.def.name.clone(),
                target_size: round_up(target),
                target_size_float: target,
            }],
        })
    }

    async fn metrics_inner(&self, req: &GetMetricsRequest) -> Result<GetMetricsResponse, Status> {
        let r = req
            .scaled_object_ref
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("scaledObjectRef: missing"))?;
        let c = self.check(r)?;
        if !req.metric_name.is_empty() && !req.metric_name.eq_ignore_ascii_case(&c.def.name) {
            return Err(Status::invalid_argument(format!(
                "metricName: {} is not this trigger's metric ({})",
                excerpt(&req.metric_name),
                c.def.name
            )));
        }
        let reading = self.read(&c).await.map_err(status)?;
        let value = activation::total(&reading).map_err(|why| unknown(&why))?;
        let value = quantity::check(value).map_err(|e| {
            Status::unavailable(format!(
                "metric {}: {e}; gpuscale never reports a clamped number",
                c.def.name
            ))
        })?;
        Ok(GetMetricsResponse {
            metric_values: vec![MetricValue {
                metric_name: c.def.name.clone(),
                metric_value: round_up(value),
                metric_value_float: value,
            }],
        })
    }
}

/// Rounded up, so a small positive value never reads as 0 (KEDA reads the
/// int64 when the float is not above 0).
fn round_up(v: f64) -> i64 {
    v.ceil() as i64
}

/// gRPC's canonical code names, for the self-metrics.
fn code_name(c: Code) -> &'static str {
    match c {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::NotFound => "NOT_FOUND",
        Code::Unavailable => "UNAVAILABLE",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Unauthenticated => "UNAUTHENTICATED",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

type Push = Pin<Box<dyn Stream<Item = Result<IsActiveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl<P: WatchProvider> ExternalScaler for Scaler<P> {
    async fn is_active(
        &self,
        req: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        let res = self.is_active_inner(req.get_ref()).await;
        self.count("IsActive", res).map(Response::new)
    }

    type StreamIsActiveStream = Push;

    async fn stream_is_active(
        &self,
        req: Request<ScaledObjectRef>,
    ) -> Result<Response<Push>, Status> {
        // Counted when the stream ends, with the code it ends with; a
        // stream refused at once is counted here. Opening and closing log
        // at debug: KEDA's churn would be thousands of lines a second.
        let opened = self.check(req.get_ref()).and_then(|c| {
            let slot = self.slots.acquire(req.extensions().get::<Peer>().copied())?;
            tracing::debug!(namespace = %c.namespace, scaledobject = %excerpt(&req.get_ref().name), metric = %c.def.name, "push stream opened");
            Ok(PushState::new(self.clone(), c, slot).into_stream())
        });
        if let Err(e) = &opened {
            self.metrics
                .keda_request("StreamIsActive", code_name(e.code()));
        }
        opened.map(Response::new)
    }

    async fn get_metric_spec(
        &self,
        req: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        let res = self.metric_spec(req.get_ref());
        self.count("GetMetricSpec", res).map(Response::new)
    }

    async fn get_metrics(
        &self,
        req: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let res = self.metrics_inner(req.get_ref()).await;
        self.count("GetMetrics", res).map(Response::new)
    }

    type StreamMetricSpecStream =
        Pin<Box<dyn Stream<Item = Result<GetMetricSpecResponse, Status>> + Send>>;

    async fn stream_metric_spec(
        &self,
        _req: Request<ScaledObjectRef>,
    ) -> Result<Response<Self::StreamMetricSpecStream>, Status> {
        self.count(
            "StreamMetricSpec",
            Err(Status::unimplemented(
                "StreamMetricSpec is not served; poll GetMetricSpec",
            )),
        )
    }
}

/// One open `StreamIsActive`: it wakes after every re-read of its key (or
/// at the heartbeat), sends `true`/`false` when the state changes or the
/// heartbeat is due, and sends nothing while the state is unknown.
/// Dropped when the client goes away, which closes the stream's count.
struct PushState<P> {
    scaler: Scaler<P>,
    c: Checked,
    changes: Option<watch::Receiver<u64>>,
    sent: Option<bool>,
    beat: Instant,
    open: OpenStream,
    _slot: Slot,
}

impl<P: WatchProvider> PushState<P> {
    fn new(scaler: Scaler<P>, c: Checked, slot: Slot) -> Self {
        let open = OpenStream::new(scaler.metrics.clone());
        Self {
            scaler,
            c,
            changes: None,
            sent: None,
            beat: Instant::now() + HEARTBEAT,
            open,
            _slot: slot,
        }
    }

    /// The stream of states; it ends after its first error (the status
    /// KEDA sees, and the code it is counted with).
    fn into_stream(self) -> Push {
        Box::pin(futures::stream::unfold(Some(self), |s| async move {
            let mut s = s?;
            match s.next().await {
                Ok(msg) => Some((Ok(msg), Some(s))),
                Err(status) => {
                    s.open.end = code_name(status.code());
                    Some((Err(status), None))
                }
            }
        }))
    }

    async fn next(&mut self) -> Result<IsActiveResponse, Status> {
        loop {
            let beat = self.wait().await;
            let c = &self.c;
            let watched = self
                .scaler
                .provider
                .watch(&c.trigger.metric, &c.namespace, &c.trigger.selector)
                .await
                .map_err(status)?;
            self.changes = Some(watched.changes);
            let state = match activation::classify(watched.reading, c.threshold).map_err(status)? {
                Activity::Active => true,
                Activity::Inactive => false,
                Activity::Unknown(why) => {
                    tracing::debug!(namespace = %c.namespace, metric = %c.def.name, %why, "push stream: activity unknown, nothing sent");
                    continue;
                }
            };
            if beat || self.sent != Some(state) {
                self.sent = Some(state);
                self.beat = Instant::now() + HEARTBEAT;
                return Ok(IsActiveResponse { result: state });
            }
        }
    }

    /// Until the key is re-read or the heartbeat is due (at once the first
    /// time); true when the heartbeat is due.
    async fn wait(&mut self) -> bool {
        let Some(rx) = self.changes.as_mut() else {
            return false;
        };
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    // The key left the cache; the next read re-creates it.
                    self.changes = None;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                false
            }
            _ = tokio::time::sleep_until(self.beat) => {
                self.beat = Instant::now() + HEARTBEAT;
                true
            }
        }
    }
}

/// Counts an open push stream while it lives, and the call when it ends:
/// with the code of the error that ended it, else `CANCELLED` (the client
/// went away, the only other way a stream ends).
struct OpenStream {
    metrics: Arc<dyn Counts>,
    end: &'static str,
}

impl OpenStream {
    fn new(metrics: Arc<dyn Counts>) -> Self {
        metrics.keda_streams(1);
        Self {
            metrics,
            end: "CANCELLED",
        }
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.metrics.keda_streams(-1);
        self.metrics.keda_request("StreamIsActive", self.end);
        tracing::debug!(code = self.end, "push stream closed");
    }
}
