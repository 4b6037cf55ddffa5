//! Where a request path points: group, version, resource, namespace,
//! name and subresource.

use super::Gvr;

/// Where a path points: a collection (namespace None: all namespaces, or a
/// cluster-scoped resource) or one object, maybe its subresource.
pub(crate) struct Target {
    pub(crate) gvr: Gvr,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
}

pub(crate) fn target(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let s = |x: &str| Some(x.to_string());
    let (ns, r, name, sub) = match rest {
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            (None, "namespaces", s(name), s(sub))
        }
        ["namespaces", ns, r] => (s(ns), *r, None, None),
        ["namespaces", ns, r, name] => (s(ns), *r, s(name), None),
        ["namespaces", ns, r, name, sub] => (s(ns), *r, s(name), s(sub)),
        [r] => (None, *r, None, None),
        [r, name] => (None, *r, s(name), None),
        [r, name, sub] => (None, *r, s(name), s(sub)),
        _ => return None,
    };
    Some(Target {
        gvr: (group.to_string(), version.to_string(), r.to_string()),
        namespace: ns,
        name,
        subresource: sub,
    })
}
