//! `--web-config-file`: TLS and basic auth in the format of the Prometheus
//! exporter-toolkit (`tls_server_config`, `basic_auth_users`), so existing
//! configs carry over. Unknown keys are errors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use serde::Deserialize;

use super::auth::BasicAuth;

#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<HashMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
    client_ca_file: Option<PathBuf>,
    #[serde(default = "no_client_cert")]
    client_auth_type: String,
    min_version: Option<String>,
}

fn no_client_cert() -> String {
    "NoClientCert".into()
}

/// What the server enforces.
pub struct WebConfig {
    pub tls: Option<Arc<ServerConfig>>,
    pub auth: Option<BasicAuth>,
}

impl WebConfig {
    pub fn none() -> Self {
        Self {
            tls: None,
            auth: None,
        }
    }

    pub fn load(path: &Path) -> Result<Self, WebConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| WebConfigError::Read {
            path: path.into(),
            source,
        })?;
        let invalid = |message: String| WebConfigError::Invalid {
            path: path.into(),
            message,
        };
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            let de = yaml_serde::Deserializer::from_str(&text);
            serde_path_to_error::deserialize(de)
                .map_err(|e| invalid(format!("{}: {}", e.path(), e.inner())))?
        };
        // Relative paths are relative to the config file, as in exporter-toolkit.
        let base = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            Some(t) => Some(Arc::new(tls_config(&t, base).map_err(invalid)?)),
            None => None,
        };
        let auth = match file.basic_auth_users {
            None => None,
            // An empty map would silently serve without authentication.
            Some(users) if users.is_empty() => {
                return Err(invalid(
                    "basic_auth_users is empty: list at least one user, or remove the key to serve without authentication".into(),
                ));
            }
            Some(users) => Some(BasicAuth::new(users).map_err(invalid)?),
        };
        Ok(Self { tls, auth })
    }
}

fn tls_config(t: &TlsFile, base: &Path) -> Result<ServerConfig, String> {
    let cert_path = base.join(&t.cert_file);
    let key_path = base.join(&t.key_file);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|i| i.collect())
        .map_err(|e| format!("tls_server_config.cert_file {}: {e}", cert_path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "tls_server_config.cert_file {}: no certificate found",
            cert_path.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .map_err(|e| format!("tls_server_config.key_file {}: {e}", key_path.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&'static rustls::SupportedProtocolVersion] = match t.min_version.as_deref() {
        None | Some("TLS12") => &[&rustls::version::TLS13, &rustls::version::TLS12],
        Some("TLS13") => &[&rustls::version::TLS13],
        Some(other) => {
            return Err(format!(
                "tls_server_config.min_version: unsupported '{other}' (TLS12 or TLS13)"
            ));
        }
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match (t.client_auth_type.as_str(), &t.client_ca_file) {
        ("NoClientCert", _) => builder.with_no_client_auth(),
        (kind @ ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven"), Some(ca)) => {
            let ca_path = base.join(ca);
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(&ca_path).map_err(|e| {
                format!(
                    "tls_server_config.client_ca_file {}: {e}",
                    ca_path.display()
                )
            })? {
                let cert = cert.map_err(|e| {
                    format!(
                        "tls_server_config.client_ca_file {}: {e}",
                        ca_path.display()
                    )
                })?;
                roots
                    .add(cert)
                    .map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if kind == "VerifyClientCertIfGiven" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("tls_server_config: {e}"))?,
            )
        }
        (kind @ ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven"), None) => {
            return Err(format!(
                "tls_server_config.client_auth_type {kind} needs client_ca_file"
            ));
        }
        (other, _) => {
            return Err(format!(
                "tls_server_config.client_auth_type: unsupported '{other}' (NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert)"
            ));
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
