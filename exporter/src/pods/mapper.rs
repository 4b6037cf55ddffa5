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
use super::families::{self as fam, Unattributed};
use super::info;
use super::kubeapi::{self, MetaView};
use super::labels::{self, PodLabel};
use super::map::{DRA_UNMAPPED, Joined, PodMap, Via, pod_labels};
use super::node::{self, NodeView};
use super::podresources::{KubeletClient, KubeletSnapshot, ResourceFilter};
use super::slices::{self, SliceView};
use crate::metrics::{
    Collected, DeviceRef, Family, Labels, NoPods, PodLabelSet, PodLookup, ProcessUsage, Subject,
    flag,
};

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
    pids: HashMap<u32, Result<PodCgroup, Unattributed>>,
    unattributed_total: BTreeMap<Unattributed, u64>,
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
    node_view: ArcSwap<NodeView>,
    node_facts: Option<Arc<crate::node::NodeFacts>>,
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
            node_view: ArcSwap::from_pointee(NodeView::default()),
            node_facts: super::node_facts::start(args, node, rt),
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
        let weak = Arc::downgrade(&mapper);
        rt.spawn(node::run(
            args.kube_api_url.clone(),
            args.kubeconfig.clone(),
            node.to_owned(),
            args.node_pool_labels.clone().into(),
            move |view| {
                if let Some(m) = weak.upgrade() {
                    m.node_view.store(Arc::new(view));
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
        let mut found = self.attribute(&mut cache, &map, collected);
        let process_pods: BTreeSet<String> =
            found.usage.keys().map(|k| k.pod_uid.clone()).collect();
        let mut families = self.allocation_families(&map, collected);
        families.push(info::family(
            &self.node,
            &map,
            &process_pods,
            &self.label_keys,
        ));
        families.extend(self.per_pod_families(&map, found.usage));
        families.push(std::mem::replace(
            &mut found.orphans,
            Family::of(&fam::PROCESS_UNATTRIBUTED),
        ));
        let node_priced = super::node_facts::gpu_prices(self.node_facts.as_deref(), collected);
        families.extend(node_priced.or_else(|| price_family(&self.prices, &collected.devices)));
        let health = Health {
            kubelet: &kubelet,
            meta: &meta,
            map: &map,
            cache: &cache,
            unattributed: &found.unattributed,
        };
        families.extend(self.self_families(&health));
        families.extend(dra_families(&slices, &map));
        families.extend(node::families(&self.node, &self.node_view.load()));
        if let Some(facts) = &self.node_facts {
            families.extend(super::node_facts::families(
                facts, &self.node, kubelet.up, &map, collected,
            ));
        }
        cache.last_join_seconds = started.elapsed().as_secs_f64();
        let processes = found.processes;
        (Arc::new(Joined { map, processes }), families)
    }

    /// Resolves this cycle's GPU pids to pods and sums their usage per pod
    /// and device.
    fn attribute(&self, cache: &mut JoinCache, map: &PodMap, collected: &Collected) -> Attribution {
        let mut found = Attribution::default();
        let mut sets: HashMap<(String, String), Arc<PodLabelSet>> = HashMap::new();
        for p in &collected.processes {
            let pid = p.proc_ref.pid;
            let cg = match self.pod_cgroup(cache, pid) {
                Ok(cg) => cg,
                Err(reason) => {
                    found.unattributed_process(p, reason);
                    continue;
                }
            };
            let Some(meta) = map.pods.get(&cg.pod_uid) else {
                found.unattributed_process(p, Unattributed::PodUnknown);
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
            found.processes.insert(pid, set);
            found.add_usage(p, cg.pod_uid);
        }
        let seen: BTreeSet<u32> = collected.processes.iter().map(|p| p.proc_ref.pid).collect();
        cache.pids.retain(|pid, _| seen.contains(pid));
        found
    }

    /// A pid's pod from its cgroup file, read once per pid.
    fn pod_cgroup(&self, cache: &mut JoinCache, pid: u32) -> Result<PodCgroup, Unattributed> {
        let JoinCache {
            pids,
            unattributed_total,
            ..
        } = cache;
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
        resolved.clone()
    }

    /// `gpu_pod_memory_used_bytes` and `gpu_pod_sm_utilization_ratio`.
    fn per_pod_families(&self, map: &PodMap, usage: BTreeMap<UsageKey, PodUsage>) -> [Family; 2] {
        let mut memory = Family::of(&fam::POD_MEMORY);
        let mut sm = Family::of(&fam::POD_SM);
        for (key, used) in usage {
            let Some(meta) = map.pods.get(&key.pod_uid) else {
                continue;
            };
            let mut labels: Labels = vec![
                ("node", self.node.clone()),
                ("gpu", used.gpu_index.to_string()),
                ("uuid", key.gpu_uuid.to_string()),
                ("mig_uuid", key.mig_uuid.as_deref().unwrap_or("").to_owned()),
            ];
            labels.extend(pod_labels(
                &meta.namespace,
                &meta.name,
                None,
                Some(meta),
                &self.label_keys,
            ));
            if let Some(v) = used.memory_bytes {
                memory.push(Subject::Global, labels.clone(), v);
            }
            if let Some(v) = used.sm_ratio {
                sm.push(Subject::Global, labels, v.min(1.0));
            }
        }
        [memory, sm]
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
        let mut alloc = Family::of(&fam::POD_ALLOCATION);
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

    fn self_families(&self, h: &Health<'_>) -> Vec<Family> {
        let g = |desc, v: f64| Family::of(desc).with(Subject::Node, Vec::new(), v);
        let mut now = Family::of(&fam::UNATTRIBUTED_PROCESSES);
        for reason in Unattributed::ALL {
            let n = h.unattributed.get(&reason).copied().unwrap_or(0);
            now.push(Subject::Node, reason_label(reason), n as f64);
        }
        let mut total = Family::of(&fam::UNATTRIBUTED_PIDS);
        for reason in Unattributed::FROM_CGROUP {
            let n = h
                .cache
                .unattributed_total
                .get(&reason)
                .copied()
                .unwrap_or(0);
            total.push(Subject::Node, reason_label(reason), n as f64);
        }
        let up = vec![("reason", h.kubelet.reason.to_owned())];
        vec![
            Family::of(&fam::MAPPING_UP).with(Subject::Node, up, flag(h.kubelet.up)),
            g(&fam::METADATA_STALE, flag(h.meta.stale || !h.meta.synced)),
            g(&fam::PODS, h.map.pods.len() as f64),
            g(&fam::REFRESH_DURATION, h.kubelet.duration_seconds),
            g(&fam::JOIN_DURATION, h.cache.last_join_seconds),
            g(&fam::REFRESH_ERRORS, h.kubelet.errors_total as f64),
            now,
            total,
        ]
    }
}

/// What one join found out about the GPU processes.
struct Attribution {
    /// pid → the labels of its pod and container.
    processes: HashMap<u32, Arc<PodLabelSet>>,
    usage: BTreeMap<UsageKey, PodUsage>,
    /// Processes of this cycle without a pod, by reason.
    unattributed: BTreeMap<Unattributed, u64>,
    /// `gpu_process_unattributed`: each of them by name.
    orphans: Family,
}

impl Default for Attribution {
    fn default() -> Self {
        Self {
            processes: HashMap::new(),
            usage: BTreeMap::new(),
            unattributed: BTreeMap::new(),
            orphans: Family::of(&fam::PROCESS_UNATTRIBUTED),
        }
    }
}

impl Attribution {
    /// A process no pod is charged for: counted, and named with its GPU and
    /// pid so a zombie is found (and its memory told apart from the pod that
    /// holds the same GPU or MIG instance).
    fn unattributed_process(&mut self, p: &ProcessUsage, reason: Unattributed) {
        *self.unattributed.entry(reason).or_default() += 1;
        let labels = vec![("reason", reason.as_str().to_owned())];
        self.orphans
            .push(Subject::Process(p.proc_ref.clone()), labels, 1.0);
    }

    fn add_usage(&mut self, p: &ProcessUsage, pod_uid: String) {
        let key = UsageKey {
            gpu_uuid: p.proc_ref.gpu.uuid.clone(),
            mig_uuid: p.proc_ref.mig_uuid.clone(),
            pod_uid,
        };
        let entry = self.usage.entry(key).or_insert(PodUsage {
            memory_bytes: None,
            sm_ratio: None,
            gpu_index: p.proc_ref.gpu.index,
        });
        add(&mut entry.memory_bytes, p.memory_used_bytes);
        add(&mut entry.sm_ratio, p.sm_utilization_ratio);
    }
}

/// A pod on one GPU or MIG instance.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct UsageKey {
    gpu_uuid: Arc<str>,
    mig_uuid: Option<Arc<str>>,
    pod_uid: String,
}

/// The summed usage of a pod's processes on one device.
#[derive(Debug, Clone, Copy)]
struct PodUsage {
    memory_bytes: Option<f64>,
    sm_ratio: Option<f64>,
    gpu_index: u32,
}

/// What the mapper's own families report.
struct Health<'a> {
    kubelet: &'a KubeletState,
    meta: &'a MetaView,
    map: &'a PodMap,
    cache: &'a JoinCache,
    unattributed: &'a BTreeMap<Unattributed, u64>,
}

fn reason_label(reason: Unattributed) -> Labels {
    vec![("reason", reason.as_str().to_owned())]
}

/// Which path attributed how many devices, and whether DRA claims can be
/// mapped at all.
fn dra_families(slices: &SliceView, map: &PodMap) -> Vec<Family> {
    let mut attributed = Family::of(&fam::ATTRIBUTED_DEVICES);
    for via in Via::ALL {
        attributed.push(
            Subject::Node,
            vec![("allocation", via.label().to_owned())],
            map.attributed.get(&via).copied().unwrap_or(0) as f64,
        );
    }
    let mut unmapped = Family::of(&fam::DRA_UNATTRIBUTED);
    for reason in DRA_UNMAPPED {
        unmapped.push(
            Subject::Node,
            vec![("reason", reason.to_owned())],
            map.dra_unmapped.get(reason).copied().unwrap_or(0) as f64,
        );
    }
    vec![
        Family::of(&fam::DRA_MAPPING_UP).with(Subject::Node, Vec::new(), flag(slices.up())),
        attributed,
        unmapped,
    ]
}

fn add(acc: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *acc = Some(acc.unwrap_or(0.0) + v);
    }
}

/// `gpu_price_usd_per_hour` of each answering GPU whose model has a price
/// (`prices` keyed by [`normalize_model`]); none without prices.
fn price_family(prices: &BTreeMap<String, f64>, devices: &[Arc<DeviceRef>]) -> Option<Family> {
    if prices.is_empty() {
        return None;
    }
    let mut family = Family::of(&fam::PRICE);
    for d in devices {
        let Some(model) = &d.facts.model else {
            continue;
        };
        if let Some(price) = prices.get(&normalize_model(model)) {
            family.push(Subject::Device(d.clone()), Vec::new(), *price);
        }
    }
    Some(family)
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

    #[test]
    fn prices_come_from_each_gpus_model() {
        let gpu = |index, model: Option<&str>| {
            let mut d = DeviceRef::new(index, format!("GPU-{index}").into());
            d.facts.model = model.map(Into::into);
            Arc::new(d)
        };
        let devices = [
            gpu(0, Some("NVIDIA H100 80GB HBM3")),
            gpu(1, Some("NVIDIA A10")),
            gpu(2, None),
        ];
        let prices = BTreeMap::from([(normalize_model("h100 80gb hbm3"), 4.5)]);
        let family = price_family(&prices, &devices).expect("prices configured");
        let priced: Vec<(u32, f64)> = family
            .samples
            .iter()
            .map(|s| match &s.subject {
                Subject::Device(d) => (d.index, s.value),
                other => panic!("price of {other:?}"),
            })
            .collect();
        assert_eq!(priced, [(0, 4.5)], "unpriced and unnamed GPUs get none");
        assert!(price_family(&BTreeMap::new(), &devices).is_none());
    }
}
