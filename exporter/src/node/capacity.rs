//! The node's capacity type from the labels the platforms set:
//! Karpenter `karpenter.sh/capacity-type`, EKS managed node groups
//! `eks.amazonaws.com/capacityType`, GKE `cloud.google.com/gke-spot` and
//! `cloud.google.com/gke-preemptible`, AKS
//! `kubernetes.azure.com/scalesetpriority`. The first label present
//! decides, in that order.

use std::collections::BTreeMap;

/// What capacity a node runs on: the `capacity_type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    Spot,
    OnDemand,
    /// Karpenter `reserved`, EKS `CAPACITY_BLOCK`: paid ahead; priced as
    /// on-demand unless the node or file says otherwise.
    Reserved,
    /// None of the labels: priced as on-demand.
    Unknown,
}

impl Capacity {
    pub fn as_str(self) -> &'static str {
        match self {
            Capacity::Spot => "spot",
            Capacity::OnDemand => "on-demand",
            Capacity::Reserved => "reserved",
            Capacity::Unknown => "unknown",
        }
    }
}

/// The capacity type the node's labels say.
pub fn of(labels: &BTreeMap<String, String>) -> Capacity {
    let get = |k: &str| labels.get(k).map(|v| v.trim().to_ascii_lowercase());
    if let Some(v) = get("karpenter.sh/capacity-type") {
        return match v.as_str() {
            "spot" => Capacity::Spot,
            "reserved" => Capacity::Reserved,
            "on-demand" => Capacity::OnDemand,
            _ => Capacity::Unknown,
        };
    }
    if let Some(v) = get("eks.amazonaws.com/capacityType") {
        return match v.as_str() {
            "spot" => Capacity::Spot,
            "capacity_block" => Capacity::Reserved,
            "on_demand" => Capacity::OnDemand,
            _ => Capacity::Unknown,
        };
    }
    let gke_spot = [
        "cloud.google.com/gke-spot",
        "cloud.google.com/gke-preemptible",
    ]
    .iter()
    .any(|k| get(k).as_deref() == Some("true"));
    if gke_spot {
        return Capacity::Spot;
    }
    if labels.contains_key("cloud.google.com/gke-nodepool") {
        return Capacity::OnDemand;
    }
    match get("kubernetes.azure.com/scalesetpriority").as_deref() {
        Some("spot") => Capacity::Spot,
        Some("regular") => Capacity::OnDemand,
        Some(_) => Capacity::Unknown,
        None if labels.contains_key("kubernetes.azure.com/agentpool") => Capacity::OnDemand,
        None => Capacity::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn each_platform_label_names_the_capacity() {
        for (kv, want) in [
            (("karpenter.sh/capacity-type", "spot"), Capacity::Spot),
            (
                ("karpenter.sh/capacity-type", "on-demand"),
                Capacity::OnDemand,
            ),
            (
                ("karpenter.sh/capacity-type", "reserved"),
                Capacity::Reserved,
            ),
            (("eks.amazonaws.com/capacityType", "SPOT"), Capacity::Spot),
            (
                ("eks.amazonaws.com/capacityType", "ON_DEMAND"),
                Capacity::OnDemand,
            ),
            (("cloud.google.com/gke-spot", "true"), Capacity::Spot),
            (("cloud.google.com/gke-preemptible", "true"), Capacity::Spot),
            (("cloud.google.com/gke-nodepool", "gpu"), Capacity::OnDemand),
            (
                ("kubernetes.azure.com/scalesetpriority", "spot"),
                Capacity::Spot,
            ),
            (
                ("kubernetes.azure.com/agentpool", "gpu"),
                Capacity::OnDemand,
            ),
            (("kubernetes.io/os", "linux"), Capacity::Unknown),
        ] {
            assert_eq!(of(&labels(&[kv])), want, "{kv:?}");
        }
    }

    #[test]
    fn karpenter_wins_over_the_node_group_label() {
        let both = labels(&[
            ("eks.amazonaws.com/capacityType", "ON_DEMAND"),
            ("karpenter.sh/capacity-type", "spot"),
        ]);
        assert_eq!(of(&both), Capacity::Spot);
    }
}
