//! Workloads that run: a controller loop over the Deployments and
//! StatefulSets in the cluster's API. Scaling one creates or removes its
//! pods on the simulated node; a new pod takes the GPUs (or MIG instances,
//! or time-slice replicas) its template's limits ask for, appears on the
//! kubelet's pod-resources socket and in `/proc`, is Running on an address
//! of its own with its template's containers, and becomes Ready after the
//! scenario's cold start, once what it runs listens ([`super::serving`]);
//! the workload's status counts its ready pods.
//! A pod the node has no free devices for is not created (as a pod the
//! scheduler cannot place); that is logged and retried.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpuscale_nvml_sim::scenario::{
    Container as SimContainer, DeviceAlloc, Owner, Pod as SimPod, PodPhase,
};
use serde_json::{Value, json};
use tokio::runtime::Handle;

use super::objects::{template_hash, uid_of};
use super::vllm::FakeVllm;
use super::{SimNode, replicasets, serving};
use crate::kubeapi::{Gvr, core};

/// How often the loop looks at the API.
const PERIOD: Duration = Duration::from_millis(100);
/// The first pid of a workload's processes in `/proc`.
const FIRST_PID: u32 = 50_000;

/// The kinds that own pods, by plural.
const KINDS: [(&str, &str); 2] = [
    ("Deployment", "deployments"),
    ("StatefulSet", "statefulsets"),
];

fn gvr(plural: &str) -> Gvr {
    ("apps".into(), "v1".into(), plural.into())
}

/// A workload: (kind, namespace, name).
type Key = (&'static str, String, String);

/// What a workload asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub replicas: usize,
    pub labels: BTreeMap<String, String>,
    /// Per container: its name and the device resources its limits ask for.
    pub containers: Vec<(String, Vec<(String, usize)>)>,
    /// The template's containers as written (image, args, env, ports).
    pub template: Vec<Value>,
}

impl Spec {
    /// Reads a Deployment or StatefulSet; an error names what is malformed.
    pub fn of(workload: &Value) -> Result<Self, String> {
        let replicas = match &workload["spec"]["replicas"] {
            Value::Null => 1,
            v => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("spec.replicas {v}: not a count"))?,
        };
        let template = &workload["spec"]["template"];
        let labels =
            serde_json::from_value(template["metadata"]["labels"].clone()).unwrap_or_default();
        let written = template["spec"]["containers"]
            .as_array()
            .ok_or("spec.template.spec.containers: missing")?;
        let containers = written
            .iter()
            .map(|c| Ok((c["name"].as_str().unwrap_or("main").to_owned(), limits(c)?)))
            .collect::<Result<_, String>>()?;
        Ok(Self {
            replicas,
            labels,
            containers,
            template: written.clone(),
        })
    }
}

/// The extended resources (`vendor/name`) a container's limits ask for.
fn limits(container: &Value) -> Result<Vec<(String, usize)>, String> {
    let Some(limits) = container["resources"]["limits"].as_object() else {
        return Ok(Vec::new());
    };
    limits
        .iter()
        .filter(|(k, _)| k.contains('/'))
        .map(|(k, v)| {
            let n = v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("limit {k}: {v} is not a whole number"))?;
            Ok((k.clone(), n))
        })
        .collect()
}

/// A pod the controller made.
struct Made {
    name: String,
    ip: Option<String>,
    started: Instant,
    ready: bool,
    /// What its containers run; stopped with it.
    servers: Vec<FakeVllm>,
}

/// The controller's memory of the pods it made.
pub struct Controller {
    cold_start: Duration,
    made: BTreeMap<Key, Vec<Made>>,
    seq: u32,
    /// Workloads whose last problem was logged (logged once until it changes).
    logged: BTreeMap<Key, String>,
    /// Where the pods' servers run; none, none run.
    rt: Option<Handle>,
}

impl Controller {
    pub fn new(cold_start: Duration) -> Self {
        Self {
            cold_start,
            made: BTreeMap::new(),
            seq: 0,
            logged: BTreeMap::new(),
            rt: None,
        }
    }

    /// Runs what the pods' containers run (a fake vLLM) on `rt`.
    #[must_use]
    pub fn serving(mut self, rt: Handle) -> Self {
        self.rt = Some(rt);
        self
    }

