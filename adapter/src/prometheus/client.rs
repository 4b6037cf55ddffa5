//! Instant queries against Prometheus or a compatible backend (Thanos,
//! Mimir): optional bearer-token file, CA file and extra headers; a timeout
//! per query and a bound on queries in flight.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use tokio::sync::Semaphore;

/// How to reach the backend.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    pub url: String,
    pub bearer_token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    /// `Name: value` lines.
    pub headers: Vec<String>,
    pub timeout: Duration,
    pub max_concurrency: usize,
}

/// Why a query gave no usable vector.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    #[error("prometheus query timed out after {0:?}")]
    Timeout(Duration),
    #[error("prometheus unreachable: {0}")]
    Transport(String),
    #[error("prometheus answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("prometheus answer not understood: {0}")]
    Decode(String),
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClientBuildError {
    #[error("--prometheus-url {0:?} must start with http:// or https://")]
    Url(String),
    #[error("--prometheus-ca-file {path}: {msg}")]
    Ca { path: String, msg: String },
    #[error("--prometheus-header {0:?}: expected `Name: value`")]
    Header(String),
    #[error("TLS set-up: {0}")]
    Tls(String),
}

/// One series of an instant-vector (or scalar) result.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// An instant query's answer: its series, and whether it was a scalar
/// (one series without labels; a scalar cannot join a batch).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub series: Vec<Series>,
    pub scalar: bool,
}

/// The Prometheus HTTP API client.
pub struct PromClient {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    token_file: Option<PathBuf>,
    timeout: Duration,
    permits: Semaphore,
}

impl PromClient {
    pub fn new(s: &ClientSettings) -> Result<Self, ClientBuildError> {
        let base = s.url.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientBuildError::Url(s.url.clone()));
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match &s.ca_file {
            Some(path) => {
                let ca_err = |msg: String| ClientBuildError::Ca {
                    path: path.display().to_string(),
                    msg,
                };
                let mut roots = rustls::RootCertStore::empty();
                for c in crate::tls::read_certs(path).map_err(|e| ca_err(e.to_string()))? {
                    roots.add(c).map_err(|e| ca_err(e.to_string()))?;
                }
                let tls = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| ClientBuildError::Tls(e.to_string()))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                builder.with_tls_config(tls)
            }
            None => match builder.with_provider_and_native_roots(provider.clone()) {
                Ok(b) => b,
                Err(e) => {
                    tracing::debug!(error = %e, "no native CA roots; https needs --prometheus-ca-file");
                    let tls = rustls::ClientConfig::builder_with_provider(provider)
                        .with_safe_default_protocol_versions()
                        .map_err(|e| ClientBuildError::Tls(e.to_string()))?
                        .with_root_certificates(rustls::RootCertStore::empty())
                        .with_no_client_auth();
                    hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls)
                }
            },
        };
        let connector = builder.https_or_http().enable_http1().build();
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        let mut headers = Vec::new();
        for h in &s.headers {
            let (n, v) = h
                .split_once(':')
                .ok_or_else(|| ClientBuildError::Header(h.clone()))?;
            let n =
                HeaderName::try_from(n.trim()).map_err(|_| ClientBuildError::Header(h.clone()))?;
            let v =
                HeaderValue::try_from(v.trim()).map_err(|_| ClientBuildError::Header(h.clone()))?;
            headers.push((n, v));
        }
        Ok(Self {
            http,
            base,
            headers,
            token_file: s.bearer_token_file.clone(),
            timeout: s.timeout,
            permits: Semaphore::new(s.max_concurrency.max(1)),
        })
    }

    /// Run an instant query now; a scalar result is one series without labels.
    pub async fn query(&self, promql: &str) -> Result<Vec<Series>, QueryError> {
        self.answer(promql).await.map(|a| a.series)
    }

    /// Run an instant query now (GET, as a browser or proxy log shows it).
    pub async fn answer(&self, promql: &str) -> Result<Answer, QueryError> {
        let uri = format!(
            "{}/api/v1/query?query={}&timeout={}ms",
            self.base,
            percent_encode(promql),
            self.timeout.as_millis()
        );
        self.send(Request::get(uri), Bytes::new()).await
    }

    /// Run a long instant query (a batch) as a form POST: URLs of tens of
    /// kilobytes are refused by many proxies in front of Prometheus.
    pub async fn answer_post(&self, promql: &str) -> Result<Answer, QueryError> {
        let uri = format!("{}/api/v1/query", self.base);
        let form = format!(
            "query={}&timeout={}ms",
            percent_encode(promql),
            self.timeout.as_millis()
        );
        let req = Request::post(uri).header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        );
        self.send(req, Bytes::from(form)).await
    }

    async fn send(&self, req: http::request::Builder, body: Bytes) -> Result<Answer, QueryError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|e| QueryError::Transport(e.to_string()))?;
        match tokio::time::timeout(self.timeout, self.send_inner(req, body)).await {
            Ok(r) => r,
            Err(_) => Err(QueryError::Timeout(self.timeout)),
        }
    }

    async fn send_inner(
        &self,
        mut req: http::request::Builder,
        body: Bytes,
    ) -> Result<Answer, QueryError> {
        for (n, v) in &self.headers {
            req = req.header(n, v);
        }
        if let Some(path) = &self.token_file {
            let token = tokio::fs::read_to_string(path).await.map_err(|e| {
                QueryError::Transport(format!("bearer token file {}: {e}", path.display()))
            })?;
            req = req.header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", token.trim()),
            );
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| QueryError::Transport(e.to_string()))?;
        let resp = self
            .http
            .request(req)
            .await
            .map_err(|e| QueryError::Transport(gpuscale_util::error::chain(&e)))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), 16 << 20)
            .collect()
            .await
            .map_err(|e| QueryError::Transport(e.to_string()))?
            .to_bytes();
        // Prometheus answers 400/422 for bad queries with a JSON error body.
        if !(status.is_success() || status == 400 || status == 422) {
            return Err(QueryError::Http {
                status: status.as_u16(),
                body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
            });
        }
        decode_answer(&body)
    }
}

