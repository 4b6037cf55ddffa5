//! Where a route's Service has Ready endpoints: a watch of its
//! EndpointSlices (label `kubernetes.io/service-name`), the ready addresses
//! of all of them handed to the route whenever one changes.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};

use crate::config::Port;
use crate::route::Route;

/// Runs until the process ends; the watcher retries with backoff.
pub async fn watch(client: Client, route: Arc<Route>) {
    let svc = &route.spec.service;
    let api: Api<EndpointSlice> = Api::namespaced(client, &svc.namespace);
    let cfg =
        watcher::Config::default().labels(&format!("kubernetes.io/service-name={}", svc.name));
    let mut slices: BTreeMap<String, Vec<Ready>> = BTreeMap::new();
    let mut fresh: Option<BTreeMap<String, Vec<Ready>>> = None;
    let mut stream = std::pin::pin!(watcher(api, cfg).default_backoff());
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(s)) => {
                slices.insert(s.name_any(), ready(&s, &svc.port));
            }
            Ok(watcher::Event::Delete(s)) => {
                slices.remove(&s.name_any());
            }
            Ok(watcher::Event::Init) => {
                fresh = Some(BTreeMap::new());
                continue;
            }
            Ok(watcher::Event::InitApply(s)) => {
                if let Some(f) = fresh.as_mut() {
                    f.insert(s.name_any(), ready(&s, &svc.port));
                }
                continue;
            }
            Ok(watcher::Event::InitDone) => slices = fresh.take().unwrap_or_default(),
            Err(e) => {
                tracing::warn!(route = %route.spec.name, error = %e, "EndpointSlice watch failed; retrying");
                continue;
            }
        }
        let all: Vec<SocketAddr> = slices.values().flatten().map(|r| r.0).collect();
        tracing::debug!(route = %route.spec.name, ready = all.len(), "endpoints changed");
        if let Some(s) = &route.sleeper {
            let pods = slices.values().flatten();
            s.set_pods(pods.filter_map(|(a, p)| Some((*a, p.clone()?))).collect());
        }
        route.set_endpoints(all);
    }
}

/// A Ready endpoint and the pod behind it (its `targetRef`, when a Pod).
type Ready = (SocketAddr, Option<String>);

/// The slice's Ready endpoints on the route's port. A missing `ready`
/// condition counts as ready, as the EndpointSlice API says to read it.
fn ready(slice: &EndpointSlice, port: &Port) -> Vec<Ready> {
    let port = match port {
        Port::Number(n) => Some(*n),
        Port::Name(name) => slice.ports.iter().flatten().find_map(|p| {
            (p.name.as_deref() == Some(name.as_str()))
                .then_some(p.port)
                .flatten()
                .and_then(|n| u16::try_from(n).ok())
        }),
    };
    let Some(port) = port else {
        tracing::warn!(slice = %slice.name_any(), ?port, "no such port in the EndpointSlice");
        return Vec::new();
    };
    slice
        .endpoints
        .iter()
        .flatten()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .flat_map(|e| {
            let pod = e
                .target_ref
                .as_ref()
                .filter(|t| t.kind.as_deref() == Some("Pod"))
                .and_then(|t| t.name.clone());
            e.addresses.iter().map(move |a| (a, pod.clone()))
        })
        .filter_map(|(a, pod)| match a.parse::<IpAddr>() {
            Ok(ip) => Some((SocketAddr::new(ip, port), pod)),
            Err(_) => {
                tracing::warn!(address = %a, "skipping an endpoint address that is not an IP");
                None
            }
        })
        .collect()
}
