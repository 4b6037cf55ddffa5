//! The pod mapper: background refreshes of the kubelet and the pod watch,
//! and the per-collection join over their latest state.

use crate::backoff::Backoff;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tracing::{info, warn};

use super::PodArgs;
use super::cgroup::{self, PodCgroup};
use super::info;
use super::kubeapi::{self, MetaView};
use super::labels::{self, PodLabel};
use super::map::{DRA_UNMAPPED, Joined, PodMap, Via, pod_labels};
use super::podresources::{KubeletClient, KubeletSnapshot, ResourceFilter};
use super::slices::{self, SliceView};
use crate::metrics::{Collected, Family, Labels, NoPods, PodLabelSet, PodLookup, Subject};

#[derive(Debug, thiserror::Error)]
pub enum PodsError {
    #[error("--pod-label: {0}")]
    Labels(String),
}

/// The kubelet side, replaced after every refresh.
#[derive(Debug, Default)]
struct KubeletState {
    up: bool,
    /// Why the last refresh failed (`KubeletError::reason`); "" when up.
    reason: &'static str,
    snapshot: KubeletSnapshot,
    duration_seconds: f64,
    errors_total: u64,
}

/// What the join keeps between collections.
#[derive(Default)]
struct JoinCache {
    built_from: Option<(Arc<KubeletState>, Arc<MetaView>, Arc<SliceView>)>,
    map: Arc<PodMap>,
    /// pid → its cgroup's pod, or why not; pids gone from NVML are evicted.
    pids: HashMap<u32, Result<PodCgroup, &'static str>>,
    unattributed_total: BTreeMap<&'static str, u64>,
    /// Duration of the previous join (reported one cycle late).
    last_join_seconds: f64,
}

pub struct PodMapper {
    enabled: bool,
    node: String,
    proc_root: PathBuf,
    label_keys: Arc<[PodLabel]>,
    prices: BTreeMap<String, f64>,
    kubelet: ArcSwap<KubeletState>,
    meta: ArcSwap<MetaView>,
    slices: ArcSwap<SliceView>,
    cache: Mutex<JoinCache>,
}

impl PodMapper {
    /// Starts the background tasks on `rt`. `node` selects the pods to watch.
    pub fn start(
        args: &PodArgs,
        node: &str,
        rt: &tokio::runtime::Handle,
    ) -> Result<Arc<Self>, PodsError> {
        let label_keys: Arc<[PodLabel]> = labels::intern(&args.pod_labels)
            .map_err(PodsError::Labels)?
            .into();
        let mapper = Arc::new(Self {
            enabled: !args.no_pods,
            node: node.to_owned(),
            proc_root: args.proc_root(),
            label_keys: label_keys.clone(),
            prices: args
                .prices()
                .into_iter()
                .map(|(k, v)| (normalize_model(&k), v))
                .collect(),
            kubelet: ArcSwap::from_pointee(KubeletState::default()),
            meta: ArcSwap::from_pointee(MetaView {
                stale: true,
                ..MetaView::default()
            }),
            slices: ArcSwap::from_pointee(SliceView::default()),
            cache: Mutex::new(JoinCache::default()),
        });
        if args.no_pods {
            info!("pod mapping disabled (--no-pods)");
            return Ok(mapper);
        }
        info!(
            socket = %args.socket().display(),
            proc_root = %mapper.proc_root.display(),
            node,
            refresh = ?args.pod_refresh_interval,
            "pod mapping on"
        );
        let weak = Arc::downgrade(&mapper);
        let (socket, filter, interval) = (
            args.socket(),
            ResourceFilter::new(&args.resource_names).with_drivers(&args.dra_drivers),
            args.pod_refresh_interval,
        );
        rt.spawn(async move { kubelet_loop(weak, socket, filter, interval).await });
        let weak = Arc::downgrade(&mapper);
        rt.spawn(kubeapi::run(
            args.kube_api_url.clone(),
            args.kubeconfig.clone(),
            node.to_owned(),
            label_keys,
            move |view| {
                if let Some(m) = weak.upgrade() {
                    m.meta.store(Arc::new(view));
                }
            },
        ));
        let weak = Arc::downgrade(&mapper);
        rt.spawn(slices::run(
            args.kube_api_url.clone(),
            args.kubeconfig.clone(),
            node.to_owned(),
            move |view| {
                if let Some(m) = weak.upgrade() {
                    m.slices.store(Arc::new(view));
                }
            },
        ));
        Ok(mapper)
    }

