//! gpuscale-activator: holds HTTP requests for a model Service while it has
//! no Ready endpoint, wakes its workload through the `scale` subresource at
//! the first held request, and forwards the held requests in arrival order
//! once an endpoint is Ready (docs/activator.md).

pub mod body;
pub mod cli;
pub mod config;
pub mod conn;
pub mod endpoints;
pub mod fds;
pub mod gpu_share;
pub mod handler;
pub mod held_body;
pub mod in_flight;
pub mod metrics;
pub mod pinned;
pub mod proxy;
pub mod route;
pub mod router;
pub mod server;
pub mod sleep;
pub mod sleep_calls;
pub mod sleep_spec;
pub mod sleepers;
pub mod vram;
pub mod wake;

use std::sync::Arc;

use cli::Args;

/// Starts the watches, the wakers and both listeners; returns on a start-up
/// error or when a listener ends.
pub async fn run(args: Args) -> Result<(), String> {
    let path = args
        .config
        .as_deref()
        .ok_or("--config: the routes file is required")?;
    let file = config::load(path).map_err(|e| e.to_string())?;
    let metrics = Arc::new(Metrics::new().map_err(|e| format!("self-metrics: {e}"))?);
    let routes: Vec<Arc<route::Route>> = file
        .routes
        .into_iter()
        .map(|spec| route::Route::new(spec, metrics.clone()))
        .collect();
    let client = kube_client(args.kubeconfig.as_deref()).await?;
    let share = gpu_share(&args, &routes, &metrics)?;
    for r in &routes {
        tokio::spawn(endpoints::watch(client.clone(), r.clone()));
        tokio::spawn(sleep::run(r.clone(), metrics.clone(), share.clone()));
        tokio::spawn(wake::run(
            client.clone(),
            r.clone(),
            metrics.clone(),
            args.wake_retry,
        ));
    }
    let app = Arc::new(handler::App {
        router: router::Router::new(routes),
        upstream: proxy::Upstream::new(args.connect_timeout),
        metrics,
        bounds: handler::Bounds {
            queue_length: args.queue_length,
            max_wait: args.max_wait,
            max_held_body: args.max_held_body,
            max_held_bytes: args.max_held_bytes,
            model_peek_limit: args.model_peek_limit,
            body_read_timeout: args.body_read_timeout,
            upstream_ttfb_timeout: args.upstream_ttfb_timeout,
            retry_after: args.retry_after,
        },
    });
    let limits = conn::Limits {
        max_connections: fds::max_connections(args.max_connections),
        idle_timeout: args.idle_timeout,
    };
    let bind = |a| async move {
        tokio::net::TcpListener::bind(a)
            .await
            .map_err(|e| format!("bind {a}: {e}"))
    };
    let proxy = bind(args.listen).await?;
    let metrics_port = bind(args.metrics_listen).await?;
    tracing::info!(listen = %args.listen, metrics = %args.metrics_listen, routes = app.router.all().len(), "activator started");
    tokio::select! {
        () = server::serve_proxy(proxy, app.clone(), limits) => Err("the proxy listener ended".into()),
        () = server::serve_metrics(metrics_port, app, limits) => Err("the metrics listener ended".into()),
    }
}

use metrics::Metrics;

/// With `--prometheus-url`, the shared-GPU room maker, its readings
/// refreshed every `--vram-refresh`.
fn gpu_share(
    args: &Args,
    routes: &[Arc<route::Route>],
    metrics: &Arc<Metrics>,
) -> Result<Option<Arc<gpu_share::GpuShare>>, String> {
    let Some(url) = &args.prometheus_url else {
        return Ok(None);
    };
    let prom = vram::Prometheus::new(url)?;
    let share = Arc::new(gpu_share::GpuShare::new(
        prom,
        routes,
        metrics.clone(),
        args.gpu_neighbour_sleeps,
    ));
    tokio::spawn(share.clone().run(args.vram_refresh));
    Ok(Some(share))
}

async fn kube_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("Kubernetes client configuration: {e}"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))
}
