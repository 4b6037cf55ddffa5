//! The node's DRA ResourceSlices (`resource.k8s.io`, `spec.nodeName=<node>`):
//! which GPU or MIG UUID a claimed `(driver, pool, device)` is. The kubelet
//! names claimed devices only by that triplet (`gpu-3`,
//! `gpu-5-mig-1g10gb-19-6`); the driver publishes each device's `uuid`
//! (and `parentUUID`, `profile` for MIG) as attributes of its slice.
//!
//! One watch, streamed like the pod watch, on the newest served version
//! (`v1`, else `v1beta2`, else `v1beta1`); on failure the last known slices
//! are kept and marked stale.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ClusterResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde::Deserialize;
use tracing::{debug, info, warn};

use super::podlite::meta_lite;
use crate::backoff::Backoff;

/// Versions of `resource.k8s.io` with ResourceSlices, newest first.
pub const VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1beta1"];

/// What a slice says about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceDevice {
    /// GPU UUID, or the MIG device's own UUID.
    pub uuid: String,
    /// The MIG device's GPU.
    pub parent_uuid: Option<String>,
    /// MIG profile, e.g. `1g.10gb`.
    pub profile: Option<String>,
}

/// One slice, trimmed to what the mapping needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slice {
    pub driver: String,
    pub pool: String,
    /// Device name → attributes; devices without a `uuid` are `None`.
    pub devices: HashMap<String, Option<SliceDevice>>,
}

/// The latest view of this node's slices.
#[derive(Debug, Clone, Default)]
pub struct SliceView {
    /// A full list has completed at least once.
    pub synced: bool,
    /// The watch is failing (API down): `slices` is the last known state.
    pub stale: bool,
    /// The served version; `None` while unknown or when the cluster serves
    /// no ResourceSlices (before Kubernetes 1.32, or DRA turned off).
    pub version: Option<&'static str>,
    /// Slice name → slice.
    pub slices: HashMap<String, Arc<Slice>>,
}

impl SliceView {
    /// Claims can be mapped: the slices are listed and the watch is healthy.
    pub fn up(&self) -> bool {
        self.synced && !self.stale && self.version.is_some()
    }

    /// `(driver, pool, device)` → device, over all slices.
    pub fn index(&self) -> HashMap<(&str, &str, &str), Option<&SliceDevice>> {
        let mut index = HashMap::new();
        for s in self.slices.values() {
            for (name, d) in &s.devices {
                index.insert(
                    (s.driver.as_str(), s.pool.as_str(), name.as_str()),
                    d.as_ref(),
                );
            }
        }
        index
    }
}

