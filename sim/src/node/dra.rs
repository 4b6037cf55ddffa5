//! DRA on the simulated node: the names NVIDIA's DRA driver gives the
//! scenario's GPUs and MIG instances, the node's ResourceSlices, and the
//! `dynamic_resources` the kubelet reports for claims.

use std::collections::{BTreeMap, HashMap};

use gpuscale_nvml_sim::scenario::{
    Architecture, Container as SimContainer, NVIDIA_DRA_DRIVER, Scenario,
};
use serde_json::{Value, json};

use super::proto;

/// GPU or MIG UUID → the driver's device name: `gpu-<minor>` and
/// `gpu-<parentMinor>-mig-<profile>-<profileID>-<placementStart>`.
pub fn device_names(scenario: &Scenario) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for (i, g) in scenario.gpus.iter().enumerate() {
        names.insert(g.uuid.clone(), format!("gpu-{i}"));
        for m in &g.mig {
            names.insert(
                m.uuid.clone(),
                format!(
                    "gpu-{i}-mig-{}-{}-{}",
                    m.profile.replace('.', ""),
                    profile_id(&m.profile),
                    m.gpu_instance_id
                ),
            );
        }
    }
    names
}

/// NVML's GPU instance profile IDs of the H100/A100 profiles.
fn profile_id(profile: &str) -> u32 {
    match profile.split('.').next().unwrap_or("") {
        "1g" if profile.ends_with("+me") => 20,
        "1g" if profile.contains("20gb") => 15,
        "1g" => 19,
        "2g" => 14,
        "3g" => 9,
        "4g" => 5,
        _ => 0,
    }
}

/// The node's ResourceSlices (`resource.k8s.io/v1`): one for NVIDIA's
/// driver with every GPU not in MIG mode and every MIG instance, one per
/// other driver the pods claim from (devices without UUIDs).
pub fn resource_slices(scenario: &Scenario) -> Vec<Value> {
    let names = device_names(scenario);
    let node = &scenario.node;
    let driver_version = semver(&scenario.driver_version);
    let mut devices = Vec::new();
    for g in &scenario.gpus {
        let common = |t: &str, uuid: &str, memory_mib: u64| {
            json!({
                "type": { "string": t },
                "uuid": { "string": uuid },
                "productName": { "string": g.model },
                "architecture": { "string": arch(g.architecture) },
                "driverVersion": { "version": driver_version },
                "resource.kubernetes.io/pciBusID": { "string": short_bus_id(&g.pci_bus_id) },
                "memory": { "int": memory_mib },
            })
        };
        if g.mig.is_empty() {
            devices.push(json!({
                "name": names.get(&g.uuid),
                "attributes": common("gpu", &g.uuid, g.memory_mib),
                "capacity": { "memory": { "value": format!("{}Mi", g.memory_mib) } },
            }));
        }
        for m in &g.mig {
            let mut attributes = common("mig", &m.uuid, m.memory_mib);
            attributes["parentUUID"] = json!({ "string": g.uuid });
            attributes["profile"] = json!({ "string": m.profile });
            devices.push(json!({
                "name": names.get(&m.uuid),
                "attributes": attributes,
                "capacity": { "memory": { "value": format!("{}Mi", m.memory_mib) } },
            }));
        }
    }
    let mut slices = vec![slice(node, NVIDIA_DRA_DRIVER, devices)];
    let mut others: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for c in scenario.claims().filter(|c| c.driver != NVIDIA_DRA_DRIVER) {
        let devices = others.entry(&c.driver).or_default();
        for d in &c.devices {
            devices.push(json!({ "name": d, "attributes": { "type": { "string": "device" } } }));
        }
    }
    slices.extend(
        others
            .into_iter()
            .map(|(d, devices)| slice(node, d, devices)),
    );
    slices
}

fn slice(node: &str, driver: &str, devices: Vec<Value>) -> Value {
    let name = format!(
        "{node}-{driver}-{}",
        &super::objects::template_hash(driver)[..5]
    );
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": name,
            "uid": super::objects::uid_of(&name),
            "ownerReferences": [{ "apiVersion": "v1", "kind": "Node", "name": node, "uid": super::objects::uid_of(node) }],
        },
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": { "name": node, "generation": 1, "resourceSliceCount": 1 },
            "devices": devices,
        },
    })
}

/// What the kubelet reports for a container's claims: one `DynamicResource`
/// per claim, one `ClaimResource` per device, with its CDI device name.
pub fn dynamic_resources(
    c: &SimContainer,
    namespace: &str,
    node: &str,
    names: &HashMap<String, String>,
) -> Vec<proto::DynamicResource> {
    c.claims
        .iter()
        .map(|claim| {
            let claim_uid = super::objects::uid_of(&format!("{namespace}/{}", claim.name));
            proto::DynamicResource {
                claim_name: claim.name.clone(),
                claim_namespace: namespace.to_owned(),
                claim_resources: claim
                    .devices
                    .iter()
                    .map(|d| {
                        let device = names.get(d).cloned().unwrap_or_else(|| d.clone());
                        proto::ClaimResource {
                            cdi_devices: vec![proto::CdiDevice {
                                name: format!("k8s.{}/claim={claim_uid}-{device}", claim.driver),
                            }],
                            driver_name: claim.driver.clone(),
                            pool_name: node.to_owned(),
                            device_name: device,
                            share_id: claim.share_id.clone(),
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

fn arch(a: Architecture) -> &'static str {
    match a {
        Architecture::Volta => "Volta",
        Architecture::Turing => "Turing",
        Architecture::Ampere => "Ampere",
        Architecture::Ada => "Ada Lovelace",
        Architecture::Hopper => "Hopper",
        Architecture::Blackwell => "Blackwell",
    }
}

/// `570.172.08` → `570.172.8` (a semantic version has no leading zeros).
fn semver(v: &str) -> String {
    v.split('.')
        .map(|p| {
            p.parse::<u64>()
                .map_or_else(|_| p.to_owned(), |n| n.to_string())
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// `00000000:18:00.0` → `0000:18:00.0` (the PCI domain as Kubernetes writes it).
fn short_bus_id(id: &str) -> String {
    match id.split_once(':') {
        Some((domain, rest)) if domain.len() == 8 => format!("{}:{rest}", &domain[4..]),
        _ => id.to_lowercase(),
    }
    .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuscale_nvml_sim::scenario::default_scenario;

    #[test]
    fn names_and_slices_of_the_default_node() {
        let s = default_scenario();
        let names = device_names(&s);
        assert_eq!(names[&s.gpus[7].uuid], "gpu-7");
        assert_eq!(names[&s.gpus[5].mig[2].uuid], "gpu-5-mig-1g10gb-19-9");
        let slices = resource_slices(&s);
        assert_eq!(slices.len(), 1);
        let devices = slices[0]["spec"]["devices"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // 7 GPUs not in MIG mode and 3 MIG instances.
        assert_eq!(devices.len(), 10);
        let mig = devices
            .iter()
            .find(|d| d["name"] == "gpu-5-mig-1g10gb-19-9");
        assert_eq!(
            mig.map(|d| d["attributes"]["parentUUID"]["string"].clone()),
            Some(json!(s.gpus[5].uuid))
        );
        assert_eq!(semver("570.172.08"), "570.172.8");
        assert_eq!(short_bus_id("00000000:AB:00.0"), "0000:ab:00.0");
    }
}
