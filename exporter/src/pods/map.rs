//! The pod map: kubelet allocations and pod metadata combined into the
//! lookups the encoder asks, rebuilt only when either source changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::kubeapi::{MetaView, PodMeta};
use super::labels::PodLabel;
use super::podresources::{ClaimDevice, KubeletSnapshot};
use super::slices::SliceView;
use crate::metrics::{Labels, PodLabelSet, PodLookup};

/// Which kubelet path allocated a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    DevicePlugin,
    Dra,
}

impl Via {
    pub const ALL: [Via; 2] = [Via::DevicePlugin, Via::Dra];

    /// The `allocation` label value.
    pub fn label(self) -> &'static str {
        match self {
            Via::DevicePlugin => "device_plugin",
            Via::Dra => "dra",
        }
    }
}

/// Why a claimed device of a configured driver got no UUID.
pub const DRA_UNMAPPED: [&str; 3] = ["other_driver", "not_in_slices", "no_uuid"];

/// One (device, pod, container) holding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holding {
    /// GPU or MIG UUID as the kubelet reports it (replica suffix removed),
    /// or as the ResourceSlice names it for a DRA claim.
    pub device: String,
    pub pod_key: (String, String),
    /// `namespace, pod, container, workload, workload_kind, label_*`.
    pub labels: Labels,
    /// Device-plugin resource name, or the DRA driver name.
    pub resource: String,
    pub via: Via,
    /// The ResourceClaim's name (DRA only).
    pub claim: String,
}

/// Immutable join of one kubelet snapshot and one metadata view.
#[derive(Debug, Default)]
pub struct PodMap {
    /// Device UUID → labels, when exactly one pod holds it.
    pub owners: HashMap<String, Arc<PodLabelSet>>,
    /// Sorted and deduplicated.
    pub holdings: Vec<Holding>,
    /// Pod UID → metadata (non-terminal pods).
    pub pods: HashMap<String, Arc<PodMeta>>,
    /// Devices attributed to pods, per allocation path.
    pub attributed: BTreeMap<Via, u64>,
    /// Claimed devices without a UUID, by reason (see [`DRA_UNMAPPED`]).
    pub dra_unmapped: BTreeMap<&'static str, u64>,
}

/// Pod labels of one container (or of the whole pod when `container` is None).
pub fn pod_labels(
    namespace: &str,
    pod: &str,
    container: Option<&str>,
    meta: Option<&PodMeta>,
    label_keys: &[PodLabel],
) -> Labels {
    let mut labels: Labels = Vec::with_capacity(5 + label_keys.len());
    labels.push(("namespace", namespace.to_owned()));
    labels.push(("pod", pod.to_owned()));
    if let Some(c) = container {
        labels.push(("container", c.to_owned()));
    }
    labels.push((
        "workload",
        meta.map(|m| m.workload.clone()).unwrap_or_default(),
    ));
    labels.push((
        "workload_kind",
        meta.map(|m| m.workload_kind.clone()).unwrap_or_default(),
    ));
    for (i, key) in label_keys.iter().enumerate() {
        let value = meta
            .and_then(|m| m.labels.get(i).cloned())
            .unwrap_or_default();
        labels.push((key.name, value));
    }
    labels
}

