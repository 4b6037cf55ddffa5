//! From what the doctor found to the chart values for this cluster and
//! the coexistence mode they make (docs/install.md's decision table).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::fit::Check;
use super::owners::{ApiServiceOwner, Component, Owner};

/// The values a cluster without the Prometheus Operator needs: its kinds
/// do not exist there, so the release could not create them.
const MONITORING_VALUES: [&str; 4] = [
    "exporter.serviceMonitor.enabled",
    "adapter.serviceMonitor.enabled",
    "activator.serviceMonitor.enabled",
    "prometheusRule.enabled",
];

/// The values to set (key → value) and the mode they install in.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    pub mode: String,
    pub values: BTreeMap<String, Value>,
    pub notes: Vec<String>,
}

fn present(components: &[Component], name: &str) -> Option<bool> {
    components
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.present)
}

/// The coexistence mode: who gpuscale shares the metrics APIs with.
fn mode(owners: &[ApiServiceOwner]) -> String {
    if owners.iter().any(|o| o.owner.is_none()) {
        return "unknown (the APIServices could not be read)".into();
    }
    let held_by = |who: Owner| owners.iter().any(|o| o.owner == Some(who));
    let mut beside = Vec::new();
    if held_by(Owner::Keda) {
        beside.push("KEDA");
    }
    if held_by(Owner::PrometheusAdapter) {
        beside.push("prometheus-adapter");
    }
    if held_by(Owner::Unknown) {
        beside.push("another metrics server");
    }
    if beside.is_empty() {
        "alone".into()
    } else {
        format!("beside {}", beside.join(" and "))
    }
}

fn api_service_values(owners: &[ApiServiceOwner], values: &mut BTreeMap<String, Value>) {
    // The two custom-metrics versions move together (one server answers
    // both in prometheus-adapter and in gpuscale).
    let custom_taken = owners
        .iter()
        .filter(|o| o.name.contains("custom.metrics"))
        .any(|o| o.owner.is_some_and(Owner::is_other));
    for o in owners {
        let Some(owner) = o.owner else { continue };
        let ours = if o.name.contains("custom.metrics") {
            !custom_taken
        } else {
            !owner.is_other()
        };
        values.insert(o.value.clone(), json!(ours));
    }
}

/// The chart values for the cluster as found; a value whose input could
/// not be read is left out (and the report says which read failed).
pub fn suggest(
    owners: &[ApiServiceOwner],
    components: &[Component],
    kubelet: &Check,
) -> Suggestion {
    let mut values = BTreeMap::new();
    let mut notes = Vec::new();
    api_service_values(owners, &mut values);
    if present(components, "KEDA") == Some(true) {
        values.insert("adapter.keda.enabled".into(), json!(true));
        notes.push("KEDA reaches gpuscale through its external scaler: ScaledObjects use `type: external` or `external-push` triggers with scalerAddress gpuscale-adapter.<namespace>.svc:9443 (docs/migrate-keda.md)".into());
    }
    match present(components, "cert-manager") {
        Some(true) => {
            values.insert("adapter.tls.certManager".into(), json!(true));
        }
        Some(false) => {
            values.insert("adapter.tls.certManager".into(), json!(false));
            notes.push("without cert-manager the serving certificate comes from adapter.tls.secretName and adapter.tls.caBundle (docs/install.md)".into());
        }
        None => {}
    }
    if present(components, "Prometheus Operator") == Some(false) {
        for key in MONITORING_VALUES {
            values.insert(key.into(), json!(false));
        }
        notes.push("no Prometheus Operator: scrape the exporter with a plain scrape config (deploy/examples/prometheus-scrape-config.yaml)".into());
    }
    if let Some((key, value)) = &kubelet.value {
        values.insert(key.clone(), json!(value));
    }
    Suggestion {
        mode: mode(owners),
        values,
        notes,
    }
}
