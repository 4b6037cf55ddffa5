//! KEDA's external-scaler protocol (`externalscaler.ExternalScaler`, gRPC)
//! on its own listener: `external` triggers poll `IsActive`/`GetMetrics`,
//! `external-push` triggers hold `StreamIsActive` open. TLS with the API's
//! serving certificate; client certificates verified at the handshake when
//! `--keda-client-ca-file` is set; plaintext only with `--dev`.

pub mod clients;
pub mod service;
pub mod trigger;

use std::path::Path;
use std::sync::Arc;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;
use tonic::codegen::Service as _;

use crate::conn::{self, Activity, InFlight, Limits};

pub use service::Scaler;

/// Generated from `adapter/proto/externalscaler.proto` by build.rs (tonic's
/// server dispatch is one long function we do not write).
#[allow(clippy::all, clippy::unwrap_used, clippy::too_many_lines)]
pub mod proto {
    tonic::include_proto!("externalscaler");
}

use proto::external_scaler_server::ExternalScalerServer;

/// Streams of one connection at once. KEDA multiplexes the push streams of
/// all its ScaledObjects over one connection, so the API's 250-stream cap
/// would be too low here; what one client holds over all its connections
/// is bounded by `--keda-max-streams-per-client` ([`clients`]).
pub const MAX_STREAMS: u32 = 4096;

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
/// task is dropped, under the API's connection limits: at most
/// `--max-connections` connections, the TLS handshake timeout, HTTP/2 pings
/// and `--idle-timeout` (an open push stream or a poll every
/// `pollingInterval` keeps KEDA's connection busy; a closed one is
/// re-dialled by its gRPC client).
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    scaler: Scaler,
    limits: Limits,
) {
    let grpc = ExternalScalerServer::new(scaler);
    let acceptor = tls.map(TlsAcceptor::from);
    let mut builder = conn::builder(false);
    builder.http2().max_concurrent_streams(MAX_STREAMS);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    while let Some((tcp, peer, slot)) = conn::accept(&listener, &slots).await {
        let _ = tcp.set_nodelay(true);
        let (acceptor, grpc, builder) = (acceptor.clone(), grpc.clone(), builder.clone());
        tokio::spawn(async move {
            let io = match acceptor {
                None => Either::Left(tcp),
                Some(a) => {
                    match tokio::time::timeout(limits.handshake_timeout, a.accept(tcp)).await {
                        Ok(Ok(s)) => Either::Right(s),
                        Ok(Err(e)) => {
                            return tracing::info!(%peer, error = %e, "keda: TLS handshake refused");
                        }
                        Err(_) => return tracing::debug!(%peer, "keda: TLS handshake timed out"),
                    }
                }
            };
            serve_connection(io, grpc, &builder, limits, clients::Peer(peer.ip())).await;
            drop(slot);
        });
    }
}

async fn serve_connection<I>(
    io: I,
    grpc: ExternalScalerServer<Scaler>,
    builder: &auto::Builder<TokioExecutor>,
    limits: Limits,
    peer: clients::Peer,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let busy = activity.clone();
    let svc = service_fn(move |mut req: http::Request<Incoming>| {
        req.extensions_mut().insert(peer);
        let mut grpc = grpc.clone();
        let in_flight = busy.begin();
        async move {
            let resp = grpc.call(req).await?;
            Ok::<_, Infallible>(resp.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        }
    });
    conn::serve(builder, io, svc, activity, limits.idle_timeout).await;
}

/// A response body that keeps its request in flight until it ends, so an
/// open `StreamIsActive` stream is never an idle connection.
struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
