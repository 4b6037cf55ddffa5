//! KEDA's external-scaler protocol (`externalscaler.ExternalScaler`, gRPC)
//! on its own listener: `external` triggers poll `IsActive`/`GetMetrics`,
//! `external-push` triggers hold `StreamIsActive` open. TLS with the API's
//! serving certificate; client certificates verified at the handshake when
//! `--keda-client-ca-file` is set; plaintext only with `--dev`.

pub mod service;
pub mod trigger;

mod conn;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

pub use service::Scaler;

/// Generated from `adapter/proto/externalscaler.proto`.
#[allow(clippy::all, clippy::unwrap_used)]
pub mod proto {
    tonic::include_proto!("externalscaler");
}

use proto::external_scaler_server::ExternalScalerServer;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 pings keep idle push streams alive through proxies and find dead peers.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The TLS set-up of the listener: the API's certificate resolver (so a
/// reloaded certificate is served here too) and, with a client CA,
/// mandatory client certificates.
pub fn tls_config(
    resolver: Arc<crate::tls::ReloadingResolver>,
    client_ca: Option<&Path>,
) -> Result<rustls::ServerConfig, crate::tls::TlsError> {
    use crate::tls::{TlsError, provider, read_certs};
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

/// Serve the scaler on `listener` (TLS unless `tls` is `None`) until the
/// task is dropped.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    scaler: Scaler,
) -> Result<(), tonic::transport::Error> {
    let server = Server::builder()
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(KEEPALIVE))
        .add_service(ExternalScalerServer::new(scaler));
    match tls {
        None => {
            server
                .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true)))
                .await
        }
        Some(tls) => {
            let (tx, rx) = futures::channel::mpsc::unbounded();
            tokio::spawn(accept_tls(listener, TlsAcceptor::from(tls), tx));
            server
                .serve_with_incoming(rx.map(Ok::<_, std::io::Error>))
                .await
        }
    }
}

/// Accept TCP connections and hand over those whose TLS handshake
/// succeeds; each handshake runs on its own task so a slow client holds up
/// nobody.
async fn accept_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    tx: futures::channel::mpsc::UnboundedSender<conn::TlsConn>,
) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "keda: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => {
                    let _ = tx.unbounded_send(conn::TlsConn(s));
                }
                Ok(Err(e)) => tracing::info!(%peer, error = %e, "keda: TLS handshake refused"),
                Err(_) => tracing::debug!(%peer, "keda: TLS handshake timed out"),
            }
        });
    }
}
