//! Every family the exporter can serve, from the descriptors their code
//! builds them with: docs/metrics.md and the dashboard checks read this list.

use crate::collectors::REGISTRY;
use crate::metrics::Desc;
use crate::metrics::dcgm;
use crate::{node, pods, selfmetrics};

/// The native families: every collector's, the pod join's, the exporter's own.
pub fn native() -> Vec<&'static Desc> {
    let collected = REGISTRY.iter().flat_map(|c| c.families.iter().copied());
    let mut all: Vec<&'static Desc> = Vec::new();
    for d in collected
        .chain(pods::FAMILIES.iter().copied())
        .chain(node::FAMILIES.iter().copied())
        .chain(selfmetrics::FAMILIES.iter().copied())
    {
        // Two collectors may feed one family (GPM and pcie: PCIe rates).
        if !all.iter().any(|seen| seen.name == d.name) {
            all.push(d);
        }
    }
    all
}

/// The dcgm-exporter families of `--compat dcgm`: name and kind.
pub fn compat() -> impl Iterator<Item = (&'static str, crate::metrics::Kind)> {
    dcgm::families()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_units_are_in_the_name() {
        let mut seen = std::collections::BTreeSet::new();
        for c in REGISTRY {
            assert!(seen.insert(c.name), "collector {} listed twice", c.name);
        }
        for d in native() {
            let unit = d.unit.replace("bytes/s", "bytes_per_second");
            let base = d.name.strip_suffix("_total").unwrap_or(d.name);
            assert!(
                unit.is_empty() || base.ends_with(&unit) || unit == "USD/h",
                "{}: unit {} is not in the name",
                d.name,
                d.unit
            );
            assert_eq!(
                d.name.ends_with("_total"),
                d.kind == crate::metrics::Kind::Counter,
                "{}: counters and only counters end in _total",
                d.name
            );
        }
    }

    #[test]
    fn compat_families_read_native_families() {
        let native: Vec<&str> = native().iter().map(|d| d.name).collect();
        for source in dcgm::native_sources() {
            assert!(
                native.contains(&source),
                "compat source {source} is no family"
            );
        }
    }
}