    /// Joins one collection to the latest pod state: the lookup the encoder
    /// asks for pod labels, and the mapper's own families. Plain memory and
    /// file reads; never waits on the network.
    pub fn join(&self, collected: &Collected) -> (Arc<dyn PodLookup>, Vec<Family>) {
        if !self.enabled {
            return (Arc::new(NoPods), Vec::new());
        }
        let started = Instant::now();
        let kubelet = self.kubelet.load_full();
        let meta = self.meta.load_full();
        let slices = self.slices.load_full();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = matches!(&cache.built_from, Some((k, m, s)) if Arc::ptr_eq(k, &kubelet) && Arc::ptr_eq(m, &meta) && Arc::ptr_eq(s, &slices));
        if !fresh {
            cache.map = Arc::new(PodMap::build(
                &kubelet.snapshot,
                &meta,
                &slices,
                &self.label_keys,
            ));
            cache.built_from = Some((kubelet.clone(), meta.clone(), slices.clone()));
        }
        let map = cache.map.clone();
        let (processes, per_pod, unattributed, process_pods) =
            self.attribute(&mut cache, &map, collected);
        let mut families = self.allocation_families(&map, collected);
        families.push(info::family(
            &self.node,
            &map,
            &process_pods,
            &self.label_keys,
        ));
        families.extend(per_pod);
        families.extend(self.price_family(collected));
        families.extend(self.self_families(&kubelet, &meta, &map, &cache, &unattributed));
        families.extend(dra_families(&slices, &map));
        cache.last_join_seconds = started.elapsed().as_secs_f64();
        (Arc::new(Joined { map, processes }), families)
    }

    /// Resolves GPU pids to pods; returns the process lookup, the per-pod
    /// usage families, the unattributed counts of this cycle and the UIDs of
    /// the pods running GPU processes.
    #[allow(clippy::type_complexity)]
    fn attribute(
        &self,
        cache: &mut JoinCache,
        map: &PodMap,
        collected: &Collected,
    ) -> (
        HashMap<u32, Arc<PodLabelSet>>,
        [Family; 2],
        BTreeMap<&'static str, u64>,
        BTreeSet<String>,
    ) {
        let mut seen: HashMap<u32, ()> = HashMap::with_capacity(collected.processes.len());
        let mut sets: HashMap<(String, String), Arc<PodLabelSet>> = HashMap::new();
        let mut processes = HashMap::new();
        let mut unattributed: BTreeMap<&'static str, u64> = BTreeMap::new();
        let JoinCache {
            pids,
            unattributed_total,
            ..
        } = cache;
        // (gpu uuid, mig uuid, pod uid) → (memory, sm, index)
        let mut usage: BTreeMap<
            (Arc<str>, Option<Arc<str>>, String),
            (Option<f64>, Option<f64>, u32),
        > = BTreeMap::new();
        for p in &collected.processes {
            let pid = p.proc_ref.pid;
            seen.insert(pid, ());
            let resolved = pids.entry(pid).or_insert_with(|| {
                let r = cgroup::read_pod_cgroup(&self.proc_root, pid).map_err(|e| {
                    if !matches!(e, cgroup::CgroupError::NotAPod) {
                        warn!(pid, error = %e, "GPU process not attributed to a pod");
                    }
                    e.reason()
                });
                if let Err(reason) = r {
                    *unattributed_total.entry(reason).or_default() += 1;
                }
                r
            });
            let cg = match resolved {
                Ok(cg) => cg,
                Err(reason) => {
                    *unattributed.entry(*reason).or_default() += 1;
                    continue;
                }
            };
            let Some(meta) = map.pods.get(&cg.pod_uid) else {
                *unattributed.entry("pod_unknown").or_default() += 1;
                continue;
            };
            let container = cg
                .container_id
                .as_ref()
                .and_then(|id| meta.containers.iter().find(|(cid, _)| cid == id))
                .map(|(_, name)| name.clone())
                .unwrap_or_default();
            let set = sets
                .entry((cg.pod_uid.clone(), container.clone()))
                .or_insert_with(|| {
                    let labels = pod_labels(
                        &meta.namespace,
                        &meta.name,
                        Some(&container),
                        Some(meta),
                        &self.label_keys,
                    );
                    Arc::new(super::map::to_set(&labels))
                })
                .clone();
            processes.insert(pid, set);
            let key = (
                p.proc_ref.gpu.uuid.clone(),
                p.proc_ref.mig_uuid.clone(),
                cg.pod_uid.clone(),
            );
            let entry = usage
                .entry(key)
                .or_insert((None, None, p.proc_ref.gpu.index));
            add(&mut entry.0, p.memory_used_bytes);
            add(&mut entry.1, p.sm_utilization_ratio);
        }
        pids.retain(|pid, _| seen.contains_key(pid));

        let mut memory = Family::gauge(
            "gpu_pod_memory_used_bytes",
            "GPU memory used by a pod's processes on a GPU or MIG instance.",
        );
        let mut sm = Family::gauge(
            "gpu_pod_sm_utilization_ratio",
            "SM utilization of a pod's processes on a GPU or MIG instance (each pod its own share).",
        );
        let process_pods = usage.keys().map(|k| k.2.clone()).collect();
        for ((gpu_uuid, mig_uuid, uid), (mem, util, index)) in usage {
            let Some(meta) = map.pods.get(&uid) else {
                continue;
            };
            let mut labels: Labels = vec![
                ("node", self.node.clone()),
                ("gpu", index.to_string()),
                ("uuid", gpu_uuid.to_string()),
                ("mig_uuid", mig_uuid.as_deref().unwrap_or("").to_owned()),
            ];
            labels.extend(pod_labels(
                &meta.namespace,
                &meta.name,
                None,
                Some(meta),
                &self.label_keys,
            ));
            if let Some(v) = mem {
                memory.push(Subject::Global, labels.clone(), v);
            }
            if let Some(v) = util {
                sm.push(Subject::Global, labels, v.min(1.0));
            }
        }
        (processes, [memory, sm], unattributed, process_pods)
    }

