//! gpuscale-adapter: a Kubernetes external-metrics API server that turns
//! queue depth, latency and GPU pressure into HPA signals.
//!
//! Data flows: `prometheus/` (client, poll cache) → [`provider`] (metrics
//! config, presets, selector → PromQL) → `api/` (discovery, values, Status
//! errors) guarded by `auth/` → `server` (TLS listeners).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod api;
pub mod auth;
pub mod check;
pub mod cli;
pub mod config;
pub mod join;
pub mod logging;
pub mod presets;
pub mod prometheus;
pub mod provider;
pub mod scale_to_zero;
pub mod selector;
pub mod selfmetrics;
pub mod server;
pub mod tls;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::api::{Api, Security};
use crate::auth::{Authenticator, Authorizer, KubeAuthApi, SharedSources, SourceFlags};
use crate::cli::Args;
use crate::config::MetricsConfig;
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
    #[error("--check-prometheus: {0}")]
    Check(#[from] check::CheckError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// Run the adapter until SIGTERM/SIGINT.
pub async fn run(args: Args) -> Result<(), AppError> {
    let config = match &args.config {
        Some(p) => MetricsConfig::load(p)?,
        None => MetricsConfig::presets(),
    };
    if args.check_config {
        for m in config.metrics() {
            println!("{}\t{}", m.name, m.query);
        }
        return Ok(());
    }
    let names: Vec<&str> = config.metrics().iter().map(|m| m.name.as_str()).collect();
    tracing::info!(metrics = ?names, source = %args.config.as_ref().map_or("built-in presets".into(), |p| p.display().to_string()), "serving metrics");

    let metrics = Arc::new(SelfMetrics::default());
    let client = Arc::new(PromClient::new(&ClientSettings {
        url: args.prometheus_url.clone(),
        bearer_token_file: args.prometheus_bearer_token_file.clone(),
        ca_file: args.prometheus_ca_file.clone(),
        headers: args.prometheus_header.clone(),
        timeout: args.prometheus_timeout,
        max_concurrency: args.prometheus_max_concurrency,
    })?);
    if args.check_prometheus {
        return Ok(check::run(&config, &client).await?);
    }
    let cache = Arc::new(PollCache::new(
        client,
        metrics.clone(),
        CacheSettings {
            poll_interval: args.poll_interval,
            idle_expiry: args.idle_expiry,
            refresh_concurrency: args.prometheus_max_concurrency,
        },
    ));
    tokio::spawn(cache.clone().run_poller());
    let provider = PromProvider::new(Arc::new(config), cache.clone());

    let (listen, metrics_listen, key, security) = if args.dev {
        let local = |a: SocketAddr| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), a.port());
        let banner = "DEV MODE: self-signed certificate, NO AUTHENTICATION, NO AUTHORIZATION; listening on 127.0.0.1 only. Never use --dev in a cluster.";
        eprintln!("\n*** {banner} ***\n");
        tracing::warn!("{banner}");
        (
            local(args.listen),
            local(args.metrics_listen),
            tls::self_signed()?,
            None,
        )
    } else {
        let (Some(cert), Some(key)) = (&args.tls_cert_file, &args.tls_key_file) else {
            return Err(AppError::AuthSetup(
                "--tls-cert-file and --tls-key-file are required (or --dev)".into(),
            ));
        };
        let pair = tls::load_key_pair(cert, key)?;
        (
            args.listen,
            args.metrics_listen,
            pair,
            Some(security(&args).await?),
        )
    };
    let resolver = ReloadingResolver::new(key);
    if let (false, Some(c), Some(k)) = (args.dev, &args.tls_cert_file, &args.tls_key_file) {
        tokio::spawn(
            resolver
                .clone()
                .watch(c.clone(), k.clone(), args.tls_reload_interval),
        );
    }
    let tls_config = Arc::new(tls::server_config(resolver, security.is_some())?);
    let api = Arc::new(Api::new(provider, security, metrics.clone()));

    let bind = |addr: SocketAddr| async move {
        TcpListener::bind(addr).await.map_err(|e| AppError::Io {
            what: format!("bind {addr}"),
            source: e,
        })
    };
    let listener = bind(listen).await?;
    let metrics_listener = bind(metrics_listen).await?;
    tracing::info!(api = %listen, metrics = %metrics_listen, prometheus = %args.prometheus_url, "gpuscale-adapter listening");
    tokio::spawn(server::serve_metrics(
        metrics_listener,
        metrics,
        Some(cache),
    ));
    tokio::select! {
        _ = server::serve_api(listener, tls_config, api) => {}
        _ = shutdown() => tracing::info!("shutting down"),
    }
    Ok(())
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
async fn security(args: &Args) -> Result<Security, AppError> {
    let kube = Arc::new(KubeAuthApi::connect(args.kubeconfig.as_deref()).await?);
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
