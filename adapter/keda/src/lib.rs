//! KEDA's external-scaler protocol (`externalscaler.ExternalScaler`, gRPC)
//! on its own listener: `external` triggers poll `IsActive`/`GetMetrics`,
//! `external-push` triggers hold `StreamIsActive` open. TLS with the API's
//! serving certificate; client certificates verified at the handshake when
//! `--keda-client-ca-file` is set; plaintext only with `--dev`.
//!
//! The scaler reads through the [`WatchProvider`] seam of
//! `gpuscale-signals` (the adapter hands it the poll cache every reader
//! shares) and counts its calls through [`Counts`]; the TLS set-up is the
//! binary's (`gpuscale-adapter`'s `tls`).

pub mod clients;
pub mod service;
pub mod trigger;

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

use gpuscale_conn::{self as conn, Activity, InFlight, Limits};
use gpuscale_signals::watch::WatchProvider;

pub use service::{Counts, Scaler};

/// Generated from `adapter/keda/proto/externalscaler.proto` by build.rs (tonic's
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

/// Serve the scaler on `listener` (TLS unless `tls` is `None`) until the
/// task is dropped, under the API's connection limits: at most
/// `--max-connections` connections, the TLS handshake timeout, HTTP/2 pings
/// and `--idle-timeout` (an open push stream or a poll every
/// `pollingInterval` keeps KEDA's connection busy; a closed one is
/// re-dialled by its gRPC client).
pub async fn serve<P: WatchProvider>(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    scaler: Scaler<P>,
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

async fn serve_connection<I, P: WatchProvider>(
    io: I,
    grpc: ExternalScalerServer<Scaler<P>>,
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
