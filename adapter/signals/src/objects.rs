//! The Kubernetes object kinds a custom metric can describe, with the
//! Prometheus label that names each object.

/// An object kind served on `custom.metrics.k8s.io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Pods,
    Services,
    Deployments,
    StatefulSets,
    Namespaces,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 5] = [
        Self::Pods,
        Self::Services,
        Self::Deployments,
        Self::StatefulSets,
        Self::Namespaces,
    ];

    /// The resource as it appears in API paths and config keys.
    pub fn resource(self) -> &'static str {
        match self {
            Self::Pods => "pods",
            Self::Services => "services",
            Self::Deployments => "deployments",
            Self::StatefulSets => "statefulsets",
            Self::Namespaces => "namespaces",
        }
    }

    pub fn from_resource(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.resource() == s)
    }

    /// `describedObject.kind`.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Pods => "Pod",
            Self::Services => "Service",
            Self::Deployments => "Deployment",
            Self::StatefulSets => "StatefulSet",
            Self::Namespaces => "Namespace",
        }
    }

    /// `describedObject.apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::Deployments | Self::StatefulSets => "apps/v1",
            _ => "v1",
        }
    }

    /// The Prometheus label holding the object's name (kube-state-metrics
    /// and the exporter spell them so).
    pub fn label(self) -> &'static str {
        match self {
            Self::Pods => "pod",
            Self::Services => "service",
            Self::Deployments => "deployment",
            Self::StatefulSets => "statefulset",
            Self::Namespaces => "namespace",
        }
    }

    /// Namespaces are cluster-scoped; every other kind lives in one.
    pub fn namespaced(self) -> bool {
        self != Self::Namespaces
    }
}