    /// One pass over every workload in the API.
    pub fn tick(&mut self, node: &SimNode, now: Instant) {
        let api = node.api();
        let namespaces: Vec<String> = api
            .list(&core("namespaces"), "")
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        let mut seen = HashSet::new();
        for (kind, plural) in KINDS {
            for ns in &namespaces {
                for w in api.list(&gvr(plural), ns) {
                    let name = w["metadata"]["name"].as_str().unwrap_or_default();
                    let key: Key = (kind, ns.clone(), name.to_owned());
                    seen.insert(key.clone());
                    match Spec::of(&w) {
                        Ok(spec) => {
                            self.reconcile(node, &key, &spec, now);
                            write_status(node, plural, &key, &w, self.counts(&key));
                            if kind == "Deployment" {
                                replicasets::keep(node, &w, self.counts(&key));
                            }
                        }
                        Err(e) => self.log(&key, format!("not run: {e}")),
                    }
                }
            }
        }
        let gone: Vec<Key> = self
            .made
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            for pod in self.made.remove(&key).unwrap_or_default() {
                node.delete_pod(&key.1, &pod.name);
            }
        }
    }

    fn reconcile(&mut self, node: &SimNode, key: &Key, spec: &Spec, now: Instant) {
        let mut pods = self.made.remove(key).unwrap_or_default();
        // Deleted through the API: off the node, and made again below.
        pods.retain(|p| {
            let there = node.api().pod(&key.1, &p.name).is_some();
            if !there {
                node.delete_pod(&key.1, &p.name);
            }
            there
        });
        while pods.len() > spec.replicas {
            if let Some(p) = pods.pop() {
                node.delete_pod(&key.1, &p.name);
            }
        }
        while pods.len() < spec.replicas {
            match self.create(node, key, spec, &pods, now) {
                Ok(made) => pods.push(made),
                Err(e) => {
                    self.log(key, e);
                    break;
                }
            }
        }
        for p in pods.iter_mut().filter(|p| !p.ready) {
            if now.duration_since(p.started) >= self.cold_start
                && let Err(e) = self.turn_ready(node, &key.1, &spec.template, p)
            {
                self.log(key, format!("pod {}: not Ready: {e}", p.name));
            }
        }
        self.made.insert(key.clone(), pods);
    }

    /// The cold start passed: what the pod runs listens, then it is Ready.
    fn turn_ready(
        &self,
        node: &SimNode,
        ns: &str,
        template: &[Value],
        p: &mut Made,
    ) -> Result<(), String> {
        if let Some(rt) = &self.rt {
            p.servers = serving::start(template, p.ip.as_deref(), rt)?;
        }
        p.ready = node.set_ready(ns, &p.name, true);
        Ok(())
    }

    /// Makes one pod on the node, with the devices its template asks for.
    fn create(
        &mut self,
        node: &SimNode,
        key: &Key,
        spec: &Spec,
        pods: &[Made],
        now: Instant,
    ) -> Result<Made, String> {
        self.seq += 1;
        let seq = self.seq;
        let (kind, ns, name) = key;
        let mut labels = spec.labels.clone();
        let pod_name = if *kind == "StatefulSet" {
            let used: BTreeSet<&str> = pods.iter().map(|p| p.name.as_str()).collect();
            let ordinal = (0..)
                .find(|i| !used.contains(format!("{name}-{i}").as_str()))
                .unwrap_or(0);
            let pod = format!("{name}-{ordinal}");
            labels.insert("statefulset.kubernetes.io/pod-name".into(), pod.clone());
            pod
        } else {
            let hash = template_hash(name);
            labels.insert("pod-template-hash".into(), hash.clone());
            format!(
                "{name}-{hash}-{}",
                &template_hash(&format!("{ns}/{name}/{seq}"))[..5]
            )
        };
        let containers = allocate(node, spec, seq)?;
        // Its containers start at once; the model loads until it is Ready.
        let phase = PodPhase::Running;
        let pod = SimPod {
            namespace: ns.clone(),
            name: pod_name.clone(),
            uid: uid_of(&format!("{ns}/{pod_name}/{seq}")),
            phase,
            labels,
            owner: Some(Owner {
                kind: (*kind).to_owned(),
                name: name.clone(),
            }),
            containers,
        };
        let ip = node
            .run_pod(&pod, spec.template.clone(), false)
            .map_err(|e| e.to_string())?;
        tracing::info!(namespace = %ns, pod = %pod_name, ip = ?ip, "workload pod started");
        Ok(Made {
            name: pod_name,
            ip,
            started: now,
            ready: false,
            servers: Vec::new(),
        })
    }

    /// (pods, ready pods) of a workload.
    fn counts(&self, key: &Key) -> (usize, usize) {
        let pods = self.made.get(key).map_or(&[][..], Vec::as_slice);
        (pods.len(), pods.iter().filter(|p| p.ready).count())
    }

    fn log(&mut self, key: &Key, problem: String) {
        if self.logged.get(key) != Some(&problem) {
            tracing::warn!(kind = key.0, namespace = %key.1, name = %key.2, "{problem}");
            self.logged.insert(key.clone(), problem);
        }
    }
}

