//! Who serves a metrics APIService, and which known components a cluster
//! runs, from the names their charts give their Services, Deployments
//! and CRDs.

use serde::Serialize;

use super::read::{DeploymentInfo, Observed};

/// The metrics APIServices gpuscale can register, with the chart value
/// that switches each one.
pub const API_SERVICES: [(&str, &str); 3] = [
    (
        "v1beta1.external.metrics.k8s.io",
        "adapter.apiServices.external",
    ),
    (
        "v1beta2.custom.metrics.k8s.io",
        "adapter.apiServices.customV1beta2",
    ),
    (
        "v1beta1.custom.metrics.k8s.io",
        "adapter.apiServices.customV1beta1",
    ),
];

/// Who serves an API group/version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Owner {
    /// Not registered: gpuscale can take it.
    None,
    Keda,
    PrometheusAdapter,
    Gpuscale,
    /// Registered, pointing at a Service of no component we know (or at
    /// no Service at all).
    Unknown,
}

impl Owner {
    /// From the `namespace/name` of the Service an APIService points to.
    pub fn of_service(service: Option<&str>) -> Self {
        let Some(s) = service.map(str::to_ascii_lowercase) else {
            return Self::Unknown;
        };
        if s.contains("keda") {
            Self::Keda
        } else if s.contains("prometheus-adapter") || s.contains("custom-metrics-apiserver") {
            Self::PrometheusAdapter
        } else if s.contains("gpuscale") {
            Self::Gpuscale
        } else {
            Self::Unknown
        }
    }

    /// A name for people.
    pub fn label(self) -> &'static str {
        match self {
            Self::None => "nobody",
            Self::Keda => "KEDA",
            Self::PrometheusAdapter => "prometheus-adapter",
            Self::Gpuscale => "gpuscale",
            Self::Unknown => "an unknown server",
        }
    }

    /// Another server holds it: a default install conflicts.
    pub fn is_other(self) -> bool {
        matches!(self, Self::Keda | Self::PrometheusAdapter | Self::Unknown)
    }
}

/// One metrics APIService as judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiServiceOwner {
    pub name: String,
    /// The chart value that switches gpuscale's copy.
    pub value: String,
    /// `None` when the APIServices could not be read.
    pub owner: Option<Owner>,
    pub service: Option<String>,
}

/// Who serves each metrics APIService; every owner unknown when the
/// APIServices could not be read.
pub fn api_service_owners(observed: &Observed) -> Vec<ApiServiceOwner> {
    API_SERVICES
        .iter()
        .map(|(name, value)| {
            let found = observed
                .api_services
                .as_ref()
                .ok()
                .map(|all| all.iter().find(|a| a.name == *name));
            ApiServiceOwner {
                name: (*name).to_string(),
                value: (*value).to_string(),
                owner: found.map(|a| match a {
                    None => Owner::None,
                    Some(a) => Owner::of_service(a.service.as_deref()),
                }),
                service: found.flatten().and_then(|a| a.service.clone()),
            }
        })
        .collect()
}

/// A component gpuscale installs beside, and how it is recognised.
struct Known {
    name: &'static str,
    crds: &'static [&'static str],
    deployment: fn(&str) -> bool,
    owner: Option<Owner>,
}

const KNOWN: [Known; 4] = [
    Known {
        name: "KEDA",
        crds: &["scaledobjects.keda.sh", "triggerauthentications.keda.sh"],
        deployment: |n| n.contains("keda-operator"),
        owner: Some(Owner::Keda),
    },
    Known {
        name: "prometheus-adapter",
        crds: &[],
        deployment: |n| n.contains("prometheus-adapter"),
        owner: Some(Owner::PrometheusAdapter),
    },
    Known {
        name: "cert-manager",
        crds: &["certificates.cert-manager.io", "issuers.cert-manager.io"],
        deployment: |n| n == "cert-manager",
        owner: None,
    },
    Known {
        name: "Prometheus Operator",
        crds: &[
            "servicemonitors.monitoring.coreos.com",
            "podmonitors.monitoring.coreos.com",
            "prometheusrules.monitoring.coreos.com",
        ],
        deployment: |n| n.contains("prometheus") && n.contains("operator"),
        owner: None,
    },
];

/// Whether a component runs, and what showed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    pub name: String,
    /// `None` when nothing was found but a read failed: not known.
    pub present: Option<bool>,
    /// The CRDs, APIServices and Deployments that showed it.
    pub evidence: Vec<String>,
}

impl Component {
    /// Present, as far as the reads tell.
    pub fn is_present(&self) -> bool {
        self.present == Some(true)
    }
}

fn matches_deployment(d: &DeploymentInfo, is: fn(&str) -> bool) -> bool {
    is(&d.name.to_ascii_lowercase())
        || d.app
            .as_deref()
            .is_some_and(|a| is(&a.to_ascii_lowercase()))
}

/// Every known component, present, absent or unknown.
pub fn components(observed: &Observed, owners: &[ApiServiceOwner]) -> Vec<Component> {
    KNOWN
        .iter()
        .map(|k| {
            let mut evidence = Vec::new();
            let mut failed = false;
            match &observed.crds {
                Ok(crds) => evidence.extend(
                    k.crds
                        .iter()
                        .filter(|c| crds.iter().any(|have| have == *c))
                        .map(|c| format!("CRD {c}")),
                ),
                Err(_) => failed |= !k.crds.is_empty(),
            }
            if observed.api_services.is_err() {
                failed |= k.owner.is_some();
            }
            evidence.extend(
                owners
                    .iter()
                    .filter(|o| o.owner.is_some() && o.owner == k.owner)
                    .map(|o| format!("APIService {}", o.name)),
            );
            match &observed.deployments {
                Ok(ds) => evidence.extend(
                    ds.iter()
                        .filter(|d| matches_deployment(d, k.deployment))
                        .map(|d| format!("Deployment {}/{}", d.namespace, d.name)),
                ),
                Err(_) => failed = true,
            }
            let present = if !evidence.is_empty() {
                Some(true)
            } else if failed {
                None
            } else {
                Some(false)
            };
            Component {
                name: k.name.to_string(),
                present,
                evidence,
            }
        })
        .collect()
}
