//! gpuscale-adapter: a Kubernetes external-metrics API server that turns
//! queue depth, latency and GPU pressure into HPA signals.
//!
//! Data flows: `prometheus/` (client, poll cache, selector → PromQL, the
//! pod-metadata join) implements [`provider`] (the seam: readings, errors)
//! → `api/` (discovery, values, Status errors) guarded by `auth/` →
//! `server` (TLS listeners); the same provider feeds `keda/` (KEDA's
//! external-scaler gRPC) through [`activation`]. [`config`] and [`presets`]
//! give [`metric_def`]s; [`selector`] parses label selectors for all.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod api;
pub mod auth;
pub mod check;
pub mod cli;
pub mod config;
pub mod doctor;
pub mod logging;
pub mod pods;
pub mod presets;
pub mod prometheus;
pub mod selfmetrics;
pub mod server;
pub mod tls;
pub mod yaml_guard;

// The roles in crates of their own, under their old paths: the signal
// seam (no Kubernetes client, gRPC or TLS) and the controller on it.
pub use gpuscale_keda as keda;
pub use gpuscale_scale_to_zero as scale_to_zero;
pub use gpuscale_signals::{
    activation, exposition, hash, limits, metric_def, objects, provider, quantity, selector, watch,
};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;

use crate::api::{Api, Security};
use crate::auth::{Authenticator, Authorizer, KubeAuthApi, SharedSources, SourceFlags};
use crate::cli::{Args, Command};
use crate::config::MetricsConfig;
use crate::pods::PodCache;
use crate::prometheus::{CacheSettings, ClientSettings, PollCache, PromClient, PromProvider};
use crate::selfmetrics::SelfMetrics;
use crate::tls::ReloadingResolver;

