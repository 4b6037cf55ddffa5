//! The devices of a simulated node as the kubelet reports them: what the
//! device plugins can allocate, what each pod holds, and what is free.

use std::collections::{BTreeMap, HashMap, HashSet};

use gpuscale_nvml_sim::scenario::{Pod as SimPod, Scenario};

use super::proto;

/// What `List` answers: every pod with devices or claims, terminal ones included.
pub fn list<'a>(
    pods: impl Iterator<Item = &'a SimPod>,
    node: &str,
    dra_names: &HashMap<String, String>,
) -> proto::ListPodResourcesResponse {
    proto::ListPodResourcesResponse {
        pod_resources: pods
            .map(|p| proto::PodResources {
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                containers: p
                    .containers
                    .iter()
                    .map(|c| proto::ContainerResources {
                        name: c.name.clone(),
                        devices: c
                            .devices
                            .iter()
                            .map(|d| proto::ContainerDevices {
                                resource_name: d.resource.clone(),
                                device_ids: d.ids.clone(),
                                topology: None,
                            })
                            .collect(),
                        dynamic_resources: super::dra::dynamic_resources(
                            c,
                            &p.namespace,
                            node,
                            dra_names,
                        ),
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Every GPU (or MIG instance) of the scenario the device plugin manages
/// (all but those claimed through DRA); time-sliced GPUs as as many
/// replicas as the pods use (at least the highest replica index + 1).
pub fn allocatable(scenario: &Scenario) -> proto::AllocatableResourcesResponse {
    let claimed: HashSet<&str> = scenario
        .claims()
        .flat_map(|c| c.devices.iter().map(String::as_str))
        .collect();
    // device uuid → (resource, replicas)
    let mut used: BTreeMap<String, (String, Option<u32>)> = BTreeMap::new();
    for d in scenario
        .pods
        .iter()
        .flat_map(|p| &p.containers)
        .flat_map(|c| &c.devices)
    {
        for id in &d.ids {
            let (uuid, replica) = match id.split_once("::") {
                Some((u, n)) => (u, n.parse::<u32>().ok()),
                None => (id.as_str(), None),
            };
            let entry = used
                .entry(uuid.to_owned())
                .or_insert((d.resource.clone(), None));
            if let Some(n) = replica {
                entry.1 = Some(entry.1.unwrap_or(0).max(n + 1));
            }
        }
    }
    let mut by_resource: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |uuid: &str, default_resource: String| {
        let (resource, replicas) = used.get(uuid).cloned().unwrap_or((default_resource, None));
        let ids = by_resource.entry(resource).or_default();
        match replicas {
            Some(n) => ids.extend((0..n).map(|r| format!("{uuid}::{r}"))),
            None => ids.push(uuid.to_owned()),
        }
    };
    for gpu in &scenario.gpus {
        if gpu.mig.is_empty() && !claimed.contains(gpu.uuid.as_str()) {
            add(&gpu.uuid, "nvidia.com/gpu".to_owned());
        }
        for mig in gpu
            .mig
            .iter()
            .filter(|m| !claimed.contains(m.uuid.as_str()))
        {
            add(&mig.uuid, format!("nvidia.com/mig-{}", mig.profile));
        }
    }
    proto::AllocatableResourcesResponse {
        devices: by_resource
            .into_iter()
            .map(|(resource_name, device_ids)| proto::ContainerDevices {
                resource_name,
                device_ids,
                topology: None,
            })
            .collect(),
        ..Default::default()
    }
}

/// The ids of `resource` no pod in `pods` holds, in allocatable order.
pub fn free<'a>(
    allocatable: &proto::AllocatableResourcesResponse,
    pods: impl Iterator<Item = &'a SimPod>,
    resource: &str,
) -> Vec<String> {
    let held: HashSet<&str> = pods
        .flat_map(|p| &p.containers)
        .flat_map(|c| &c.devices)
        .flat_map(|d| d.ids.iter().map(String::as_str))
        .collect();
    allocatable
        .devices
        .iter()
        .filter(|d| d.resource_name == resource)
        .flat_map(|d| &d.device_ids)
        .filter(|id| !held.contains(id.as_str()))
        .cloned()
        .collect()
}
