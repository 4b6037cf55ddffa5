//! A ScaledObject trigger's `scalerMetadata`, checked. KEDA passes the whole
//! trigger metadata, so its own connection keys are accepted and ignored.

use std::collections::HashMap;

use gpuscale_signals::limits::{EXCERPT_CHARS, excerpt};

/// Keys gpuscale reads.
pub const KEYS: &[&str] = &[
    "metric",
    "labelSelector",
    "targetValue",
    "activationThreshold",
];
/// KEDA's own keys of `external`/`external-push` triggers (not ours to read).
pub const KEDA_KEYS: &[&str] = &[
    "scalerAddress",
    "caCert",
    "enableTLS",
    "tlsCertFile",
    "tlsClientCert",
    "tlsClientKey",
    "unsafeSsl",
];

/// One trigger: what to read and how to judge it.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    pub metric: String,
    pub selector: String,
    pub target: Option<f64>,
    /// Overrides the metric's configured `activation`.
    pub activation: Option<f64>,
}

/// A trigger that cannot be used; the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scalerMetadata.{key}: {message}")]
pub struct TriggerError {
    pub key: String,
    pub message: String,
}

fn err(key: &str, message: impl Into<String>) -> TriggerError {
    TriggerError {
        key: key.to_string(),
        message: message.into(),
    }
}

fn number(meta: &HashMap<String, String>, key: &str) -> Result<Option<f64>, TriggerError> {
    meta.get(key)
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .ok_or_else(|| err(key, format!("expected a number, got {}", excerpt(v))))
        })
        .transpose()
}

impl Trigger {
    pub fn parse(meta: &HashMap<String, String>) -> Result<Self, TriggerError> {
        let mut unknown: Vec<&str> = meta
            .keys()
            .map(String::as_str)
            .filter(|k| !KEYS.contains(k) && !KEDA_KEYS.contains(k))
            .collect();
        unknown.sort_unstable();
        if let Some(k) = unknown.first() {
            // The key is client input: a long one is named by its excerpt.
            let k = if k.len() > EXCERPT_CHARS {
                excerpt(k)
            } else {
                k.to_string()
            };
            return Err(err(&k, format!("unknown key (expected one of {KEYS:?})")));
        }
        let metric = match meta.get("metric").map(|m| m.trim()) {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => return Err(err("metric", "missing (the name of a configured metric)")),
        };
        let target = number(meta, "targetValue")?;
        if target.is_some_and(|t| t <= 0.0) {
            return Err(err("targetValue", "must be above 0"));
        }
        if target.is_some_and(|t| t >= gpuscale_signals::quantity::MAX_ABS) {
            return Err(err(
                "targetValue",
                format!(
                    "must be below {:e} (an int64 target)",
                    gpuscale_signals::quantity::MAX_ABS
                ),
            ));
        }
        Ok(Self {
            metric,
            selector: meta.get("labelSelector").cloned().unwrap_or_default(),
            target,
            activation: number(meta, "activationThreshold")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_full_trigger_with_kedas_own_keys() {
        let t = Trigger::parse(&meta(&[
            ("scalerAddress", "gpuscale-adapter.gpuscale:9443"),
            ("metric", "vllm_queue_depth"),
            ("labelSelector", "workload=chat"),
            ("targetValue", "2.5"),
            ("activationThreshold", "1"),
        ]))
        .unwrap();
        assert_eq!(t.metric, "vllm_queue_depth");
        assert_eq!(t.selector, "workload=chat");
        assert_eq!(t.target, Some(2.5));
        assert_eq!(t.activation, Some(1.0));
    }

    #[test]
    fn kedas_tls_keys_are_accepted_and_left_to_keda() {
        let t = Trigger::parse(&meta(&[
            ("scalerAddress", "gpuscale-adapter.gpuscale.svc:9443"),
            ("enableTLS", "true"),
            ("caCert", "-----BEGIN CERTIFICATE-----"),
            ("unsafeSsl", "false"),
            ("metric", "vllm_queue_depth"),
        ]))
        .unwrap();
        assert_eq!(t.metric, "vllm_queue_depth");
        assert_eq!(t.target, None);
    }

    #[test]
    fn every_error_names_its_key() {
        for (m, key) in [
            (meta(&[]), "metric"),
            (meta(&[("metric", "m"), ("selector", "a=b")]), "selector"),
            (
                meta(&[("metric", "m"), ("targetValue", "lots")]),
                "targetValue",
            ),
            (
                meta(&[("metric", "m"), ("targetValue", "0")]),
                "targetValue",
            ),
            (
                meta(&[("metric", "m"), ("activationThreshold", "NaN")]),
                "activationThreshold",
            ),
        ] {
            assert_eq!(Trigger::parse(&m).unwrap_err().key, key, "{m:?}");
        }
    }
}
