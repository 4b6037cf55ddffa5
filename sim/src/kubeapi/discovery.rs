//! What the server serves: the built-in resources, and those of every
//! CustomResourceDefinition stored (served from the moment it is created),
//! with discovery documents (`/api`, `/apis`, each group/version's
//! `APIResourceList`) built from them.

use serde_json::{Value, json};

use super::{Gvr, State};

/// Where a resource's `scale` subresource reads and writes, as JSON pointers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScalePaths {
    pub(crate) spec: String,
    pub(crate) status: String,
    pub(crate) selector: Option<String>,
}

/// One served resource of one group/version.
#[derive(Debug, Clone)]
pub(crate) struct Resource {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) kind: String,
    pub(crate) namespaced: bool,
    pub(crate) status: bool,
    pub(crate) scale: Option<ScalePaths>,
    short: Vec<String>,
    /// Only `create` (the reviews).
    create_only: bool,
}

impl Resource {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether the kind has a strategic-merge schema (built-in kinds do;
    /// custom resources take merge patches only, as on a real server).
    pub(crate) fn builtin(&self) -> bool {
        !self.group.contains('.')
            || self.group.ends_with(".k8s.io") && !self.group.ends_with(".x-k8s.io")
    }

    fn entry(&self) -> Vec<Value> {
        let verbs = if self.create_only {
            json!(["create"])
        } else {
            json!([
                "create", "delete", "get", "list", "patch", "update", "watch"
            ])
        };
        let mut out = vec![json!({
            "name": self.plural, "singularName": self.kind.to_lowercase(),
            "namespaced": self.namespaced, "kind": self.kind, "verbs": verbs,
            "shortNames": self.short,
        })];
        let sub = |name: &str, kind: &str| {
            json!({"name": format!("{}/{name}", self.plural), "singularName": "",
                "namespaced": self.namespaced, "kind": kind, "verbs": ["get", "patch", "update"]})
        };
        if self.status {
            out.push(sub("status", &self.kind));
        }
        if self.scale.is_some() {
            out.push(sub("scale", "Scale"));
        }
        out
    }
}

/// (group, version, plural, kind, namespaced, short names, subresources).
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    &'static [&'static str],
);

const BUILTIN: &[Builtin] = &[
    (
        "",
        "v1",
        "namespaces",
        "Namespace",
        false,
        &["ns"],
        &["status"],
    ),
    ("", "v1", "nodes", "Node", false, &["no"], &["status"]),
    ("", "v1", "pods", "Pod", true, &["po"], &["status"]),
    ("", "v1", "services", "Service", true, &["svc"], &["status"]),
    ("", "v1", "configmaps", "ConfigMap", true, &["cm"], &[]),
    ("", "v1", "secrets", "Secret", true, &[], &[]),
    ("", "v1", "events", "Event", true, &["ev"], &[]),
    (
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        &["sa"],
        &[],
    ),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["deploy"],
        &["scale", "status"],
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["sts"],
        &["scale", "status"],
    ),
    (
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["rs"],
        &["scale", "status"],
    ),
    ("batch", "v1", "jobs", "Job", true, &[], &["status"]),
    (
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        true,
        &["ds"],
        &["status"],
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        &["status"],
    ),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        &["status"],
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        &[],
        &[],
    ),
    ("events.k8s.io", "v1", "events", "Event", true, &["ev"], &[]),
    (
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
        &[],
        &[],
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        &["status"],
    ),
    (
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        false,
        &[],
        &["status"],
    ),
    (
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "TokenReview",
        false,
        &[],
        &["create"],
    ),
    (
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
        &[],
        &["create"],
    ),
];

/// `resource.k8s.io` (DRA), in each version `State::resource_versions` lists.
const DRA: &[(&str, &str, bool, &[&str])] = &[
    ("deviceclasses", "DeviceClass", false, &[]),
    ("resourceclaims", "ResourceClaim", true, &["status"]),
    ("resourceclaimtemplates", "ResourceClaimTemplate", true, &[]),
    ("resourceslices", "ResourceSlice", false, &[]),
];

fn builtin_scale() -> ScalePaths {
    ScalePaths {
        spec: "/spec/replicas".into(),
        status: "/status/replicas".into(),
        selector: Some("/spec/selector".into()),
    }
}

