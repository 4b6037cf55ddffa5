//! Where Kubernetes identities meet Prometheus series. An inference server's
//! series carry its own labels plus `namespace`, `pod` and `container` from
//! service discovery, never `workload`; a pod metadata series does. The
//! request's selector is split between the two, and `${pods}` becomes one
//! series per selected pod (labels `namespace, pod`, value 1) from the
//! configured source, ready for `* on (namespace, pod) group_left ()`.

use super::matchers::to_matchers;
use crate::metric_def::{DEFAULT_NAMESPACE_LABEL, MetricDef, PodMetadata};
use crate::selector::{Requirement, SelectorError};

/// Selector keys answered by the metadata series; every other key (`pod`,
/// `container`, `model_name`, …) is matched on the server's own series.
pub fn is_pod_key(key: &str) -> bool {
    key == "workload" || key == "workload_kind" || key.starts_with("label_")
}

/// Everything a template can ask for, rendered for one request. Each matcher
/// list starts with the request's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matchers {
    /// The whole selector (`${matchers}`).
    pub all: String,
    /// The keys that are not pod metadata (`${series_matchers}`).
    pub series: String,
    /// The pod metadata keys (`${pod_matchers}`).
    pub pod: String,
    /// One series per selected pod (`${pods}`), parenthesised.
    pub pods: String,
}

impl Matchers {
    pub fn new(
        namespace: &str,
        reqs: &[Requirement],
        source: PodMetadata,
    ) -> Result<Self, SelectorError> {
        let (pod_reqs, series_reqs): (Vec<Requirement>, Vec<Requirement>) =
            reqs.iter().cloned().partition(|r| is_pod_key(r.key()));
        let pod = to_matchers(namespace, &pod_reqs)?;
        let pods = match source {
            PodMetadata::Exporter => format!("(group by (namespace, pod) (gpu_pod_info{{{pod}}}))"),
            PodMetadata::KubeStateMetrics => kube_state_metrics(namespace, &pod_reqs)?,
        };
        Ok(Self {
            all: to_matchers(namespace, reqs)?,
            series: to_matchers(namespace, &series_reqs)?,
            pod,
            pods,
        })
    }

    /// Pin the namespace on `label` instead of `namespace` in `${matchers}`
    /// and `${series_matchers}` (a holder that names the namespace of what it
    /// holds in its own label). The selector may not name that label: it
    /// would reach into another namespace's series.
    fn pin_namespace_to(&mut self, label: &str, reqs: &[Requirement]) -> Result<(), SelectorError> {
        if let Some(r) = reqs.iter().find(|r| r.key() == label) {
            return Err(SelectorError::Reserved(r.key().to_string()));
        }
        for list in [&mut self.all, &mut self.series] {
            if let Some(rest) = list.strip_prefix("namespace=") {
                *list = format!("{label}={rest}");
            }
        }
        Ok(())
    }

    /// The value of a placeholder name.
    pub fn get<'a>(&'a self, name: &str, namespace: &'a str) -> Option<&'a str> {
        Some(match name {
            "matchers" => &self.all,
            "series_matchers" => &self.series,
            "pod_matchers" => &self.pod,
            "pods" => &self.pods,
            "namespace" => namespace,
            _ => return None,
        })
    }
}

/// Pods selected through kube-state-metrics: `label_*` keys on
/// `kube_pod_labels`; `workload`/`workload_kind` on the pod's controller, or
/// for a ReplicaSet's pod on the Deployment that owns the ReplicaSet (as the
/// exporter resolves it).
fn kube_state_metrics(namespace: &str, pod_reqs: &[Requirement]) -> Result<String, SelectorError> {
    let (owner_reqs, label_reqs): (Vec<Requirement>, Vec<Requirement>) = pod_reqs
        .iter()
        .cloned()
        .partition(|r| !r.key().starts_with("label_"));
    let owner_reqs: Vec<Requirement> = owner_reqs
        .iter()
        .map(|r| match r.key() {
            "workload" => r.with_key("owner_name"),
            _ => r.with_key("owner_kind"),
        })
        .collect();
    let labels = to_matchers(namespace, &label_reqs)?;
    let owner = to_matchers(namespace, &owner_reqs)?;
    let ns = to_matchers(namespace, &[])?;
    Ok(format!(
        "(group by (namespace, pod) (kube_pod_labels{{{labels}}}) * on (namespace, pod) group by (namespace, pod) (kube_pod_owner{{{owner},owner_kind!=\"ReplicaSet\"}} or (kube_pod_owner{{{ns},owner_kind=\"ReplicaSet\"}} * on (namespace, owner_name) group_left () group by (namespace, owner_name) (label_replace(kube_replicaset_owner{{{owner},owner_kind=\"Deployment\"}}, \"owner_name\", \"$1\", \"replicaset\", \"(.*)\")))))"
    ))
}