pub fn to_set(labels: &Labels) -> PodLabelSet {
    PodLabelSet(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

impl PodMap {
    pub fn build(
        kubelet: &KubeletSnapshot,
        meta: &MetaView,
        slices: &SliceView,
        label_keys: &[PodLabel],
    ) -> Self {
        let pods: HashMap<String, Arc<PodMeta>> = meta
            .pods
            .iter()
            .filter(|(_, m)| !m.terminal)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let live = Live::new(meta);
        let mut holdings: Vec<Holding> = Vec::new();
        for a in &kubelet.allocations {
            let Some(m) = live.get(&a.namespace, &a.pod) else {
                continue;
            };
            holdings.push(Holding {
                device: a.device.uuid.clone(),
                pod_key: (a.namespace.clone(), a.pod.clone()),
                labels: pod_labels(&a.namespace, &a.pod, Some(&a.container), m, label_keys),
                resource: a.resource.clone(),
                via: Via::DevicePlugin,
                claim: String::new(),
            });
        }
        let dra_unmapped = claim_holdings(kubelet, slices, &live, label_keys, &mut holdings);
        holdings.sort();
        holdings.dedup();
        Self {
            owners: single_owners(&holdings),
            attributed: count_attributed(&holdings),
            holdings,
            pods,
            dra_unmapped,
        }
    }
}

/// Which pods the kubelet reports still count: terminal pods are gone; so
/// is a pod a healthy watch no longer lists (the kubelet may report it until
/// its next refresh).
struct Live<'a> {
    by_name: HashMap<(&'a str, &'a str), &'a PodMeta>,
    fresh: bool,
}

impl<'a> Live<'a> {
    fn new(meta: &'a MetaView) -> Self {
        let by_name = meta
            .pods
            .values()
            .map(|m| ((m.namespace.as_str(), m.name.as_str()), &**m))
            .collect();
        Self {
            by_name,
            fresh: meta.synced && !meta.stale,
        }
    }

    /// `None` when the pod is gone; else its metadata, if known.
    fn get(&self, namespace: &str, pod: &str) -> Option<Option<&'a PodMeta>> {
        match self.by_name.get(&(namespace, pod)).copied() {
            Some(m) if m.terminal => None,
            None if self.fresh => None,
            m => Some(m),
        }
    }
}

/// Adds the holdings of DRA claims whose device a ResourceSlice names by
/// UUID; returns the claimed devices left without one, by reason.
fn claim_holdings(
    kubelet: &KubeletSnapshot,
    slices: &SliceView,
    live: &Live<'_>,
    label_keys: &[PodLabel],
    holdings: &mut Vec<Holding>,
) -> BTreeMap<&'static str, u64> {
    let mut dra_unmapped: BTreeMap<&'static str, u64> =
        DRA_UNMAPPED.iter().map(|r| (*r, 0)).collect();
    *dra_unmapped.entry("other_driver").or_default() += kubelet.other_driver_devices;
    let index = slices.index();
    for c in &kubelet.claims {
        let ClaimDevice {
            namespace,
            pod,
            container,
            claim,
            driver,
            ..
        } = c;
        let uuid = match index.get(&(driver.as_str(), c.pool.as_str(), c.device.as_str())) {
            Some(Some(d)) => d.uuid.clone(),
            Some(None) => {
                *dra_unmapped.entry("no_uuid").or_default() += 1;
                continue;
            }
            None => {
                *dra_unmapped.entry("not_in_slices").or_default() += 1;
                continue;
            }
        };
        let Some(m) = live.get(namespace, pod) else {
            continue;
        };
        holdings.push(Holding {
            device: uuid,
            pod_key: (namespace.clone(), pod.clone()),
            labels: pod_labels(namespace, pod, Some(container), m, label_keys),
            resource: driver.clone(),
            via: Via::Dra,
            claim: claim.clone(),
        });
    }
    dra_unmapped
}

/// Devices attributed per allocation path, each device once.
fn count_attributed(holdings: &[Holding]) -> BTreeMap<Via, u64> {
    let mut attributed: BTreeMap<Via, u64> = Via::ALL.iter().map(|v| (*v, 0)).collect();
    let mut counted = std::collections::HashSet::new();
    for h in holdings {
        if counted.insert((h.via, h.device.as_str())) {
            *attributed.entry(h.via).or_default() += 1;
        }
    }
    attributed
}

/// Device UUID → labels, for the devices exactly one pod holds.
fn single_owners(holdings: &[Holding]) -> HashMap<String, Arc<PodLabelSet>> {
    let mut by_device: BTreeMap<&str, Vec<&Holding>> = BTreeMap::new();
    for h in holdings {
        by_device.entry(h.device.as_str()).or_default().push(h);
    }
    let mut owners = HashMap::new();
    for (device, hs) in by_device {
        let first = hs[0];
        if hs.iter().any(|h| h.pod_key != first.pod_key) {
            continue; // shared by several pods: per-pod series instead
        }
        let mut labels = first.labels.clone();
        if hs.iter().any(|h| h.labels != first.labels) {
            // Several containers of one pod: the pod is known, the container is not.
            if let Some(c) = labels.iter_mut().find(|(k, _)| *k == "container") {
                c.1.clear();
            }
        }
        owners.insert(device.to_owned(), Arc::new(to_set(&labels)));
    }
    owners
}

