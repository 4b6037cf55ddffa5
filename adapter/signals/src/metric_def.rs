//! One served metric as the rest of the adapter sees it, whether it came
//! from a config file or a preset.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::objects::ObjectKind;

/// What an empty Prometheus result means for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyPolicy {
    /// No series matched: an error (503), never a number. The default.
    Error,
    /// No series matched: the value is 0 (for counters that are truly zero).
    Zero,
}

/// Where pod identity (workload, kind, pod labels) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodMetadata {
    /// The exporter's `gpu_pod_info`: every pod that holds a GPU.
    #[default]
    Exporter,
    /// kube-state-metrics' `kube_pod_labels`, `kube_pod_owner` and
    /// `kube_replicaset_owner`: every pod in the cluster.
    KubeStateMetrics,
}

impl PodMetadata {
    /// Spellings accepted by the config key `pod_metadata`.
    pub const NAMES: &[&str] = &["exporter", "kube-state-metrics"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "exporter" => Some(Self::Exporter),
            "kube-state-metrics" => Some(Self::KubeStateMetrics),
            _ => None,
        }
    }

    /// Series that must exist for the join to find any pod.
    pub fn required_series(self) -> &'static [&'static str] {
        match self {
            Self::Exporter => &["gpu_pod_info"],
            Self::KubeStateMetrics => &["kube_pod_labels", "kube_pod_owner"],
        }
    }
}

/// One served metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricDef {
    pub name: String,
    pub query: String,
    pub empty: EmptyPolicy,
    pub freshness: Duration,
    pub window: Duration,
    pub description: String,
    /// Active (0→1) when the value is above this; see [`crate::activation`].
    pub activation: f64,
    /// Per-object queries served on `custom.metrics.k8s.io`, by kind; each
    /// keeps the kind's object label (`sum by (namespace, pod) (…)`).
    pub objects: BTreeMap<ObjectKind, String>,
    /// Source of `${pods}`.
    pub pod_metadata: PodMetadata,
    /// The series label that holds the request's namespace (`${matchers}`
    /// pins it). `namespace` unless a holder names it otherwise, e.g. the
    /// KEDA HTTP add-on's `route_namespace`.
    pub namespace_label: String,
}

impl MetricDef {
    /// Served on `external.metrics.k8s.io` (a definition may be custom only).
    pub fn external(&self) -> bool {
        !self.query.is_empty()
    }

    /// Fill another template of this metric (a per-object one): `${matchers}`
    /// gets `matchers` (namespace matcher first), `${namespace}` the
    /// (validated) namespace.
    pub fn render_template(&self, template: &str, namespace: &str, matchers: &str) -> String {
        template
            .replace("${matchers}", matchers)
            .replace("${namespace}", namespace)
    }

    /// Whether the template joins on pod metadata.
    pub fn joins(&self) -> bool {
        self.query.contains("${pods}") || self.query.contains("${pod_matchers}")
    }
}

/// Defaults for keys left out of an entry.
pub const DEFAULT_FRESHNESS: Duration = Duration::from_secs(30);
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// Active when the value is above 0.
pub const DEFAULT_ACTIVATION: f64 = 0.0;
/// The label `${matchers}` pins to the request's namespace.
pub const DEFAULT_NAMESPACE_LABEL: &str = "namespace";