/// Why the adapter could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Prometheus(#[from] prometheus::client::ClientBuildError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("{0}")]
    Kube(#[from] auth::kube::KubeError),
    #[error("authentication set-up: {0}")]
    AuthSetup(String),
    #[error(transparent)]
    AuthSources(#[from] auth::sources::SourceError),
    #[error("--keda-client-ca-file needs TLS and cannot be used with --dev")]
    KedaDevClientCa,
    #[error(
        "--keda-listen needs --keda-client-ca-file (the CA of KEDA's client certificates); \
         --keda-allow-any-client opens the listener to every client that reaches it"
    )]
    KedaNoClientCa,
    #[error("check-prometheus: {0}")]
    Check(#[from] check::CheckError),
    #[error("doctor: {0}")]
    Doctor(#[from] doctor::DoctorError),
    #[error("{0}")]
    Usage(String),
    #[error("scale-to-zero: {0}")]
    ScaleToZero(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// Run what the command line asks: a one-shot command, or the adapter
/// until SIGTERM/SIGINT.
pub async fn run(args: Args) -> Result<(), AppError> {
    let mode = args.mode().map_err(AppError::Usage)?;
    if let Some(flag) = mode.deprecated {
        tracing::warn!(
            "{flag} is deprecated and will be removed in the next release: use `gpuscale-adapter {}`",
            mode.command.name()
        );
    }
    match mode.command {
        Command::WakeParked => {
            let kube = KubeAuthApi::connect(args.kubeconfig.as_deref()).await?;
            scale_to_zero::release::command(&kube.client())
                .await
                .map_err(AppError::ScaleToZero)
        }
        Command::Doctor => {
            let client = doctor::client(args.kubeconfig.as_deref()).await?;
            Ok(doctor::command(&client, &args.doctor_namespace, args.output).await?)
        }
        Command::CheckConfig => {
            for m in load_config(&args)?.metrics() {
                println!("{}\t{}", m.name, m.query);
            }
            Ok(())
        }
        Command::CheckPrometheus => {
            let config = load_config(&args)?;
            Ok(check::run(&config, &prom_client(&args)?).await?)
        }
        Command::Serve => serve(args).await,
    }
}

/// `serve`: the APIs, KEDA's scaler and the controller, until a signal.
async fn serve(args: Args) -> Result<(), AppError> {
    if !args.dev {
        serving_certificate_given(&args)?;
        keda_client_auth(&args)?;
    }
    let config = load_config(&args)?;
    let metrics = Arc::new(SelfMetrics::default());
    let names: Vec<&str> = config.metrics().iter().map(|m| m.name.as_str()).collect();
    metrics.serving(&names);
    let client = Arc::new(prom_client(&args)?);
    let cache = start_poll_cache(&args, client, metrics.clone());
    let kube = connect_kube(&args).await?;
    let config = Arc::new(config);
    let provider = || PromProvider::new(config.clone(), cache.clone());
    let api_provider = with_pod_cache(&args, provider(), kube.as_ref());
    let lease = if args.scale_to_zero {
        Some(start_scale_to_zero(
            &args,
            kube.as_ref(),
            provider(),
            &metrics,
        )?)
    } else {
        None
    };
    let endpoints = endpoints(&args, kube).await?;
    let client_auth = endpoints.security.is_some();
    let tls = tls_configs(&args, endpoints.key, client_auth, endpoints.self_tls)?;
    let api = Arc::new(Api::new(api_provider, endpoints.security, metrics.clone()));
    let listener = bind(endpoints.api).await?;
    let metrics_listener = bind(endpoints.metrics).await?;
    tracing::info!(api = %endpoints.api, metrics = %endpoints.metrics, prometheus = %args.prometheus_url, "gpuscale-adapter listening");
    let keda = keda_server(&args, tls.keda, provider(), metrics.clone()).await?;
    let limits = args.limits();
    tokio::spawn(server::serve_metrics(
        metrics_listener,
        metrics,
        Some(cache),
        limits,
    ));
    tokio::select! {
        _ = server::serve_api(listener, tls.api, api, limits) => {}
        _ = keda => {}
        _ = shutdown() => tracing::info!("shutting down"),
    }
    if let Some(lease) = lease {
        release_lease(&lease).await;
    }
    Ok(())
}

/// Hands the scale-to-zero Lease over before exiting, so a standby leads
/// within a retry period instead of a lease duration; bounded by the
/// renew deadline (two Lease calls fit in it).
async fn release_lease(lease: &scale_to_zero::lease::LeaseSettings) {
    if !lease.release.release(lease.timing.renew_deadline).await {
        tracing::warn!(lease = %lease.name, "the scale-to-zero Lease was not released in time");
    }
}

/// The metrics config file, or the built-in presets without one.
fn load_config(args: &Args) -> Result<MetricsConfig, AppError> {
    let config = match &args.config {
        Some(p) => MetricsConfig::load(p)?,
        None => MetricsConfig::presets(),
    };
    let names: Vec<&str> = config.metrics().iter().map(|m| m.name.as_str()).collect();
    tracing::info!(metrics = ?names, source = %args.config.as_ref().map_or("built-in presets".into(), |p| p.display().to_string()), "serving metrics");
    Ok(config)
}

fn prom_client(args: &Args) -> Result<PromClient, AppError> {
    Ok(PromClient::new(&ClientSettings {
        url: args.prometheus_url.clone(),
        bearer_token_file: args.prometheus_bearer_token_file.clone(),
        ca_file: args.prometheus_ca_file.clone(),
        headers: args.prometheus_header.clone(),
        timeout: args.prometheus_timeout,
        max_concurrency: args.prometheus_max_concurrency,
    })?)
}

/// The poll cache every reader shares, its poller running.
fn start_poll_cache(
    args: &Args,
    client: Arc<PromClient>,
    metrics: Arc<SelfMetrics>,
) -> Arc<PollCache> {
    let cache = Arc::new(PollCache::new(
        client,
        metrics,
        CacheSettings {
            poll_interval: args.poll_interval,
            idle_expiry: args.idle_expiry,
            refresh_concurrency: args.prometheus_max_concurrency,
            max_keys: args.max_cached_queries as usize,
            max_bytes: args.max_cached_bytes,
            max_stream_keys: args.keda_max_stream_keys as usize,
            query_budget: args.prometheus_query_budget,
            batch_size: args.prometheus_batch_size as usize,
        },
    ));
    tokio::spawn(cache.clone().run_poller());
    cache
}

/// The Kubernetes API: authentication and authorization, and the pod lists
/// of per-pod custom metrics (in --dev only with --kubeconfig).
async fn connect_kube(args: &Args) -> Result<Option<Arc<KubeAuthApi>>, AppError> {
    if args.dev && args.kubeconfig.is_none() {
        return Ok(None);
    }
    let kube = KubeAuthApi::connect(args.kubeconfig.as_deref()).await?;
    Ok(Some(Arc::new(kube)))
}

/// The custom metrics API's provider lists pods when it can reach the API.
fn with_pod_cache(
    args: &Args,
    provider: PromProvider,
    kube: Option<&Arc<KubeAuthApi>>,
) -> PromProvider {
    let Some(kube) = kube else {
        return provider;
    };
    let pods = Arc::new(PodCache::new(
        kube.clone(),
        args.poll_interval,
        args.idle_expiry,
    ));
    tokio::spawn(pods.clone().run());
    provider.with_pods(pods)
}

/// Where the adapter listens, with what certificate, guarded by what.
struct Endpoints {
    api: SocketAddr,
    metrics: SocketAddr,
    key: CertifiedKey,
    /// `None` in --dev: no authentication, no authorization.
    security: Option<Security>,
    /// With --self-signed-tls-secret: the certificate's keeper.
    self_tls: Option<tls::self_managed::SelfManaged>,
}

async fn endpoints(args: &Args, kube: Option<Arc<KubeAuthApi>>) -> Result<Endpoints, AppError> {
    if args.dev {
        let banner = "DEV MODE: self-signed certificate, NO AUTHENTICATION, NO AUTHORIZATION; listening on 127.0.0.1 only. Never use --dev in a cluster.";
        eprintln!("\n*** {banner} ***\n");
        tracing::warn!("{banner}");
        return Ok(Endpoints {
            api: localhost(args.listen),
            metrics: localhost(args.metrics_listen),
            key: tls::self_signed()?,
            security: None,
            self_tls: None,
        });
    }
    let missing = || {
        AppError::AuthSetup(
            "--tls-cert-file and --tls-key-file (or --self-signed-tls-secret) are required (or --dev)"
                .into(),
        )
    };
    let kube = kube.ok_or_else(missing)?;
    let (reload, client) = (args.tls_reload_interval, Some(kube.client()));
    let self_tls = tls::self_managed::start(&args.self_signed_tls, reload, client).await?;
    let key = match (&self_tls, &args.tls_cert_file, &args.tls_key_file) {
        (Some(s), _, _) => s.certified_key()?,
        (None, Some(cert), Some(key)) => tls::load_key_pair(cert, key)?,
        _ => return Err(missing()),
    };
    Ok(Endpoints {
        api: args.listen,
        metrics: args.metrics_listen,
        key,
        security: Some(security(args, kube).await?),
        self_tls,
    })
}

/// --dev listens on loopback only, whatever the flags say.
fn localhost(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
}

/// The API's and KEDA's TLS, both serving the (reloaded) certificate.
struct TlsConfigs {
    api: Arc<rustls::ServerConfig>,
    /// `None` in --dev: KEDA's gRPC in plaintext.
    keda: Option<Arc<rustls::ServerConfig>>,
}

fn tls_configs(
    args: &Args,
    key: CertifiedKey,
    client_auth: bool,
    self_tls: Option<tls::self_managed::SelfManaged>,
) -> Result<TlsConfigs, AppError> {
    let resolver = ReloadingResolver::new(key);
    if let Some(s) = self_tls {
        tokio::spawn(s.keep(resolver.clone()));
    }
    if let (false, Some(c), Some(k)) = (args.dev, &args.tls_cert_file, &args.tls_key_file) {
        tokio::spawn(
            resolver
                .clone()
                .watch(c.clone(), k.clone(), args.tls_reload_interval),
        );
    }
    let keda = match (args.dev, &args.keda_client_ca_file) {
        (true, Some(_)) => return Err(AppError::KedaDevClientCa),
        (true, None) => None,
        (false, ca) => Some(Arc::new(tls::keda::server_config(
            resolver.clone(),
            ca.as_deref(),
        )?)),
    };
    let api = Arc::new(tls::server_config(resolver, client_auth)?);
    Ok(TlsConfigs { api, keda })
}

/// `serve` outside --dev needs a serving certificate: files or a Secret
/// it manages. Checked first, as clap checked it before subcommands.
fn serving_certificate_given(args: &Args) -> Result<(), AppError> {
    let files = args.tls_cert_file.is_some() && args.tls_key_file.is_some();
    if files || args.self_signed_tls.self_signed_tls_secret.is_some() {
        return Ok(());
    }
    Err(AppError::Usage(
        "serve needs --tls-cert-file and --tls-key-file, or --self-signed-tls-secret (or --dev on a workstation)".into(),
    ))
}

/// KEDA's listener requires client certificates unless explicitly opened:
/// its gRPC calls name any namespace and have no SubjectAccessReview.
/// Checked first, before anything is read or connected.
fn keda_client_auth(args: &Args) -> Result<(), AppError> {
    match args.keda_clients() {
        cli::KedaClients::Certified => Ok(()),
        cli::KedaClients::Unset => Err(AppError::KedaNoClientCa),
        cli::KedaClients::Any => {
            tracing::warn!(
                "--keda-allow-any-client: the KEDA listener accepts clients without a certificate; \
                 anyone who reaches its port reads every namespace's metrics (no SubjectAccessReview). \
                 Give --keda-client-ca-file, or keep a NetworkPolicy in front of the port"
            );
            Ok(())
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, AppError> {
    TcpListener::bind(addr).await.map_err(|e| AppError::Io {
        what: format!("bind {addr}"),
        source: e,
    })
}

/// KEDA's external scaler when --keda-listen is given; otherwise a future
/// that never ends.
async fn keda_server(
    args: &Args,
    tls: Option<Arc<rustls::ServerConfig>>,
    provider: PromProvider,
    metrics: Arc<SelfMetrics>,
) -> Result<impl Future<Output = ()>, AppError> {
    let Some(addr) = args.keda_listen else {
        return Ok(futures::future::Either::Right(std::future::pending()));
    };
    let addr = if args.dev { localhost(addr) } else { addr };
    let l = bind(addr).await?;
    tracing::info!(keda = %addr, tls = tls.is_some(), client_ca = args.keda_client_ca_file.is_some(), "KEDA external scaler listening");
    let scaler = keda::Scaler::new(Arc::new(provider), metrics)
        .with_max_streams_per_client(args.keda_max_streams_per_client as usize);
    Ok(futures::future::Either::Left(keda::serve(
        l,
        tls,
        scaler,
        args.limits(),
    )))
}

/// The controller shares the poll cache with the APIs: one (metric,
/// namespace, selector) costs one query however many readers it has.
fn start_scale_to_zero(
    args: &Args,
    kube: Option<&Arc<KubeAuthApi>>,
    provider: PromProvider,
    metrics: &SelfMetrics,
) -> Result<scale_to_zero::lease::LeaseSettings, AppError> {
    let Some(kube) = kube else {
        return Err(AppError::AuthSetup(
            "--scale-to-zero needs the Kubernetes API: give --kubeconfig with --dev".into(),
        ));
    };
    let lease = lease_settings(args)?;
    let report = Arc::new(scale_to_zero::report::Report::default());
    metrics.attach_scale_to_zero(report.clone());
    let settings = scale_to_zero::reconcile::Settings {
        wake_interval: args.scale_to_zero_wake_interval,
        check_interval: args.scale_to_zero_check_interval,
        resync_interval: args.scale_to_zero_resync_interval,
        max_backoff: std::time::Duration::from_secs(300),
        allow_queries: args.scale_to_zero_allow_queries,
        concurrency: args.scale_to_zero_concurrency,
    };
    tracing::info!(lease = %lease.name, identity = %lease.identity, "scale-to-zero controller starting");
    tokio::spawn(scale_to_zero::run(
        kube.client(),
        Arc::new(provider),
        lease.clone(),
        settings,
        report,
    ));
    Ok(lease)
}

/// The leader Lease from the flags: its namespace from the flag or the
/// downward API (`POD_NAMESPACE`), never guessed, and client-go's timing.
fn lease_settings(args: &Args) -> Result<scale_to_zero::lease::LeaseSettings, AppError> {
    let namespace = args
        .scale_to_zero_lease_namespace
        .clone()
        .filter(|ns| !ns.trim().is_empty())
        .ok_or_else(|| {
            AppError::ScaleToZero(
                "no namespace for the leader Lease: set --scale-to-zero-lease-namespace or POD_NAMESPACE (the chart and kustomize set it from the downward API)".into(),
            )
        })?;
    // client-go's 15 s / 10 s / 2 s, scaled with the lease duration.
    let duration = args.scale_to_zero_lease_duration;
    let timing = scale_to_zero::lease::Timing::new(
        duration,
        args.scale_to_zero_lease_renew_deadline
            .unwrap_or(duration * 2 / 3),
        args.scale_to_zero_lease_retry_period
            .unwrap_or(duration * 2 / 15),
    )
    .map_err(AppError::ScaleToZero)?;
    let identity = args.scale_to_zero_identity.clone().unwrap_or_else(|| {
        std::env::var("HOSTNAME")
            .unwrap_or_else(|_| format!("gpuscale-adapter-{}", std::process::id()))
    });
    Ok(scale_to_zero::lease::LeaseSettings {
        namespace,
        name: args.scale_to_zero_lease_name.clone(),
        identity,
        timing,
        release: scale_to_zero::lease::Release::default(),
    })
}

async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Authentication: CAs from files given by flag, else from the
/// `kube-system/extension-apiserver-authentication` ConfigMap (re-read
/// every `--authentication-config-refresh`).
async fn security(args: &Args, kube: Arc<KubeAuthApi>) -> Result<Security, AppError> {
    let flags = SourceFlags {
        client_ca_file: args.client_ca_file.clone(),
        requestheader_client_ca_file: args.requestheader_client_ca_file.clone(),
        allowed_names: args.requestheader_allowed_names.clone(),
        username_headers: args.requestheader_username_headers.clone(),
        group_headers: args.requestheader_group_headers.clone(),
        extra_prefixes: args.requestheader_extra_headers_prefix.clone(),
    };
    let sources = if flags.uses_files() {
        tracing::info!("authentication CAs read from files");
        auth::sources::from_files(&flags)?
    } else {
        let data = kube.auth_configmap().await?;
        tracing::info!(
            "authentication CAs read from kube-system/extension-apiserver-authentication"
        );
        auth::sources::from_configmap(&flags, &data)?
    };
    tracing::info!(
        requestheader = sources.requestheader.is_some(),
        client_ca = sources.client_ca.is_some(),
        allowed_names = ?sources.requestheader.as_ref().map(|r| r.allowed_names.clone()).unwrap_or_default(),
        "authentication configured (bearer tokens through TokenReview)"
    );
    let shared: SharedSources = Arc::new(arc_swap::ArcSwap::from_pointee(sources));
    if !flags.uses_files() {
        tokio::spawn(auth::sources::refresh(
            kube.clone(),
            flags,
            shared.clone(),
            args.authentication_config_refresh,
        ));
    }
    Ok(Security {
        authn: Authenticator::new(shared, Some(kube.clone()), args.authentication_cache_ttl),
        authz: Authorizer::new(
            kube,
            args.authorization_cache_ttl,
            args.authorization_cache_ttl,
        ),
    })
}