/// The containers of a new pod, each with free devices of the resources it
/// asks for and one process; an error when the node has too few.
fn allocate(node: &SimNode, spec: &Spec, seq: u32) -> Result<Vec<SimContainer>, String> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut containers = Vec::new();
    for (i, (name, wants)) in spec.containers.iter().enumerate() {
        let mut devices = Vec::new();
        for (resource, n) in wants.iter().filter(|(_, n)| *n > 0) {
            let free: Vec<String> = node
                .free_devices(resource)
                .into_iter()
                .filter(|id| !taken.contains(id))
                .take(*n)
                .collect();
            if free.len() < *n {
                return Err(format!(
                    "a new pod not placed: {n} {resource} asked, {} free on node {}",
                    free.len(),
                    node.node_name()
                ));
            }
            taken.extend(free.iter().cloned());
            devices.push(DeviceAlloc {
                resource: resource.clone(),
                ids: free,
            });
        }
        let id = format!("{:0>64}", format!("{:x}", u64::from(seq) << 8 | i as u64));
        containers.push(SimContainer {
            name: name.clone(),
            id,
            devices,
            claims: Vec::new(),
            pids: vec![FIRST_PID + seq * 16 + i as u32],
        });
    }
    Ok(containers)
}

/// The workload's status from its pods, written when it changed.
fn write_status(node: &SimNode, plural: &str, key: &Key, w: &Value, (pods, ready): (usize, usize)) {
    let mut status = json!({
        "replicas": pods,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "updatedReplicas": pods,
        "observedGeneration": w["metadata"]["generation"],
    });
    if plural == "statefulsets" {
        status["currentReplicas"] = json!(pods);
    }
    if w["status"] == status {
        return;
    }
    // Re-read just before writing, so a scale in between is kept.
    let gvr = gvr(plural);
    if let Some(mut fresh) = node.api().get(&gvr, &key.1, &key.2) {
        fresh["status"] = status;
        node.api().put(&gvr, fresh);
    }
}

/// The controller on its own thread, until dropped.
pub struct Workloads {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The pods' servers' runtime, stopped after the controller.
    rt: Option<tokio::runtime::Runtime>,
}

impl Workloads {
    pub fn start(node: Arc<SimNode>, cold_start: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sim-pods")
            .enable_all()
            .build()
            .inspect_err(|e| tracing::warn!(error = %e, "no runtime: the pods run no servers"))
            .ok();
        let handle = rt.as_ref().map(|r| r.handle().clone());
        let thread = std::thread::spawn(move || {
            let mut controller = Controller::new(cold_start);
            if let Some(h) = handle {
                controller = controller.serving(h);
            }
            while !stopping.load(Ordering::Relaxed) {
                controller.tick(&node, Instant::now());
                std::thread::sleep(PERIOD);
            }
        });
        Self {
            stop,
            thread: Some(thread),
            rt,
        }
    }
}

impl Drop for Workloads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_reads_replicas_labels_and_device_limits() {
        let w = json!({"spec": {"replicas": 2, "template": {
            "metadata": {"labels": {"app": "llm"}},
            "spec": {"containers": [{"name": "vllm", "resources": {"limits": {
                "nvidia.com/gpu": "1", "cpu": "4", "nvidia.com/mig-1g.10gb": 2}}}]}}}});
        let spec = Spec::of(&w);
        assert_eq!(
            spec.map(|s| (s.replicas, s.labels["app"].clone(), s.containers)),
            Ok((
                2,
                "llm".to_owned(),
                vec![(
                    "vllm".to_owned(),
                    vec![
                        ("nvidia.com/gpu".to_owned(), 1),
                        ("nvidia.com/mig-1g.10gb".to_owned(), 2)
                    ]
                )]
            ))
        );
        let bad = json!({"spec": {"replicas": -1, "template": {"spec": {"containers": []}}}});
        assert_eq!(
            Spec::of(&bad).err().as_deref(),
            Some("spec.replicas -1: not a count")
        );
        let bad = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "half"}}}]}}}});
        assert_eq!(
            Spec::of(&bad).err().as_deref(),
            Some("limit nvidia.com/gpu: \"half\" is not a whole number")
        );
    }
}
