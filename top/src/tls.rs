//! TLS to the source (`https://` URLs): the CA that signed the exporter's
//! or Prometheus' certificate (else the system's trust store), a client
//! certificate for an exporter that asks for one, and, for a port-forward
//! whose certificate names the pod and not the loopback, no verification.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig, TlsProvider};

/// The TLS flags (docs/top.md).
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub insecure_skip_verify: bool,
}

/// The client's TLS configuration, or what is wrong with a file, naming it.
pub fn config(o: &Options) -> Result<TlsConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut b = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(provider)
        .root_certs(RootCerts::PlatformVerifier);
    if let Some(path) = &o.ca_file {
        let (certs, _) = pem(path, "--ca-file")?;
        if certs.is_empty() {
            return Err(format!(
                "--ca-file {}: no certificate in it",
                path.display()
            ));
        }
        b = b.root_certs(RootCerts::new_with_certs(&certs));
    }
    match (&o.cert_file, &o.key_file) {
        (Some(cert), Some(key)) => b = b.client_cert(Some(client_cert(cert, key)?)),
        (None, None) => {}
        _ => return Err("--cert-file and --key-file go together".into()),
    }
    if o.insecure_skip_verify {
        tracing::warn!(
            "--insecure-skip-verify: the source's certificate is not checked; the connection \
             is encrypted but anyone in the path can answer for the source"
        );
        b = b.disable_verification(true);
    }
    Ok(b.build())
}

fn client_cert(cert: &Path, key: &Path) -> Result<ClientCert, String> {
    let (chain, _) = pem(cert, "--cert-file")?;
    if chain.is_empty() {
        return Err(format!(
            "--cert-file {}: no certificate in it",
            cert.display()
        ));
    }
    let (_, keys) = pem(key, "--key-file")?;
    let key = keys
        .into_iter()
        .next()
        .ok_or_else(|| format!("--key-file {}: no private key in it", key.display()))?;
    Ok(ClientCert::new_with_certs(&chain, key))
}

type Pem = (Vec<Certificate<'static>>, Vec<PrivateKey<'static>>);

/// The certificates and keys of a PEM file.
fn pem(path: &Path, flag: &str) -> Result<Pem, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    let (mut certs, mut keys) = (Vec::new(), Vec::new());
    for item in ureq::tls::parse_pem(&bytes) {
        match item.map_err(|e| format!("{flag} {}: not PEM: {e}", path.display()))? {
            PemItem::Certificate(c) => certs.push(c),
            PemItem::PrivateKey(k) => keys.push(k),
            _ => {}
        }
    }
    Ok((certs, keys))
}