/// A ResourceSlice as served by any of [`VERSIONS`]: `v1beta1` nests a
/// device's attributes under `basic`.
#[derive(Debug, Clone, Deserialize)]
pub struct SliceLite {
    #[serde(deserialize_with = "meta_lite")]
    pub metadata: ObjectMeta,
    pub spec: SliceSpecLite,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SliceSpecLite {
    pub driver: String,
    pub pool: PoolLite,
    #[serde(default)]
    pub devices: Vec<DeviceLite>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PoolLite {
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeviceLite {
    pub name: String,
    #[serde(default)]
    pub attributes: BTreeMap<String, AttributeLite>,
    #[serde(default)]
    pub basic: Option<BasicLite>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BasicLite {
    #[serde(default)]
    pub attributes: BTreeMap<String, AttributeLite>,
}

/// An attribute value; only strings are read.
#[derive(Debug, Clone, Deserialize)]
pub struct AttributeLite {
    #[serde(default)]
    pub string: Option<String>,
}

impl kube::Resource for SliceLite {
    /// The API version served (one of [`VERSIONS`]).
    type DynamicType = &'static str;
    type Scope = ClusterResourceScope;

    fn kind(_: &Self::DynamicType) -> Cow<'_, str> {
        "ResourceSlice".into()
    }
    fn group(_: &Self::DynamicType) -> Cow<'_, str> {
        "resource.k8s.io".into()
    }
    fn version(v: &Self::DynamicType) -> Cow<'_, str> {
        (*v).into()
    }
    fn plural(_: &Self::DynamicType) -> Cow<'_, str> {
        "resourceslices".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Trims a slice. Attribute names are qualified by the driver's domain or
/// not (`uuid` and `gpu.nvidia.com/uuid` are the same attribute).
pub fn slice(s: &SliceLite) -> Slice {
    let driver = &s.spec.driver;
    let devices = s
        .spec
        .devices
        .iter()
        .map(|d| {
            let attrs = match &d.basic {
                Some(b) if d.attributes.is_empty() => &b.attributes,
                _ => &d.attributes,
            };
            let get = |key: &str| {
                attrs
                    .get(key)
                    .or_else(|| attrs.get(&format!("{driver}/{key}")))
                    .and_then(|a| a.string.clone())
                    .filter(|v| !v.is_empty())
            };
            let device = get("uuid").map(|uuid| SliceDevice {
                uuid,
                parent_uuid: get("parentUUID"),
                profile: get("profile"),
            });
            (d.name.clone(), device)
        })
        .collect();
    Slice {
        driver: driver.clone(),
        pool: s.spec.pool.name.clone(),
        devices,
    }
}

/// The newest served version with `resourceslices`; `Ok(None)` when the
/// cluster serves none (404 on every version).
async fn discover(client: &Client) -> Result<Option<&'static str>, kube::Error> {
    for v in VERSIONS {
        match client
            .list_api_group_resources(&format!("resource.k8s.io/{v}"))
            .await
        {
            Ok(list) if list.resources.iter().any(|r| r.name == "resourceslices") => {
                return Ok(Some(v));
            }
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// How often a cluster that serves no ResourceSlices is asked again (an
/// upgrade, DRA turned on).
const REDISCOVER: Duration = Duration::from_secs(60);

/// Watches this node's slices forever, publishing a new view on every change.
pub async fn run(
    url: Option<String>,
    kubeconfig: Option<PathBuf>,
    node: String,
    publish: impl Fn(SliceView) + Send + 'static,
) {
    let mut view = SliceView::default();
    let max_backoff = Duration::from_secs(30);
    let mut backoff = Backoff::new(Duration::from_millis(250), max_backoff);
    let mut logged = false;
    loop {
        let client = match super::kubeapi::client(url.as_deref(), kubeconfig.as_ref()).await {
            Ok(c) => c,
            Err(e) => {
                if !logged {
                    warn!(error = %e, "DRA ResourceSlices unavailable: no Kubernetes API client; retrying");
                    logged = true;
                }
                tokio::time::sleep(max_backoff).await;
                continue;
            }
        };
        let version = match discover(&client).await {
            Ok(Some(v)) => v,
            Ok(None) => {
                if !view.synced || view.version.is_some() {
                    info!(
                        "the cluster serves no resource.k8s.io ResourceSlices: DRA claims are not mapped (device-plugin attribution unaffected)"
                    );
                }
                view = SliceView {
                    synced: true,
                    ..SliceView::default()
                };
                publish(view.clone());
                backoff.reset();
                tokio::time::sleep(REDISCOVER).await;
                continue;
            }
            Err(e) => {
                fail(&mut view, &e, &publish);
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
        };
        let api: Api<SliceLite> = Api::all_with(client, &version);
        let mut watch = Watch {
            node: &node,
            version,
            view: &mut view,
            backoff: &mut backoff,
            publish: &publish,
        };
        watch.follow(api).await;
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// One watch of the node's slices in one API version, until it fails.
struct Watch<'a, P: Fn(SliceView)> {
    node: &'a str,
    version: &'static str,
    view: &'a mut SliceView,
    backoff: &'a mut Backoff,
    publish: &'a P,
}

impl<P: Fn(SliceView)> Watch<'_, P> {
    async fn follow(&mut self, api: Api<SliceLite>) {
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={}", self.node))
            .any_semantic();
        let mut stream = watcher::watcher(api, config).boxed();
        let mut init: Option<HashMap<String, Arc<Slice>>> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => init = Some(HashMap::new()),
                Ok(Event::InitApply(s)) => {
                    if let (Some(buf), Some(name)) = (init.as_mut(), s.metadata.name.clone()) {
                        buf.insert(name, Arc::new(slice(&s)));
                    }
                }
                Ok(Event::InitDone) => self.synced(init.take().unwrap_or_default()),
                Ok(Event::Apply(s)) => {
                    if let Some(name) = s.metadata.name.clone() {
                        self.view.slices.insert(name, Arc::new(slice(&s)));
                        (self.publish)(self.view.clone());
                    }
                }
                Ok(Event::Delete(s)) => {
                    if let Some(name) = s.metadata.name.as_deref() {
                        self.view.slices.remove(name);
                        (self.publish)(self.view.clone());
                    }
                }
                Err(e) => {
                    fail(self.view, &e, self.publish);
                    return;
                }
            }
        }
    }

    fn synced(&mut self, slices: HashMap<String, Arc<Slice>>) {
        let view = &mut *self.view;
        view.slices = slices;
        if !view.up() {
            info!(node = %self.node, version = %self.version, slices = view.slices.len(), "DRA ResourceSlices synced");
        }
        view.synced = true;
        view.stale = false;
        view.version = Some(self.version);
        self.backoff.reset();
        (self.publish)(view.clone());
    }
}

fn fail(view: &mut SliceView, e: &dyn std::fmt::Display, publish: &impl Fn(SliceView)) {
    if view.stale {
        debug!(error = %e, "ResourceSlice watch still failing");
    } else {
        warn!(error = %e, "ResourceSlice watch failed; keeping the last known slices, marked stale");
    }
    view.stale = true;
    publish(view.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_uuids_of_every_served_version() -> Result<(), serde_json::Error> {
        // v1 / v1beta2: attributes on the device; v1beta1: under `basic`.
        let v1: SliceLite = serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": { "name": "n1-gpu.nvidia.com-x", "managedFields": [] },
            "spec": {
                "driver": "gpu.nvidia.com", "nodeName": "n1",
                "pool": { "name": "n1", "generation": 1, "resourceSliceCount": 1 },
                "devices": [
                    { "name": "gpu-0", "attributes": {
                        "type": { "string": "gpu" }, "uuid": { "string": "GPU-a" },
                        "index": { "int": 0 }, "driverVersion": { "version": "570.172.8" } } },
                    { "name": "gpu-1-mig-1g10gb-19-6", "attributes": {
                        "type": { "string": "mig" }, "uuid": { "string": "MIG-b" },
                        "gpu.nvidia.com/parentUUID": { "string": "GPU-c" },
                        "profile": { "string": "1g.10gb" } } },
                    { "name": "no-uuid", "attributes": {} }
                ]
            }
        }))?;
        let s = slice(&v1);
        assert_eq!(
            (s.driver.as_str(), s.pool.as_str()),
            ("gpu.nvidia.com", "n1")
        );
        assert_eq!(
            s.devices["gpu-0"].as_ref().map(|d| d.uuid.as_str()),
            Some("GPU-a")
        );
        let mig = s.devices["gpu-1-mig-1g10gb-19-6"].clone();
        assert_eq!(
            mig,
            Some(SliceDevice {
                uuid: "MIG-b".into(),
                parent_uuid: Some("GPU-c".into()),
                profile: Some("1g.10gb".into()),
            })
        );
        assert_eq!(s.devices["no-uuid"], None);

        let beta1: SliceLite = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "old" },
            "spec": { "driver": "gpu.nvidia.com", "nodeName": "n1", "pool": { "name": "n1" },
                "devices": [ { "name": "gpu-0", "basic": { "attributes": { "uuid": { "string": "GPU-a" } } } } ] }
        }))?;
        assert_eq!(
            slice(&beta1).devices["gpu-0"]
                .as_ref()
                .map(|d| d.uuid.as_str()),
            Some("GPU-a")
        );
        Ok(())
    }
}