/// Fill a metric's template for one request (placeholders in
/// [`crate::config::PLACEHOLDERS`], see [`Matchers`]); every matcher list
/// starts with the namespace. A query over
/// [`crate::limits::MAX_QUERY_BYTES`] is refused: a template may repeat
/// the selector several times.
pub fn render(
    def: &MetricDef,
    namespace: &str,
    reqs: &[Requirement],
) -> Result<String, SelectorError> {
    let mut m = Matchers::new(namespace, reqs, def.pod_metadata)?;
    if def.namespace_label != DEFAULT_NAMESPACE_LABEL {
        m.pin_namespace_to(&def.namespace_label, reqs)?;
    }
    let query = fill(&def.query, |name| m.get(name, namespace).map(str::to_owned));
    if query.len() > crate::limits::MAX_QUERY_BYTES {
        return Err(SelectorError::QueryTooLong(query.len()));
    }
    Ok(query)
}

/// Fill `${name}` placeholders in one pass (a value never contains `${`, but
/// a single pass makes sure no value is ever read as a template).
pub fn fill(template: &str, value: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len() + 128);
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                match value(&after[..end]) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[start..start + 3 + end]),
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::parse;

    fn m(sel: &str, source: PodMetadata) -> Matchers {
        Matchers::new("inference", &parse(sel).unwrap(), source).unwrap()
    }

    #[test]
    fn the_selector_is_split_between_series_and_pods() {
        let x = m(
            "workload=chat,model_name=m,label_team in (a),pod=chat-0",
            PodMetadata::Exporter,
        );
        assert_eq!(
            x.all,
            r#"namespace="inference",label_team=~"a",model_name="m",pod="chat-0",workload="chat""#
        );
        assert_eq!(
            x.series,
            r#"namespace="inference",model_name="m",pod="chat-0""#
        );
        assert_eq!(
            x.pod,
            r#"namespace="inference",label_team=~"a",workload="chat""#
        );
        assert_eq!(
            x.pods,
            r#"(group by (namespace, pod) (gpu_pod_info{namespace="inference",label_team=~"a",workload="chat"}))"#
        );
    }

    #[test]
    fn kube_state_metrics_resolves_deployments_through_replicasets() {
        let x = m(
            "workload=chat,workload_kind!=Job,label_team=a",
            PodMetadata::KubeStateMetrics,
        );
        assert_eq!(
            x.pods,
            r#"(group by (namespace, pod) (kube_pod_labels{namespace="inference",label_team="a"}) * on (namespace, pod) group by (namespace, pod) (kube_pod_owner{namespace="inference",owner_name="chat",owner_kind!="Job",owner_kind!="ReplicaSet"} or (kube_pod_owner{namespace="inference",owner_kind="ReplicaSet"} * on (namespace, owner_name) group_left () group by (namespace, owner_name) (label_replace(kube_replicaset_owner{namespace="inference",owner_name="chat",owner_kind!="Job",owner_kind="Deployment"}, "owner_name", "$1", "replicaset", "(.*)")))))"#
        );
    }

    #[test]
    fn fill_is_one_pass() {
        let out = fill("a{${x}} ${y} ${z", |n| {
            (n == "x").then(|| "${y}".to_string())
        });
        assert_eq!(out, "a{${y}} ${y} ${z");
    }
}
