//! The HTTPS side: a self-signed CA made at start, a serving certificate for
//! `localhost`/`127.0.0.1` signed by it, and the kubeconfig that trusts it
//! (`certificate-authority-data`) and carries the bearer token.

use std::sync::Arc;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// What the HTTPS listener serves with, and what a client needs to trust it.
pub(crate) struct Tls {
    pub(crate) config: Arc<rustls::ServerConfig>,
    pub(crate) ca_pem: String,
}

/// Why the HTTPS side could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating the API server's certificates: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

impl Tls {
    pub(crate) fn generate() -> Result<Self, TlsError> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "gpuscale-sim cluster CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
        let mut leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])?;
        leaf.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = leaf.signed_by(&key, &issuer)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )?;
        // HTTP/1.1 only: Go clients then keep to it instead of HTTP/2.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
            ca_pem: issuer.pem(),
        })
    }
}

/// A kubeconfig for `server`; with a CA and token for HTTPS, without for HTTP.
pub(crate) fn kubeconfig(server: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let ca = ca_pem.map_or(String::new(), |p| {
        format!("\n    certificate-authority-data: {}", b64(p))
    });
    let user = token.map_or("{}".to_string(), |t| format!("\n    token: {t}"));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gpuscale-sim\n  cluster:\n    server: {server}{ca}\nusers:\n- name: admin\n  user: {user}\ncontexts:\n- name: gpuscale-sim\n  context:\n    cluster: gpuscale-sim\n    user: admin\ncurrent-context: gpuscale-sim\n"
    )
}
