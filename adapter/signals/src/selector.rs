//! Kubernetes label selectors, parsed with the full syntax: the metric
//! selector of the external and custom metrics APIs (keys are Prometheus
//! labels) and the pod selector an HPA sends (Kubernetes keys). The PromQL
//! translation lives with the provider, in `prometheus::matchers`.

use crate::limits::{MAX_REQUIREMENTS, MAX_SELECTOR_BYTES, MAX_SET_VALUES, excerpt};
use gpuscale_util::selector::{Limits, ParseError, validate_kube_key};

pub use gpuscale_util::selector::{Requirement, to_text};

/// The bounds on a client's selector (docs/adapter.md, "Request limits").
const LIMITS: Limits = Limits {
    max_bytes: MAX_SELECTOR_BYTES,
    max_requirements: MAX_REQUIREMENTS,
    max_set_values: MAX_SET_VALUES,
};

/// Why a selector (or namespace) was refused. Client input is quoted
/// through [`excerpt`] (bounded), never whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("label key {0} is not a valid Prometheus label name (use [a-zA-Z_][a-zA-Z0-9_]*)")]
    NotPromLabel(String),
    #[error("label key {0} is reserved: the namespace comes from the request path")]
    Reserved(String),
    #[error("invalid namespace {0}")]
    BadNamespace(String),
    #[error("the query this selector renders is {0} bytes, over the limit of {max}", max = crate::limits::MAX_QUERY_BYTES)]
    QueryTooLong(usize),
}

/// Parse a Kubernetes label selector (the `labelSelector` query parameter)
/// whose keys are Prometheus labels.
pub fn parse(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    gpuscale_util::selector::parse(input, LIMITS, validate_key)
}

/// Parse a selector of Kubernetes object labels (`app.kubernetes.io/name`
/// is fine): the pod selector an HPA sends for `pods/*`.
pub fn parse_kube(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    gpuscale_util::selector::parse(input, LIMITS, |k| {
        validate_kube_key(k).map_err(SelectorError::from)
    })
}

/// Kubernetes label key syntax, and a Prometheus label that is not reserved
/// (the namespace comes from the request path).
pub fn validate_key(key: &str) -> Result<(), SelectorError> {
    validate_kube_key(key)?;
    if !is_prom_label(key) {
        return Err(SelectorError::NotPromLabel(excerpt(key)));
    }
    if key == "namespace" || key.starts_with("__") {
        return Err(SelectorError::Reserved(excerpt(key)));
    }
    Ok(())
}

/// A Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_prom_label(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A namespace name (DNS-1123 label).
pub fn validate_namespace(ns: &str) -> Result<(), SelectorError> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && ns.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && ns
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(SelectorError::BadNamespace(excerpt(ns)))
    }
}

/// A `metav1.LabelSelector` object, as the custom metrics API echoes the
/// metric selector.
pub fn to_label_selector(reqs: &[Requirement]) -> serde_json::Value {
    let mut labels = serde_json::Map::new();
    let mut exprs = Vec::new();
    let expr = |k: &str, op: &str, vs: &[String]| {
        let mut e = serde_json::json!({"key": k, "operator": op});
        if !vs.is_empty() {
            e["values"] = serde_json::json!(vs);
        }
        e
    };
    for r in reqs {
        match r {
            Requirement::Equals(k, v) => {
                labels.insert(k.clone(), v.clone().into());
            }
            Requirement::NotEquals(k, v) => exprs.push(expr(k, "NotIn", std::slice::from_ref(v))),
            Requirement::In(k, vs) => exprs.push(expr(k, "In", vs)),
            Requirement::NotIn(k, vs) => exprs.push(expr(k, "NotIn", vs)),
            Requirement::Exists(k) => exprs.push(expr(k, "Exists", &[])),
            Requirement::DoesNotExist(k) => exprs.push(expr(k, "DoesNotExist", &[])),
        }
    }
    let mut out = serde_json::Map::new();
    if !labels.is_empty() {
        out.insert("matchLabels".into(), labels.into());
    }
    if !exprs.is_empty() {
        out.insert("matchExpressions".into(), exprs.into());
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_selectors_take_kubernetes_keys_and_round_trip() {
        let r = parse_kube("app.kubernetes.io/name=chat,tier in (b,a),!legacy").unwrap();
        assert_eq!(
            to_text(&r),
            "app.kubernetes.io/name=chat,!legacy,tier in (a,b)"
        );
        assert_eq!(parse_kube(&to_text(&r)).unwrap(), r);
        assert!(parse_kube("app=x\"").is_err());
        assert!(parse_kube("a>1").is_err());
        let sel = to_label_selector(&parse("model=m,tier notin (x)").unwrap());
        assert_eq!(sel["matchLabels"]["model"], "m");
        assert_eq!(sel["matchExpressions"][0]["operator"], "NotIn");
    }
}
