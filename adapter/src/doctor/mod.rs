//! `gpuscale-adapter doctor`: before an install, what in the cluster would conflict with
//! gpuscale's defaults (who serves each metrics APIService; KEDA,
//! prometheus-adapter, cert-manager, the Prometheus Operator; the
//! kubelet's pod-resources directory; the namespace's Pod Security level),
//! and the chart values that fit. Reads only.

pub mod fit;
pub mod owners;
pub mod read;
pub mod render;
pub mod suggest;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use fit::{Check, Verdict};
use owners::{ApiServiceOwner, Component};
use read::Observed;

/// Each API call's bound: a cluster that does not answer is a failed
/// read, never a hang.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// Why the doctor exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error(
        "{conflicts} conflict(s) with a default install and {failed} failed read(s) (see the report)"
    )]
    Found { conflicts: usize, failed: usize },
    #[error("{0}")]
    Kube(#[from] crate::auth::kube::KubeError),
    #[error("encoding the report: {0}")]
    Encode(#[from] serde_json::Error),
}

/// What the doctor found and suggests.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub namespace: String,
    pub api_services: Vec<ApiServiceOwner>,
    pub components: Vec<Component>,
    pub kubelet: Check,
    pub pod_security: Check,
    pub mode: String,
    /// Chart values for this cluster (`--set key=value`).
    pub values: BTreeMap<String, serde_json::Value>,
    pub notes: Vec<String>,
    /// What a default install would break or be refused by.
    pub conflicts: Vec<String>,
    /// Reads that failed: what they would have shown is not known.
    pub failed_reads: Vec<String>,
}

fn failed_reads(o: &Observed) -> Vec<String> {
    [
        o.api_services.as_ref().err(),
        o.crds.as_ref().err(),
        o.deployments.as_ref().err(),
        o.nodes.as_ref().err(),
        o.namespace.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect()
}

fn conflicts(owners: &[ApiServiceOwner], checks: [&Check; 2]) -> Vec<String> {
    let mut out: Vec<String> = owners
        .iter()
        .filter_map(|o| {
            let owner = o.owner.filter(|w| w.is_other())?;
            Some(format!(
                "{} is served by {} ({}): a default install fails on it (Helm) or takes it over (kubectl apply); set {}=false",
                o.name,
                owner.label(),
                o.service.as_deref().unwrap_or("no Service"),
                o.value
            ))
        })
        .collect();
    out.extend(
        checks
            .iter()
            .filter(|c| c.verdict == Verdict::Problem)
            .map(|c| c.detail.clone()),
    );
    out
}

/// Judges what was read.
pub fn assess(observed: &Observed, namespace: &str) -> Report {
    let api_services = owners::api_service_owners(observed);
    let components = owners::components(observed, &api_services);
    let kubelet = fit::kubelet(&observed.nodes);
    let pod_security = fit::pod_security(namespace, &observed.namespace);
    let suggestion = suggest::suggest(&api_services, &components, &kubelet);
    Report {
        namespace: namespace.to_string(),
        conflicts: conflicts(&api_services, [&kubelet, &pod_security]),
        failed_reads: failed_reads(observed),
        api_services,
        components,
        kubelet,
        pod_security,
        mode: suggestion.mode,
        values: suggestion.values,
        notes: suggestion.notes,
    }
}

/// A client for one look: no retries of 429/503 (kube's default retries
/// for minutes; an API that answers 503 now is reported now), the
/// kubeconfig's connection otherwise.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, DoctorError> {
    let mut config = crate::auth::kube::client_config(kubeconfig).await?;
    config.default_retry = false;
    config.read_timeout = Some(READ_TIMEOUT);
    Ok(kube::Client::try_from(config).map_err(crate::auth::kube::KubeError::Api)?)
}