    fn allocation_families(&self, map: &PodMap, collected: &Collected) -> Vec<Family> {
        // Device UUID → (gpu index, GPU uuid, mig uuid) for the labels.
        let mut where_: HashMap<&str, (String, &str, &str)> = HashMap::new();
        for d in &collected.devices {
            where_.insert(&d.uuid, (d.index.to_string(), &d.uuid, ""));
        }
        for m in &collected.migs {
            where_.insert(
                &m.mig_uuid,
                (m.gpu.index.to_string(), &m.gpu.uuid, &m.mig_uuid),
            );
        }
        let mut alloc = Family::gauge(
            "gpu_pod_allocation",
            "1 for each GPU or MIG instance a pod's container holds (kubelet pod-resources: device plugin or DRA claim).",
        );
        for h in &map.holdings {
            let (gpu, uuid, mig) = match where_.get(h.device.as_str()) {
                Some((gpu, uuid, mig)) => (gpu.clone(), (*uuid).to_owned(), (*mig).to_owned()),
                // A device NVML does not list (lost GPU, unknown ID format).
                None if h.device.starts_with("MIG-") => {
                    (String::new(), String::new(), h.device.clone())
                }
                None => (String::new(), h.device.clone(), String::new()),
            };
            let mut labels: Labels = vec![
                ("node", self.node.clone()),
                ("gpu", gpu),
                ("uuid", uuid),
                ("mig_uuid", mig),
                ("resource", h.resource.clone()),
                ("allocation", h.via.label().to_owned()),
                ("claim", h.claim.clone()),
            ];
            labels.extend(h.labels.iter().cloned());
            alloc.push(Subject::Global, labels, 1.0);
        }
        vec![alloc]
    }

    fn price_family(&self, collected: &Collected) -> Option<Family> {
        if self.prices.is_empty() {
            return None;
        }
        let mut family = Family::gauge(
            "gpu_price_usd_per_hour",
            "Configured hourly price of the GPU (--gpu-price).",
        );
        let info = collected.families.iter().find(|f| f.name == "gpu_info")?;
        for s in &info.samples {
            let Subject::Device(_) = &s.subject else {
                continue;
            };
            let Some((_, model)) = s.labels.iter().find(|(k, _)| *k == "model") else {
                continue;
            };
            if let Some(price) = self.prices.get(&normalize_model(model)) {
                family.push(s.subject.clone(), Vec::new(), *price);
            }
        }
        Some(family)
    }

    fn self_families(
        &self,
        kubelet: &KubeletState,
        meta: &MetaView,
        map: &PodMap,
        cache: &JoinCache,
        unattributed: &BTreeMap<&'static str, u64>,
    ) -> Vec<Family> {
        let unattributed_total = &cache.unattributed_total;
        let g = |name, help, v: f64| Family::gauge(name, help).with(Subject::Global, Vec::new(), v);
        let mut now = Family::gauge(
            "gpuscale_exporter_unattributed_processes",
            "GPU processes of the last collection without a pod, by reason.",
        );
        let mut total = Family::counter(
            "gpuscale_exporter_unattributed_pids_total",
            "GPU processes (counted once per pid) whose cgroup named no pod, by reason.",
        );
        for reason in REASONS {
            now.push(
                Subject::Global,
                vec![("reason", reason.to_owned())],
                unattributed.get(reason).copied().unwrap_or(0) as f64,
            );
        }
        for reason in &REASONS[..3] {
            total.push(
                Subject::Global,
                vec![("reason", (*reason).to_owned())],
                unattributed_total.get(reason).copied().unwrap_or(0) as f64,
            );
        }
        vec![
            Family::gauge(
                "gpuscale_exporter_pod_mapping_up",
                "1 when the last kubelet pod-resources refresh succeeded; reason says why not.",
            )
            .with(
                Subject::Global,
                vec![("reason", kubelet.reason.to_owned())],
                bool_f(kubelet.up),
            ),
            g(
                "gpuscale_exporter_pod_metadata_stale",
                "1 while the pod watch is failing or not yet synced (last known metadata kept).",
                bool_f(meta.stale || !meta.synced),
            ),
            g(
                "gpuscale_exporter_pods",
                "Non-terminal pods on this node known from the pod watch.",
                map.pods.len() as f64,
            ),
            g(
                "gpuscale_exporter_pod_refresh_duration_seconds",
                "Duration of the last kubelet pod-resources refresh (List + GetAllocatableResources).",
                kubelet.duration_seconds,
            ),
            g(
                "gpuscale_exporter_pod_join_duration_seconds",
                "Duration of the previous pod join (labels, pids, per-pod families) in the collection loop.",
                cache.last_join_seconds,
            ),
            Family::counter(
                "gpuscale_exporter_pod_refresh_errors_total",
                "Failed kubelet pod-resources refreshes.",
            )
            .with(Subject::Global, Vec::new(), kubelet.errors_total as f64),
            now,
            total,
        ]
    }
}