fn resource(
    g: &str,
    v: &str,
    plural: &str,
    kind: &str,
    ns: bool,
    short: &[&str],
    subs: &[&str],
) -> Resource {
    Resource {
        group: g.into(),
        version: v.into(),
        plural: plural.into(),
        kind: kind.into(),
        namespaced: ns,
        status: subs.contains(&"status"),
        scale: subs.contains(&"scale").then(builtin_scale),
        short: short.iter().map(|s| (*s).to_string()).collect(),
        create_only: subs.contains(&"create"),
    }
}

/// A JSONPath of a CRD (`.spec.replicas`) as a JSON pointer.
fn pointer(path: &str) -> String {
    path.replace('.', "/")
}

/// The resources a CRD object declares, one per served version.
fn from_crd(crd: &Value) -> Vec<Resource> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let (Some(group), Some(plural), Some(kind)) = (
        spec["group"].as_str(),
        names["plural"].as_str(),
        names["kind"].as_str(),
    ) else {
        return Vec::new();
    };
    let short: Vec<&str> = names["shortNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let versions = spec["versions"].as_array().map_or(&[][..], Vec::as_slice);
    versions
        .iter()
        .filter(|v| v["served"].as_bool() != Some(false))
        .filter_map(|v| {
            let mut r = resource(
                group,
                v["name"].as_str()?,
                plural,
                kind,
                spec["scope"] != "Cluster",
                &short,
                &[],
            );
            let subs = &v["subresources"];
            r.status = subs.get("status").is_some();
            r.scale = subs.get("scale").map(|s| ScalePaths {
                spec: pointer(s["specReplicasPath"].as_str().unwrap_or(".spec.replicas")),
                status: pointer(
                    s["statusReplicasPath"]
                        .as_str()
                        .unwrap_or(".status.replicas"),
                ),
                selector: s["labelSelectorPath"].as_str().map(pointer),
            });
            Some(r)
        })
        .collect()
}

pub(crate) fn crds() -> Gvr {
    (
        "apiextensions.k8s.io".into(),
        "v1".into(),
        "customresourcedefinitions".into(),
    )
}

impl State {
    /// Everything served now: built-ins, DRA in its served versions, CRDs.
    pub(crate) fn resources(&self) -> Vec<Resource> {
        let mut out: Vec<Resource> = BUILTIN
            .iter()
            .map(|(g, v, p, k, ns, short, subs)| resource(g, v, p, k, *ns, short, subs))
            .collect();
        for v in &self.resource_versions {
            for (p, k, ns, subs) in DRA {
                out.push(resource("resource.k8s.io", v, p, k, *ns, &[], subs));
            }
        }
        let crd = crds();
        for (_, obj) in self.objects.iter().filter(|((g, _, _), _)| *g == crd) {
            out.extend(from_crd(obj));
        }
        out
    }

    /// The resource a request names, if served.
    pub(crate) fn resource(&self, gvr: &Gvr) -> Option<Resource> {
        self.resources()
            .into_iter()
            .find(|r| r.group == gvr.0 && r.version == gvr.1 && r.plural == gvr.2)
    }

    /// A discovery document for `path`, if it is one.
    pub(crate) fn discovery(&self, path: &str) -> Option<Value> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let all = self.resources();
        match parts.as_slice() {
            ["api"] => Some(json!({"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})),
            ["apis"] => Some(group_list(&all)),
            ["api", v] => resource_list(&all, "", v),
            ["apis", g, v] => resource_list(&all, g, v),
            ["apis", g] => group_list(&all)["groups"]
                .as_array()?
                .iter()
                .find(|x| x["name"] == *g)
                .cloned(),
            _ => None,
        }
    }
}

fn group_list(all: &[Resource]) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for r in all.iter().filter(|r| !r.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) if !vs.contains(&r.version) => vs.push(r.version.clone()),
            Some(_) => {}
            None => groups.push((r.group.clone(), vec![r.version.clone()])),
        }
    }
    let groups: Vec<Value> = groups
        .iter()
        .map(|(g, vs)| {
            let gvs: Vec<Value> = vs
                .iter()
                .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                .collect();
            json!({"name": g, "versions": gvs, "preferredVersion": gvs[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resource_list(all: &[Resource], group: &str, version: &str) -> Option<Value> {
    let list: Vec<Value> = all
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(Resource::entry)
        .collect();
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    (!list.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list})
    })
}
