//! `--web-config-file`: TLS and basic auth in the format of the Prometheus
//! exporter-toolkit (`tls_server_config`, `basic_auth_users`), so existing
//! configs carry over. Unknown keys are errors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use serde::Deserialize;

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
    #[serde(default)]
    basic_auth_users: HashMap<String, String>,
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
        for (user, hash) in &file.basic_auth_users {
            if !hash.starts_with("$2") {
                return Err(invalid(format!(
                    "basic_auth_users.{user}: expected a bcrypt hash ($2y$...)"
                )));
            }
        }
        let auth = (!file.basic_auth_users.is_empty()).then(|| BasicAuth {
            users: file.basic_auth_users,
            verified: Mutex::new(HashMap::new()),
        });
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

/// Basic auth against bcrypt hashes. bcrypt is slow by design, so verified
/// credentials are remembered (bounded) to keep scrapes cheap.
pub struct BasicAuth {
    users: HashMap<String, String>,
    verified: Mutex<HashMap<String, bool>>,
}

const CACHE_MAX: usize = 256;

impl BasicAuth {
    /// Checks an `Authorization` header value.
    pub fn check(&self, header: Option<&str>) -> bool {
        let Some(encoded) = header.and_then(|h| h.strip_prefix("Basic ")) else {
            return false;
        };
        if let Some(&ok) = self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(encoded)
        {
            return ok;
        }
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Ok(text) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, pass)) = text.split_once(':') else {
            return false;
        };
        let ok = self
            .users
            .get(user)
            .is_some_and(|hash| bcrypt::verify(pass, hash).unwrap_or(false));
        let mut cache = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(encoded.to_string(), ok);
        ok
    }
}
