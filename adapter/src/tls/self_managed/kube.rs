//! The self-managed certificate's Kubernetes calls, each under a timeout:
//! the Secret (read, create if absent, replace at a resourceVersion) and
//! the APIServices' `caBundle`, changed only by a JSON patch that tests
//! the APIService's Service and the bundle it was read with.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::{Value, json};

/// A `namespace/name` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A failed call: its error, or no answer within the timeout.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{what}: {source}")]
    Api { what: String, source: kube::Error },
    #[error("{what}: no answer within {timeout:?}")]
    Timeout { what: String, timeout: Duration },
    #[error("{what}: {msg}")]
    Bad { what: String, msg: String },
}

impl CallError {
    fn code(&self) -> Option<u16> {
        match self {
            Self::Api {
                source: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }
}

/// What an APIService's `caBundle` is, as this replica may change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bundle {
    /// Backed by the Service: its `caBundle` decoded (empty when unset)
    /// and as sent (for the patch's test).
    Ours { pem: Vec<u8>, raw: Value },
    /// Backed by another Service, or local: never touched.
    NotOurs(String),
    /// Absent: nothing to keep.
    Missing,
}

/// The Kubernetes side of the self-managed certificate.
#[derive(Clone)]
pub struct Calls {
    client: kube::Client,
    secret: ObjectRef,
    service: ObjectRef,
    timeout: Duration,
}

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

impl Calls {
    pub fn new(
        client: kube::Client,
        secret: ObjectRef,
        service: ObjectRef,
        timeout: Duration,
    ) -> Self {
        Self {
            client,
            secret,
            service,
            timeout,
        }
    }

    async fn call<T>(
        &self,
        what: impl Fn() -> String,
        f: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, CallError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(CallError::Api {
                what: what(),
                source,
            }),
            Err(_) => Err(CallError::Timeout {
                what: what(),
                timeout: self.timeout,
            }),
        }
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.secret.namespace)
    }

    fn secret_what(&self, verb: &str) -> String {
        format!("{verb} Secret {}", self.secret)
    }

    /// The Secret, or `None` when the API says it does not exist (any
    /// other failure is an error, never "absent").
    pub async fn read_secret(&self) -> Result<Option<Secret>, CallError> {
        let api = self.secrets();
        match self
            .call(|| self.secret_what("get"), api.get(&self.secret.name))
            .await
        {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.code() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the Secret; `false` when another replica created it first.
    pub async fn create_secret(&self, data: BTreeMap<String, Vec<u8>>) -> Result<bool, CallError> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.secret.name.clone()),
                namespace: Some(self.secret.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "gpuscale-adapter".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(encode(data)),
            ..Secret::default()
        };
        let api = self.secrets();
        let pp = PostParams::default();
        match self
            .call(|| self.secret_what("create"), api.create(&pp, &secret))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Replaces the data of `read` (at its resourceVersion): the new
    /// Secret, or `None` when another replica wrote it since.
    pub async fn replace_secret(
        &self,
        read: &Secret,
        data: BTreeMap<String, Vec<u8>>,
    ) -> Result<Option<Secret>, CallError> {
        let mut next = read.clone();
        next.data = Some(encode(data));
        let api = self.secrets();
        let pp = PostParams::default();
        let call = api.replace(&self.secret.name, &pp, &next);
        match self.call(|| self.secret_what("update"), call).await {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.code() == Some(409) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// An APIService's `caBundle`, if it is backed by the Service.
    pub async fn read_bundle(&self, name: &str) -> Result<Bundle, CallError> {
        let what = || format!("get APIService {name}");
        let req = http::Request::get(format!("{APISERVICES}/{name}"))
            .body(Vec::new())
            .map_err(|e| CallError::Bad {
                what: what(),
                msg: e.to_string(),
            })?;
        let obj: Value = match self.call(what, self.client.request(req)).await {
            Ok(v) => v,
            Err(e) if e.code() == Some(404) => return Ok(Bundle::Missing),
            Err(e) => return Err(e),
        };
        let svc = &obj["spec"]["service"];
        if svc["namespace"] != self.service.namespace.as_str()
            || svc["name"] != self.service.name.as_str()
        {
            let backing = match (svc["namespace"].as_str(), svc["name"].as_str()) {
                (Some(ns), Some(n)) => format!("Service {ns}/{n}"),
                _ => "no Service (local)".into(),
            };
            return Ok(Bundle::NotOurs(backing));
        }
        let raw = obj["spec"]["caBundle"].clone();
        let b64 = raw.as_str().unwrap_or_default();
        let pem = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| CallError::Bad {
                what: what(),
                msg: format!("spec.caBundle: {e}"),
            })?;
        Ok(Bundle::Ours { pem, raw })
    }

    /// Sets an APIService's `caBundle` from `was` (as read) to `pem`, if it
    /// is still backed by the Service and still holds `was`; `false` when
    /// it changed since it was read (the JSON patch's test failed).
    pub async fn set_bundle(&self, name: &str, was: &Value, pem: &str) -> Result<bool, CallError> {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let ops = json!([
            {"op": "test", "path": "/spec/service/namespace", "value": self.service.namespace},
            {"op": "test", "path": "/spec/service/name", "value": self.service.name},
            {"op": "test", "path": "/spec/caBundle", "value": was},
            {"op": "add", "path": "/spec/caBundle", "value": b64(pem.as_bytes())},
        ]);
        let what = || format!("patch APIService {name}");
        let req = http::Request::patch(format!("{APISERVICES}/{name}"))
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .body(ops.to_string().into_bytes())
            .map_err(|e| CallError::Bad {
                what: what(),
                msg: e.to_string(),
            })?;
        match self.call(what, self.client.request::<Value>(req)).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.code(), Some(409 | 422)) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn encode(data: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, ByteString> {
    data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()
}

/// A Secret's `data` as bytes.
pub fn decode(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}
