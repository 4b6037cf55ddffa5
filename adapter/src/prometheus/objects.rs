//! Per-object reads for the custom metrics API: the request's objects
//! (named, or the pods a selector lists) become name matchers after the
//! namespace, the per-object query goes through the poll cache, and each
//! series is mapped back to its object by the kind's label.

use std::sync::Arc;

use super::matchers::{names_matcher, to_matchers};
use super::{Identity, PollCache};
use crate::config::MetricsConfig;
use crate::limits::excerpt;
use crate::objects::ObjectKind;
use crate::pods::PodCache;
use crate::provider::{ObjectReading, ObjectRequest, ObjectValue, ProviderError, Target};
use crate::selector;

fn bad(e: impl ToString) -> ProviderError {
    ProviderError::BadRequest(e.to_string())
}

/// Kubernetes object names: DNS subdomains (pods, deployments…) at most.
fn valid_object_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && n.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
}

/// The objects a request is about.
async fn objects(
    req: &ObjectRequest<'_>,
    pods: Option<&PodCache>,
) -> Result<Arc<Vec<String>>, ProviderError> {
    match (req.target.clone(), req.kind) {
        (Target::Name(n), ObjectKind::Namespaces) if n != req.namespace => Err(bad(format!(
            "namespace {} does not match the request's namespace {:?}",
            excerpt(n),
            req.namespace
        ))),
        (Target::Name(n), _) if valid_object_name(n) => Ok(Arc::new(vec![n.to_string()])),
        (Target::Name(n), _) => Err(bad(format!("invalid object name {}", excerpt(n)))),
        (Target::Selector(s), ObjectKind::Pods) => {
            let text = selector::to_text(&selector::parse_kube(s).map_err(bad)?);
            let pods = pods.ok_or_else(|| {
                ProviderError::Unavailable(
                    "per-pod metrics need the Kubernetes API (no --kubeconfig in --dev)".into(),
                )
            })?;
            pods.names(req.namespace, &text).await
        }
        (Target::Selector(_), kind) => Err(bad(format!(
            "only pods can be selected with `*`; name one of the {}",
            kind.resource()
        ))),
    }
}

/// The key's label: `<kind>/<name>` or `pods/*` with its selector, and the
/// `metricLabelSelector` when given.
fn identity(req: &ObjectRequest<'_>) -> Identity {
    let target = match &req.target {
        Target::Name(n) => format!("{}/{n}", req.kind.resource()),
        Target::Selector(s) => format!("{}/*{{{s}}}", req.kind.resource()),
    };
    let selector = match req.metric_selector.trim() {
        "" => target,
        m => format!("{target} {m}"),
    };
    Identity {
        namespace: req.namespace.to_string(),
        selector,
    }
}

pub(super) async fn read(
    config: &MetricsConfig,
    cache: &PollCache,
    pods: Option<&PodCache>,
    req: &ObjectRequest<'_>,
) -> Result<ObjectReading, ProviderError> {
    let unknown =
        || ProviderError::UnknownMetric(format!("{}/{}", req.kind.resource(), req.metric));
    let def = config.get(req.metric).ok_or_else(unknown)?;
    let template = def.objects.get(&req.kind).ok_or_else(unknown)?;
    let reqs = selector::parse(req.metric_selector).map_err(bad)?;
    let mut matchers = to_matchers(req.namespace, &reqs).map_err(bad)?;
    let names = objects(req, pods).await?;
    if names.is_empty() {
        return Err(ProviderError::Unavailable(format!(
            "metric {}: no {} match the selector in namespace {:?}",
            def.name,
            req.kind.resource(),
            req.namespace
        )));
    }
    if req.kind != ObjectKind::Namespaces {
        matchers.push(',');
        matchers.push_str(&names_matcher(req.kind.label(), &names));
    }
    let series = cache
        .get(
            def.clone(),
            def.render_template(template, req.namespace, &matchers),
            identity(req),
        )
        .await?;
    let label = req.kind.label();
    let items: Vec<ObjectValue> = series
        .into_iter()
        .filter(|s| {
            s.labels
                .get("namespace")
                .is_none_or(|ns| ns == req.namespace)
        })
        .filter_map(|s| {
            let name = s.labels.get(label)?;
            names.contains(name).then(|| ObjectValue {
                name: name.clone(),
                value: s.value,
                timestamp: s.timestamp,
            })
        })
        .collect();
    if items.is_empty() {
        return Err(ProviderError::Unavailable(format!(
            "metric {}: none of the {} {} has a series (no series is never a zero)",
            def.name,
            names.len(),
            req.kind.resource()
        )));
    }
    Ok(ObjectReading {
        metric: def.name.clone(),
        items,
        window_secs: def.window.as_secs(),
        selector: (!req.metric_selector.trim().is_empty()).then_some(reqs),
    })
}