/// Which path attributed how many devices, and whether DRA claims can be
/// mapped at all.
fn dra_families(slices: &SliceView, map: &PodMap) -> Vec<Family> {
    let mut attributed = Family::gauge(
        "gpuscale_exporter_pod_attributed_devices",
        "GPUs and MIG instances attributed to pods, by allocation path (device_plugin, dra).",
    );
    for via in Via::ALL {
        attributed.push(
            Subject::Global,
            vec![("allocation", via.label().to_owned())],
            map.attributed.get(&via).copied().unwrap_or(0) as f64,
        );
    }
    let mut unmapped = Family::gauge(
        "gpuscale_exporter_dra_devices_unattributed",
        "Devices held through DRA claims that got no pod labels, by reason (other_driver, not_in_slices, no_uuid).",
    );
    for reason in DRA_UNMAPPED {
        unmapped.push(
            Subject::Global,
            vec![("reason", reason.to_owned())],
            map.dra_unmapped.get(reason).copied().unwrap_or(0) as f64,
        );
    }
    vec![
        Family::gauge(
            "gpuscale_exporter_dra_mapping_up",
            "1 while the node's ResourceSlices are listed and watched (DRA claims can be mapped to GPU UUIDs).",
        )
        .with(Subject::Global, Vec::new(), bool_f(slices.up())),
        attributed,
        unmapped,
    ]
}

const REASONS: [&str; 4] = [
    "cgroup_unreadable",
    "cgroup_malformed",
    "not_a_pod",
    "pod_unknown",
];

fn bool_f(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn add(acc: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *acc = Some(acc.unwrap_or(0.0) + v);
    }
}

/// Model names match case-insensitively, with or without the `NVIDIA ` prefix.
fn normalize_model(model: &str) -> String {
    let m = model.trim().to_ascii_lowercase();
    m.strip_prefix("nvidia ").map(str::to_owned).unwrap_or(m)
}

/// Refreshes the kubelet state on the timer; after a failure retries sooner
/// (backoff from 250 ms, capped at the interval, so a restarted kubelet's
/// labels are back within one interval).
async fn kubelet_loop(
    mapper: std::sync::Weak<PodMapper>,
    socket: PathBuf,
    filter: ResourceFilter,
    interval: Duration,
) {
    let mut client = KubeletClient::new(socket);
    let mut retry = Backoff::new(Duration::from_millis(250), interval);
    let mut failing = false;
    let mut errors_total = 0;
    loop {
        let started = Instant::now();
        let result = client.fetch(&filter).await;
        let duration_seconds = started.elapsed().as_secs_f64();
        let Some(m) = mapper.upgrade() else { return };
        let state = match result {
            Ok(snapshot) => {
                if failing || !m.kubelet.load().up {
                    info!(
                        allocations = snapshot.allocations.len(),
                        "kubelet pod-resources reachable"
                    );
                }
                failing = false;
                retry.reset();
                KubeletState {
                    up: true,
                    reason: "",
                    snapshot,
                    duration_seconds,
                    errors_total,
                }
            }
            Err(e) => {
                if !failing {
                    warn!(error = %e, "kubelet pod-resources unavailable: serving metrics without pod labels; retrying");
                }
                failing = true;
                errors_total += 1;
                KubeletState {
                    up: false,
                    reason: e.reason(),
                    snapshot: KubeletSnapshot::default(),
                    duration_seconds,
                    errors_total,
                }
            }
        };
        m.kubelet.store(Arc::new(state));
        drop(m);
        let wait = if failing {
            retry.next_delay()
        } else {
            interval
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names() {
        assert_eq!(
            normalize_model("NVIDIA H100 80GB HBM3"),
            normalize_model("h100 80gb hbm3")
        );
    }
}
