//! Where trust comes from: the client CA and the front-proxy (request-header)
//! CA with its allowed names and header names, read from files or from the
//! `kube-system/extension-apiserver-authentication` ConfigMap, which is
//! re-read periodically so rotated CAs are picked up.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::kube::KubeAuthApi;
use crate::tls::{self, ChainVerifier, TlsError};

/// Trust in `X-Remote-*` headers, given only to certificates that chain to
/// the request-header CA and carry an allowed common name.
#[derive(Debug, Clone)]
pub struct RequestHeaderConfig {
    pub verifier: ChainVerifier,
    /// Allowed common names; empty allows any name signed by the CA.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

/// The trust currently in force.
#[derive(Debug, Clone, Default)]
pub struct CertSources {
    pub requestheader: Option<RequestHeaderConfig>,
    pub client_ca: Option<ChainVerifier>,
}

/// Shared, swappable trust.
pub type SharedSources = Arc<ArcSwap<CertSources>>;

/// Settings from flags (used as is for files, as defaults for the ConfigMap).
#[derive(Debug, Clone)]
pub struct SourceFlags {
    pub client_ca_file: Option<PathBuf>,
    pub requestheader_client_ca_file: Option<PathBuf>,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

impl SourceFlags {
    /// Whether the CAs come from files rather than the ConfigMap.
    pub fn uses_files(&self) -> bool {
        self.client_ca_file.is_some() || self.requestheader_client_ca_file.is_some()
    }
}

/// Trust that cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("ConfigMap kube-system/extension-apiserver-authentication key {key}: {msg}")]
    ConfigMap { key: String, msg: String },
}

fn build(
    flags: &SourceFlags,
    rh_ca: Option<Vec<rustls_pki_types::CertificateDer<'static>>>,
    client_ca: Option<Vec<rustls_pki_types::CertificateDer<'static>>>,
    overrides: [Option<Vec<String>>; 4],
) -> Result<CertSources, SourceError> {
    let [names, users, groups, extras] = overrides;
    let mut allowed = names.unwrap_or_else(|| flags.allowed_names.clone());
    allowed.retain(|n| !n.is_empty());
    let requestheader = rh_ca
        .map(|ca| -> Result<_, SourceError> {
            Ok(RequestHeaderConfig {
                verifier: ChainVerifier::new("requestheader-client-ca", ca)?,
                allowed_names: allowed,
                username_headers: users.unwrap_or_else(|| flags.username_headers.clone()),
                group_headers: groups.unwrap_or_else(|| flags.group_headers.clone()),
                extra_prefixes: extras.unwrap_or_else(|| flags.extra_prefixes.clone()),
            })
        })
        .transpose()?;
    let client_ca = client_ca
        .map(|ca| ChainVerifier::new("client-ca", ca))
        .transpose()?;
    Ok(CertSources {
        requestheader,
        client_ca,
    })
}

/// CAs from the files named by flags.
pub fn from_files(flags: &SourceFlags) -> Result<CertSources, SourceError> {
    let rh = flags
        .requestheader_client_ca_file
        .as_deref()
        .map(tls::read_certs)
        .transpose()?;
    let cl = flags
        .client_ca_file
        .as_deref()
        .map(tls::read_certs)
        .transpose()?;
    build(flags, rh, cl, [None, None, None, None])
}

/// CAs and names from the ConfigMap's data.
pub fn from_configmap(
    flags: &SourceFlags,
    data: &BTreeMap<String, String>,
) -> Result<CertSources, SourceError> {
    let list = |key: &str| -> Result<Option<Vec<String>>, SourceError> {
        data.get(key)
            .map(|v| serde_json::from_str::<Vec<String>>(v))
            .transpose()
            .map_err(|e| SourceError::ConfigMap {
                key: key.into(),
                msg: e.to_string(),
            })
    };
    let pem = |key: &str| -> Result<_, SourceError> {
        Ok(data
            .get(key)
            .map(|p| tls::parse_certs(key, p))
            .transpose()?)
    };
    build(
        flags,
        pem("requestheader-client-ca-file")?,
        pem("client-ca-file")?,
        [
            list("requestheader-allowed-names")?,
            list("requestheader-username-headers")?,
            list("requestheader-group-headers")?,
            list("requestheader-extra-headers-prefix")?,
        ],
    )
}

/// Re-read the ConfigMap every `every`; a failed read keeps the current trust.
pub async fn refresh(
    kube: Arc<KubeAuthApi>,
    flags: SourceFlags,
    shared: SharedSources,
    every: Duration,
) {
    loop {
        tokio::time::sleep(every).await;
        let next = match kube.auth_configmap().await {
            Ok(data) => from_configmap(&flags, &data).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match next {
            Ok(s) => shared.store(Arc::new(s)),
            Err(e) => {
                tracing::warn!(error = %e, "authentication ConfigMap not re-read; keeping the current CAs")
            }
        }
    }
}
