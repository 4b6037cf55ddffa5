//! Events are one resource served at two versions, as in kube-apiserver:
//! `events.k8s.io/v1` is how they are stored and `v1` (core) a view of the
//! same objects, so events a controller writes through either API are
//! listed by both — `kubectl describe` reads the core view, by
//! `involvedObject.*` fields. The field pairs are kube-apiserver's
//! conversion (pkg/apis/events/v1/conversion.go).

use serde_json::{Map, Value, json};

use super::Gvr;

/// (events.k8s.io/v1 field, core/v1 field).
const PAIRS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// Whether `gvr` is the core view of events.
pub(crate) fn is_core(gvr: &Gvr) -> bool {
    gvr.0.is_empty() && gvr.1 == "v1" && gvr.2 == "events"
}

/// Where events are kept, whichever API they come in by.
pub(crate) fn storage() -> Gvr {
    ("events.k8s.io".into(), "v1".into(), "events".into())
}

fn rename(obj: &Value, api_version: &str, from_core: bool) -> Value {
    let Some(fields) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in fields {
        let pair = PAIRS
            .iter()
            .find(|(new, old)| if from_core { old == k } else { new == k });
        let key = match pair {
            Some((new, old)) => if from_core { new } else { old }.to_string(),
            None => k.clone(),
        };
        out.insert(key, v.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    Value::Object(out)
}

/// A core/v1 Event as it is stored.
pub(crate) fn from_core(obj: &Value) -> Value {
    rename(obj, "events.k8s.io/v1", true)
}

/// A stored Event in the core/v1 view.
pub(crate) fn to_core(obj: &Value) -> Value {
    rename(obj, "v1", false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_views_convert_both_ways() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"},
            "note": "parked", "reason": "Parked", "reportingController": "gpuscale"});
        let core = to_core(&new);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "parked");
        assert_eq!(core["reportingComponent"], "gpuscale");
        assert_eq!(core["reason"], "Parked");
        assert_eq!(from_core(&core), new);
    }
}
