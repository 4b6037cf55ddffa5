//! Who may share a GPU with whom: tiers (docs/right-sizing.md, "Tiers").

use std::collections::BTreeMap;

use crate::Error;

/// The tier that is never time-sliced unless the user opts in.
pub const PRODUCTION: &str = "production";

/// The placement policy of a run.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `--tier NAMESPACE=TIER`, one per namespace.
    pub namespace_tiers: BTreeMap<String, String>,
    /// `--default-tier`: a workload with no tier anywhere.
    pub default_tier: String,
    /// `--time-slice-production`: production may be time-sliced too.
    pub time_slice_production: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            namespace_tiers: BTreeMap::new(),
            default_tier: PRODUCTION.into(),
            time_slice_production: false,
        }
    }
}

/// A tier name: what a Kubernetes label value may be, and not empty.
fn check_tier(t: &str) -> Result<(), Error> {
    let ok = !t.is_empty()
        && t.len() <= 63
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "{t:?} is not a tier: a label value (letters, digits, '-', '_', '.', at most 63)"
        )))
    }
}

impl Policy {
    /// From the flags: `NAMESPACE=TIER` pairs, the default tier.
    pub fn new(
        pairs: &[String],
        default_tier: &str,
        time_slice_production: bool,
    ) -> Result<Self, Error> {
        check_tier(default_tier)?;
        let mut namespace_tiers = BTreeMap::new();
        for p in pairs {
            let Some((ns, tier)) = p.split_once('=') else {
                return Err(Error::Usage(format!(
                    "--tier {p:?}: expected NAMESPACE=TIER"
                )));
            };
            check_tier(tier)?;
            if ns.is_empty() {
                return Err(Error::Usage(format!("--tier {p:?}: no namespace")));
            }
            if namespace_tiers
                .insert(ns.to_string(), tier.to_string())
                .is_some()
            {
                return Err(Error::Usage(format!(
                    "--tier: namespace {ns:?} given twice"
                )));
            }
        }
        Ok(Self {
            namespace_tiers,
            default_tier: default_tier.into(),
            time_slice_production,
        })
    }

    /// A workload's tier and where it came from: its pods' label or
    /// annotation, else `--tier`, else its namespace's label, else the
    /// default. Pods that disagree: `production` if any says so.
    pub fn tier(
        &self,
        pods: &[String],
        namespace: &str,
        namespace_label: Option<&str>,
    ) -> (String, String) {
        if pods.iter().any(|t| t == PRODUCTION) {
            return (PRODUCTION.into(), "its pods".into());
        }
        if let Some(t) = pods.iter().min() {
            return (t.clone(), "its pods".into());
        }
        if let Some(t) = self.namespace_tiers.get(namespace) {
            return (t.clone(), "--tier".into());
        }
        if let Some(t) = namespace_label {
            return (t.to_string(), "its namespace".into());
        }
        (self.default_tier.clone(), "--default-tier".into())
    }

    /// Whether workloads of `tier` may be time-sliced.
    pub fn may_time_slice(&self, tier: &str) -> bool {
        tier != PRODUCTION || self.time_slice_production
    }
}
