//! Field selectors as the API server evaluates them on `list` and `watch`:
//! `f=v`, `f==v`, `f!=v`, joined by commas, over the fields each kind
//! supports (`metadata.name` and `metadata.namespace` everywhere). An
//! unsupported field is a 400, as on a real server; an absent field is "".

use serde_json::Value;

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields(Vec<(String, bool, String)>);

/// Fields a kind (by plural) may be selected on, besides `metadata.*`.
fn supported(plural: &str, field: &str) -> bool {
    let extra: &[&str] = match plural {
        "pods" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "reportingController",
            "reportingComponent",
            "source",
            "type",
        ],
        "resourceslices" => &["spec.nodeName", "spec.driver", "spec.pool.name"],
        "nodes" => &["spec.unschedulable"],
        "secrets" => &["type"],
        "namespaces" => &["status.phase"],
        "replicasets" | "statefulsets" | "deployments" => &["status.replicas"],
        _ => &[],
    };
    matches!(field, "metadata.name" | "metadata.namespace") || extra.contains(&field)
}

impl Fields {
    /// Parse `fieldSelector` for a collection; the error is the message a
    /// real server gives.
    pub(crate) fn parse(s: &str, plural: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !supported(plural, field) {
                return Err(format!("field label not supported: {field}"));
            }
            out.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(Self(out))
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, eq, want)| {
            let got = match obj.pointer(&format!("/{}", field.replace('.', "/"))) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }
}