/// The lookup handed to the encoder for one collection.
pub struct Joined {
    pub map: Arc<PodMap>,
    pub processes: HashMap<u32, Arc<PodLabelSet>>,
}

impl PodLookup for Joined {
    fn device_owner(&self, uuid: &str) -> Option<&PodLabelSet> {
        self.map.owners.get(uuid).map(|s| &**s)
    }

    fn process_owner(&self, pid: u32) -> Option<&PodLabelSet> {
        self.processes.get(&pid).map(|s| &**s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::podresources::{Allocation, DeviceId};

    fn alloc(ns: &str, pod: &str, c: &str, id: &str) -> Allocation {
        Allocation {
            namespace: ns.into(),
            pod: pod.into(),
            container: c.into(),
            resource: "nvidia.com/gpu".into(),
            device: DeviceId::parse(id),
        }
    }

    fn meta(uid: &str, ns: &str, name: &str, terminal: bool) -> (String, Arc<PodMeta>) {
        (
            uid.into(),
            Arc::new(PodMeta {
                uid: uid.into(),
                namespace: ns.into(),
                name: name.into(),
                terminal,
                workload: "w".into(),
                workload_kind: "Deployment".into(),
                labels: vec!["research".into()],
                containers: vec![],
            }),
        )
    }

    fn keys() -> Vec<PodLabel> {
        vec![PodLabel {
            key: "team".into(),
            name: "label_team",
        }]
    }

    fn get<'a>(set: &'a PodLabelSet, key: &str) -> Option<&'a str> {
        set.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn exclusive_shared_and_terminal() {
        let kubelet = KubeletSnapshot {
            allocations: vec![
                alloc("a", "p1", "c", "GPU-1"),
                alloc("a", "p2", "c", "GPU-2::0"),
                alloc("b", "p3", "c", "GPU-2::1"),
                alloc("a", "done", "c", "GPU-3"),
                alloc("a", "p1", "c2", "MIG-4"),
                alloc("a", "p1", "c3", "MIG-4"),
            ],
            ..KubeletSnapshot::default()
        };
        let view = MetaView {
            synced: true,
            stale: false,
            pods: [
                meta("u1", "a", "p1", false),
                meta("u2", "a", "p2", false),
                meta("u3", "b", "p3", false),
                meta("u4", "a", "done", true),
            ]
            .into_iter()
            .collect(),
        };
        let map = PodMap::build(&kubelet, &view, &SliceView::default(), &keys());
        let o1 = map.owners.get("GPU-1").map(|s| &**s);
        assert_eq!(o1.and_then(|s| get(s, "pod")), Some("p1"));
        assert_eq!(o1.and_then(|s| get(s, "label_team")), Some("research"));
        assert_eq!(o1.and_then(|s| get(s, "workload_kind")), Some("Deployment"));
        assert!(
            !map.owners.contains_key("GPU-2"),
            "shared GPU has no single owner"
        );
        assert!(!map.owners.contains_key("GPU-3"), "terminal pod dropped");
        let mig = map.owners.get("MIG-4").map(|s| &**s);
        assert_eq!(mig.and_then(|s| get(s, "container")), Some(""));
        assert_eq!(map.holdings.len(), 5);
        assert_eq!(map.pods.len(), 3);
    }

    #[test]
    fn deleted_pod_dropped_only_while_the_watch_is_healthy() {
        let kubelet = KubeletSnapshot {
            allocations: vec![alloc("a", "gone", "c", "GPU-1")],
            ..KubeletSnapshot::default()
        };
        let mut view = MetaView {
            synced: true,
            stale: false,
            pods: HashMap::new(),
        };
        assert!(
            PodMap::build(&kubelet, &view, &SliceView::default(), &[])
                .owners
                .is_empty()
        );
        view.stale = true;
        let map = PodMap::build(&kubelet, &view, &SliceView::default(), &[]);
        let o = map.owners.get("GPU-1").map(|s| &**s);
        assert_eq!(o.and_then(|s| get(s, "pod")), Some("gone"));
        assert_eq!(o.and_then(|s| get(s, "workload")), Some(""));
    }

    fn claim(pod: &str, claim: &str, device: &str, driver: &str) -> ClaimDevice {
        ClaimDevice {
            namespace: "a".into(),
            pod: pod.into(),
            container: "c".into(),
            claim: claim.into(),
            driver: driver.into(),
            pool: "n1".into(),
            device: device.into(),
            share_id: None,
        }
    }

    fn slices() -> SliceView {
        use crate::pods::slices::{Slice, SliceDevice};
        let dev = |uuid: &str| {
            Some(SliceDevice {
                uuid: uuid.into(),
                parent_uuid: None,
                profile: None,
            })
        };
        let slice = Slice {
            driver: "gpu.nvidia.com".into(),
            pool: "n1".into(),
            devices: [
                ("gpu-0".to_owned(), dev("GPU-0")),
                ("gpu-1".to_owned(), dev("GPU-1")),
                ("gpu-2".to_owned(), None),
            ]
            .into_iter()
            .collect(),
        };
        SliceView {
            synced: true,
            stale: false,
            version: Some("v1"),
            slices: [("s".to_owned(), Arc::new(slice))].into_iter().collect(),
        }
    }

    #[test]
    fn claims_map_through_slices_like_device_plugin_allocations() {
        let kubelet = KubeletSnapshot {
            allocations: vec![alloc("a", "p1", "c", "GPU-9")],
            claims: vec![
                claim("p1", "mine", "gpu-0", "gpu.nvidia.com"),
                // One claim shared by two pods: no single owner.
                claim("p2", "shared", "gpu-1", "gpu.nvidia.com"),
                claim("p3", "shared", "gpu-1", "gpu.nvidia.com"),
                claim("p2", "x", "gpu-2", "gpu.nvidia.com"),
                claim("p2", "y", "gpu-7", "gpu.nvidia.com"),
            ],
            other_driver_devices: 2,
        };
        let view = MetaView {
            synced: true,
            stale: false,
            pods: [
                meta("u1", "a", "p1", false),
                meta("u2", "a", "p2", false),
                meta("u3", "a", "p3", false),
            ]
            .into_iter()
            .collect(),
        };
        let map = PodMap::build(&kubelet, &view, &slices(), &[]);
        let o = map.owners.get("GPU-0").map(|s| &**s);
        assert_eq!(o.and_then(|s| get(s, "pod")), Some("p1"));
        assert_eq!(o.and_then(|s| get(s, "container")), Some("c"));
        assert!(!map.owners.contains_key("GPU-1"), "shared claim");
        let claims: Vec<_> = map
            .holdings
            .iter()
            .filter(|h| h.via == Via::Dra)
            .map(|h| (h.device.as_str(), h.claim.as_str()))
            .collect();
        assert_eq!(
            claims,
            [("GPU-0", "mine"), ("GPU-1", "shared"), ("GPU-1", "shared")]
        );
        assert_eq!(map.attributed[&Via::Dra], 2);
        assert_eq!(map.attributed[&Via::DevicePlugin], 1);
        assert_eq!(map.dra_unmapped["other_driver"], 2);
        assert_eq!(map.dra_unmapped["no_uuid"], 1);
        assert_eq!(map.dra_unmapped["not_in_slices"], 1);
        // Without slices (an old cluster), device-plugin attribution is unchanged.
        let map = PodMap::build(&kubelet, &view, &SliceView::default(), &[]);
        assert!(map.owners.contains_key("GPU-9"));
        assert_eq!(map.dra_unmapped["not_in_slices"], 5);
    }
}