/// Reads the cluster, prints the report; an error when a conflict was
/// found or a read failed.
pub async fn command(
    client: &kube::Client,
    namespace: &str,
    output: Output,
) -> Result<(), DoctorError> {
    let observed = read::observe(client, namespace, READ_TIMEOUT).await;
    let report = assess(&observed, namespace);
    match output {
        Output::Text => print!("{}", render::text(&report)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    if report.conflicts.is_empty() && report.failed_reads.is_empty() {
        Ok(())
    } else {
        Err(DoctorError::Found {
            conflicts: report.conflicts.len(),
            failed: report.failed_reads.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::read::{ApiServiceInfo, DeploymentInfo, NodeInfo};
    use super::*;

    fn cluster() -> Observed {
        Observed {
            api_services: Ok(vec![]),
            crds: Ok(vec![]),
            deployments: Ok(vec![]),
            nodes: Ok(vec![NodeInfo {
                name: "gpu-1".into(),
                kubelet_version: "v1.33.1".into(),
                labels: BTreeMap::new(),
            }]),
            namespace: Ok(None),
        }
    }

    #[test]
    fn an_empty_cluster_installs_alone_with_no_conflict() {
        let r = assess(&cluster(), "gpuscale");
        assert_eq!(r.mode, "alone");
        assert!(r.conflicts.is_empty() && r.failed_reads.is_empty(), "{r:?}");
        assert_eq!(r.values["adapter.apiServices.external"], true);
        assert_eq!(r.values["adapter.tls.certManager"], false);
    }

    #[test]
    fn beside_keda_and_prometheus_adapter_each_keeps_its_apiservices() {
        let mut c = cluster();
        let svc = |name: &str, s: &str| ApiServiceInfo {
            name: name.into(),
            service: Some(s.into()),
        };
        c.api_services = Ok(vec![
            svc(
                "v1beta1.external.metrics.k8s.io",
                "keda/keda-operator-metrics-apiserver",
            ),
            svc(
                "v1beta1.custom.metrics.k8s.io",
                "monitoring/prometheus-adapter",
            ),
        ]);
        c.crds = Ok(vec!["scaledobjects.keda.sh".into()]);
        c.deployments = Ok(vec![DeploymentInfo {
            namespace: "cert-manager".into(),
            name: "cert-manager".into(),
            app: None,
        }]);
        let r = assess(&c, "gpuscale");
        assert_eq!(r.mode, "beside KEDA and prometheus-adapter");
        for key in [
            "adapter.apiServices.external",
            "adapter.apiServices.customV1beta1",
            "adapter.apiServices.customV1beta2",
        ] {
            assert_eq!(r.values[key], false, "{key}");
        }
        assert_eq!(r.values["adapter.keda.enabled"], true);
        assert_eq!(r.values["adapter.tls.certManager"], true);
        assert_eq!(r.conflicts.len(), 2, "{:?}", r.conflicts);
    }

    #[test]
    fn a_failed_read_is_not_known_never_absent() {
        let mut c = cluster();
        c.api_services = Err("reading APIServices: 503".into());
        c.deployments = Err("reading Deployments: 503".into());
        let r = assess(&c, "gpuscale");
        assert!(r.api_services.iter().all(|a| a.owner.is_none()));
        let keda = r.components.iter().find(|c| c.name == "KEDA").unwrap();
        assert_eq!(keda.present, None);
        assert!(!r.values.contains_key("adapter.apiServices.external"));
        assert_eq!(r.failed_reads.len(), 2);
        assert!(render::text(&r).contains("NOT KNOWN"));
    }

    #[test]
    fn pod_security_and_kubelet_directories() {
        let mut c = cluster();
        c.namespace = Ok(Some(BTreeMap::from([(
            "pod-security.kubernetes.io/enforce".to_string(),
            "baseline".to_string(),
        )])));
        c.nodes = Ok(vec![NodeInfo {
            name: "n".into(),
            kubelet_version: "v1.31.2+k0s".into(),
            labels: BTreeMap::new(),
        }]);
        let r = assess(&c, "gpuscale");
        assert_eq!(r.pod_security.verdict, Verdict::Problem);
        assert_eq!(
            r.values["exporter.podResourcesDir"],
            "/var/lib/k0s/kubelet/pod-resources"
        );
        c.nodes = Ok(vec![NodeInfo {
            name: "old".into(),
            kubelet_version: "v1.27.9".into(),
            labels: BTreeMap::new(),
        }]);
        assert_eq!(assess(&c, "gpuscale").kubelet.verdict, Verdict::Problem);
    }
}
