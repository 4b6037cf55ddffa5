//! TLS for the API server: certificate files reloaded on change, a
//! self-signed certificate for `--dev`, and client certificates requested
//! but verified per request (so a bad certificate is a 401, not a failed
//! handshake). [`self_managed`]: the adapter's own CA and certificate in a
//! Secret.

pub mod keda;
pub mod self_managed;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

/// A TLS file or setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {msg}")]
    File { path: String, msg: String },
    #[error("TLS set-up: {0}")]
    Setup(String),
}

fn file_err(path: &Path, msg: impl fmt::Display) -> TlsError {
    TlsError::File {
        path: path.display().to_string(),
        msg: msg.to_string(),
    }
}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// All certificates of a PEM file (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(path, e))?;
    if certs.is_empty() {
        return Err(file_err(path, "no PEM certificate found"));
    }
    Ok(certs)
}

/// All certificates of PEM text (for CA bundles read from a ConfigMap).
pub fn parse_certs(what: &str, pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Setup(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::Setup(format!("{what}: no PEM certificate found")));
    }
    Ok(certs)
}

fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, TlsError> {
    CertifiedKey::from_der(certs, key, &provider()).map_err(|e| TlsError::Setup(e.to_string()))
}

/// Load a certificate chain and key from PEM files.
pub fn load_key_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let certs = read_certs(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err(key, e))?;
    certified_key(certs, key)
}

/// A self-signed certificate for `localhost` and 127.0.0.1 (`--dev`).
pub fn self_signed() -> Result<CertifiedKey, TlsError> {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    let key = PrivateKeyDer::try_from(ck.signing_key.serialize_der())
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    certified_key(vec![ck.cert.der().clone()], key)
}

/// Serves the current certificate; [`ReloadingResolver::watch`] swaps it
/// when the files change.
#[derive(Debug)]
pub struct ReloadingResolver {
    current: ArcSwap<CertifiedKey>,
}

impl ReloadingResolver {
    pub fn new(key: CertifiedKey) -> Arc<Self> {
        Arc::new(Self {
            current: ArcSwap::from_pointee(key),
        })
    }

    /// The certificate served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    /// Serves `key` from the next handshake on.
    pub fn set(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }

    /// Poll the files' modification times and reload on change; a broken
    /// file is logged and the previous certificate kept.
    pub async fn watch(self: Arc<Self>, cert: PathBuf, key: PathBuf, every: Duration) {
        let stamp = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let mut last: (Option<SystemTime>, Option<SystemTime>) = (stamp(&cert), stamp(&key));
        loop {
            tokio::time::sleep(every).await;
            let now = (stamp(&cert), stamp(&key));
            if now == last {
                continue;
            }
            match load_key_pair(&cert, &key) {
                Ok(k) => {
                    self.current.store(Arc::new(k));
                    last = now;
                    tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "serving certificate not reloaded; keeping the previous one")
                }
            }
        }
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Asks for a client certificate, checks the handshake signature (proof of
/// possession), and leaves chain verification to the authenticator.
#[derive(Debug)]
pub struct DeferredClientAuth {
    algs: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for DeferredClientAuth {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// The server configuration; `client_auth` requests client certificates.
pub fn server_config(
    resolver: Arc<ReloadingResolver>,
    client_auth: bool,
) -> Result<rustls::ServerConfig, TlsError> {
    let p = provider();
    let builder = rustls::ServerConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    let builder = if client_auth {
        builder.with_client_cert_verifier(Arc::new(DeferredClientAuth {
            algs: p.signature_verification_algorithms,
        }))
    } else {
        builder.with_no_client_auth()
    };
    let mut cfg = builder.with_cert_resolver(resolver);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Verifies client certificate chains against one CA bundle.
#[derive(Clone)]
pub struct ChainVerifier {
    inner: Arc<dyn ClientCertVerifier>,
}

impl fmt::Debug for ChainVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChainVerifier")
    }
}

impl ChainVerifier {
    pub fn new(what: &str, cas: Vec<CertificateDer<'static>>) -> Result<Self, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for c in cas {
            roots
                .add(c)
                .map_err(|e| TlsError::Setup(format!("{what}: {e}")))?;
        }
        let inner = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| TlsError::Setup(format!("{what}: {e}")))?;
        Ok(Self { inner })
    }

    /// Whether `chain` (end entity first) is valid now and chains to the CA.
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (ee, rest) = chain.split_first().ok_or("no client certificate")?;
        self.inner
            .verify_client_cert(ee, rest, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
