//! The KEDA listener's TLS: the API's serving certificate and, with
//! `--keda-client-ca-file`, mandatory client certificates (KEDA's gRPC
//! calls name any namespace and have no SubjectAccessReview).

use std::path::Path;
use std::sync::Arc;

use super::{ReloadingResolver, TlsError, provider, read_certs};

/// The TLS set-up of the listener: the API's certificate resolver (so a
/// reloaded certificate is served here too) and, with a client CA,
/// mandatory client certificates.
pub fn server_config(
    resolver: Arc<ReloadingResolver>,
    client_ca: Option<&Path>,
) -> Result<rustls::ServerConfig, TlsError> {
    let p = provider();
    let builder = rustls::ServerConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    let builder = match client_ca {
        Some(path) => {
            let what = format!("--keda-client-ca-file {}", path.display());
            let mut roots = rustls::RootCertStore::empty();
            for c in read_certs(path)? {
                roots
                    .add(c)
                    .map_err(|e| TlsError::Setup(format!("{what}: {e}")))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), p)
                    .build()
                    .map_err(|e| TlsError::Setup(format!("{what}: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder.with_cert_resolver(resolver);
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(cfg)
}
