//! The slice of a Pod the mapper reads, as a `kube` resource type: the watch
//! deserializes only these fields (no spec, no managedFields, no
//! annotations), which keeps both the code and the memory of a watch small.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Deserialize)]
pub struct PodLite {
    #[serde(deserialize_with = "meta_lite")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<PodStatusLite>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatusLite {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub container_statuses: Option<Vec<ContainerStatusLite>>,
    #[serde(default)]
    pub init_container_statuses: Option<Vec<ContainerStatusLite>>,
    #[serde(default)]
    pub ephemeral_container_statuses: Option<Vec<ContainerStatusLite>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatusLite {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "containerID")]
    pub container_id: Option<String>,
}

/// Only the metadata fields the mapper uses; the rest is skipped unparsed.
pub(crate) fn meta_lite<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct MetaLite {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        owner_references: Option<Vec<OwnerReference>>,
    }
    let m = MetaLite::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        owner_references: m.owner_references,
        ..ObjectMeta::default()
    })
}

impl kube::Resource for PodLite {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_what_it_needs() -> Result<(), serde_json::Error> {
        let pod: PodLite = serde_json::from_str(
            r#"{"apiVersion":"v1","kind":"Pod",
                "metadata":{"name":"p","namespace":"n","uid":"u","resourceVersion":"7",
                  "labels":{"team":"a"},"annotations":{"x":"y"},
                  "managedFields":[{"manager":"kubelet","fieldsV1":{"f:status":{}}}],
                  "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"w-1","uid":"r","controller":true}]},
                "spec":{"nodeName":"n1","containers":[{"name":"c","image":"i"}]},
                "status":{"phase":"Running","containerStatuses":[{"name":"c","containerID":"containerd://abc","ready":true}]}}"#,
        )?;
        assert_eq!(pod.metadata.uid.as_deref(), Some("u"));
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("7"));
        assert!(pod.metadata.annotations.is_none() && pod.metadata.managed_fields.is_none());
        let status = pod.status.unwrap_or_default();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let cs = status.container_statuses.unwrap_or_default();
        assert_eq!(cs[0].container_id.as_deref(), Some("containerd://abc"));
        Ok(())
    }
}
