//! Who is asking: front-proxy (request-header) certificates, client-CA
//! certificates, or bearer tokens reviewed by the Kubernetes API.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::HeaderMap;
use rustls_pki_types::CertificateDer;

use super::kube::KubeAuthApi;
use super::sources::{RequestHeaderConfig, SharedSources};
use super::{AuthError, User, x509};

/// Authenticates requests.
pub struct Authenticator {
    sources: SharedSources,
    kube: Option<Arc<KubeAuthApi>>,
    pub token_ttl: Duration,
    tokens: Mutex<HashMap<String, (Instant, Option<User>)>>,
}

impl Authenticator {
    pub fn new(
        sources: SharedSources,
        kube: Option<Arc<KubeAuthApi>>,
        token_ttl: Duration,
    ) -> Self {
        Self {
            sources,
            kube,
            token_ttl,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// The user behind a request: its connection's client certificate chain
    /// (end entity first, possibly empty) and its headers.
    pub async fn authenticate(
        &self,
        certs: &[CertificateDer<'static>],
        headers: &HeaderMap,
    ) -> Result<User, AuthError> {
        let mut why = String::from("no client certificate or bearer token");
        if !certs.is_empty() {
            match self.certificate_user(certs, headers) {
                Ok(user) => return Ok(user),
                Err(e) => why = e,
            }
        }
        if let Some(token) = bearer(headers) {
            return self.token_user(token).await;
        }
        Err(AuthError::Unauthorized(why))
    }

    fn certificate_user(
        &self,
        certs: &[CertificateDer<'static>],
        headers: &HeaderMap,
    ) -> Result<User, String> {
        let subject = certs
            .first()
            .and_then(|c| x509::subject(c))
            .ok_or("client certificate cannot be read")?;
        let cn = subject.common_name.clone().unwrap_or_default();
        let mut errors = Vec::new();
        let sources = self.sources.load();
        if let Some(rh) = &sources.requestheader {
            match rh.verifier.verify(certs) {
                Ok(()) => {
                    if !rh.allowed_names.is_empty() && !rh.allowed_names.contains(&cn) {
                        return Err(format!(
                            "client certificate CN {cn:?} is not an allowed request-header name"
                        ));
                    }
                    return user_from_headers(rh, headers).ok_or_else(|| {
                        "request-header client sent no user name header".to_string()
                    });
                }
                Err(e) => errors.push(format!("request-header CA: {e}")),
            }
        }
        if let Some(ca) = &sources.client_ca {
            match ca.verify(certs) {
                Ok(()) if !cn.is_empty() => {
                    return Ok(User {
                        name: cn,
                        uid: String::new(),
                        groups: subject.organizations,
                        extra: BTreeMap::new(),
                    });
                }
                Ok(()) => errors.push("client certificate has no common name".into()),
                Err(e) => errors.push(format!("client CA: {e}")),
            }
        }
        if errors.is_empty() {
            errors.push("no CA is configured for client certificates".into());
        }
        Err(format!(
            "client certificate not trusted ({})",
            errors.join("; ")
        ))
    }

    async fn token_user(&self, token: &str) -> Result<User, AuthError> {
        let kube = self
            .kube
            .as_ref()
            .ok_or_else(|| AuthError::Unauthorized("bearer tokens are not accepted".into()))?;
        {
            let cache = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, user)) = cache.get(token)
                && at.elapsed() < self.token_ttl
            {
                return user
                    .clone()
                    .ok_or_else(|| AuthError::Unauthorized("invalid bearer token".into()));
            }
        }
        let user = kube.token_review(token).await.map_err(|e| {
            tracing::warn!(error = %e, "TokenReview failed");
            AuthError::Unauthorized("token review failed".into())
        })?;
        {
            let mut cache = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(token.to_string(), (Instant::now(), user.clone()));
        }
        user.ok_or_else(|| AuthError::Unauthorized("invalid bearer token".into()))
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

fn user_from_headers(rh: &RequestHeaderConfig, headers: &HeaderMap) -> Option<User> {
    let name = rh
        .username_headers
        .iter()
        .find_map(|h| {
            headers
                .get(h.as_str())?
                .to_str()
                .ok()
                .filter(|v| !v.is_empty())
        })?
        .to_string();
    let groups = rh
        .group_headers
        .iter()
        .flat_map(|h| headers.get_all(h.as_str()).iter())
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in headers {
        for p in &rh.extra_prefixes {
            let p = p.to_ascii_lowercase();
            if let (Some(key), Ok(v)) = (k.as_str().strip_prefix(&p), v.to_str()) {
                extra
                    .entry(key.to_string())
                    .or_default()
                    .push(v.to_string());
            }
        }
    }
    Some(User {
        name,
        uid: String::new(),
        groups,
        extra,
    })
}