#[derive(Deserialize)]
struct ApiResponse {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default)]
    error: Option<String>,
    /// VictoriaMetrics cluster: some vmstorage nodes did not answer, so
    /// series may be missing (a sum too low, a key empty).
    #[serde(default, rename = "isPartial")]
    is_partial: bool,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum ApiData {
    Vector(Vec<VectorSample>),
    Scalar((f64, String)),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct VectorSample {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// Parse a sample value as Prometheus writes it (`NaN`, `+Inf`, `-Inf`).
pub fn parse_value(s: &str) -> Result<f64, QueryError> {
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => s
            .parse()
            .map_err(|_| QueryError::Decode(format!("sample value {s:?}"))),
    }
}

/// Decode the JSON body of `/api/v1/query`.
fn decode_answer(body: &[u8]) -> Result<Answer, QueryError> {
    let r: ApiResponse =
        serde_json::from_slice(body).map_err(|e| QueryError::Decode(e.to_string()))?;
    if r.status != "success" {
        return Err(QueryError::Decode(format!(
            "query failed: {}",
            r.error.unwrap_or_else(|| r.status.clone())
        )));
    }
    if r.is_partial {
        return Err(QueryError::Decode(
            "partial response (isPartial): some storage nodes did not answer".into(),
        ));
    }
    match r.data {
        Some(ApiData::Vector(v)) => Ok(Answer {
            series: v
                .into_iter()
                .map(|s| {
                    Ok(Series {
                        labels: s.metric,
                        value: parse_value(&s.value.1)?,
                    })
                })
                .collect::<Result<_, QueryError>>()?,
            scalar: false,
        }),
        Some(ApiData::Scalar((_, v))) => Ok(Answer {
            series: vec![Series {
                labels: BTreeMap::new(),
                value: parse_value(&v)?,
            }],
            scalar: true,
        }),
        Some(_) => Err(QueryError::Decode(
            "the query must return an instant vector or a scalar".into(),
        )),
        None => Err(QueryError::Decode("no data".into())),
    }
}

/// Percent-encode a query parameter value (RFC 3986 unreserved kept).
pub fn percent_encode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(body: &[u8]) -> Result<Vec<Series>, QueryError> {
        decode_answer(body).map(|a| a.series)
    }

    #[test]
    fn decodes_vectors_scalars_and_special_values() {
        let v = decode(br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1.5,"NaN"]},{"metric":{},"value":[1.5,"2.5"]}]}}"#).unwrap();
        assert!(v[0].value.is_nan());
        assert_eq!(v[1].value, 2.5);
        let s =
            decode(br#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"+Inf"]}}"#)
                .unwrap();
        assert_eq!(s[0].value, f64::INFINITY);
        assert!(
            decode(br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#).is_err()
        );
        assert!(decode(b"<html>").is_err());
    }

    #[test]
    fn a_partial_answer_is_an_error_never_fewer_series() {
        let full = br#"{"status":"success","isPartial":false,"data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"7"]}]}}"#;
        assert_eq!(decode(full).unwrap()[0].value, 7.0);
        let partial = br#"{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"3"]}]}}"#;
        let err = decode(partial).unwrap_err().to_string();
        assert!(err.contains("partial response"), "{err}");
    }

    #[test]
    fn encodes_queries() {
        assert_eq!(percent_encode("a{b=\"c d\"}"), "a%7Bb%3D%22c%20d%22%7D");
    }
}
