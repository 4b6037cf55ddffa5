//! `--profile`: how many series a GPU costs. `full` serves every series the
//! collectors build; `fleet` keeps the label values that rules, dashboards
//! and presets read, and sends 0/1 flags and error counters only while they
//! are non-zero, so a healthy GPU costs about half as many series.

use clap::ValueEnum;

use std::collections::{HashMap, HashSet};

use crate::metrics::{Family, Labels, Sample, Subject};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// Every series of every enabled collector.
    #[default]
    Full,
    /// Fewer series per GPU for large fleets (docs/operations.md).
    Fleet,
}

/// What the fleet profile keeps of a family's samples.
#[derive(Debug, Clone, Copy)]
pub enum Keep {
    /// Samples whose `label` is one of the values.
    Only(&'static str, &'static [&'static str]),
    /// Samples whose value is not 0: flags while set, counters once counted.
    NonZero,
    /// Samples whose value is 0: a 0/1 flag whose healthy value is 1.
    Zero,
}

/// The fleet profile's trims; families not listed are kept whole.
pub const FLEET: &[(&str, Keep)] = &[
    // Charted, and the sources of DCGM_FI_DEV_SM_CLOCK / MEM_CLOCK.
    ("gpu_clock_hertz", Keep::Only("clock", &["sm", "memory"])),
    ("gpu_clock_event_active", Keep::NonZero),
    ("gpu_clock_event_seconds_total", Keep::NonZero),
    ("gpu_ecc_errors_total", Keep::NonZero),
    // Counters whose first rise an alert sees: the recording rules stand
    // in a 0 from `gpu_info` while they are not served
    // (alerts/gpu.rules.yml), so a rise from 0 is seen in both profiles.
    ("gpu_nvlink_errors_total", Keep::NonZero),
    ("gpu_remapped_rows", Keep::NonZero),
    ("gpu_pcie_replays_total", Keep::NonZero),
    ("gpu_remapped_rows_pending", Keep::NonZero),
    ("gpu_remapped_rows_failure", Keep::NonZero),
    ("gpu_retired_pages", Keep::NonZero),
    ("gpu_retired_pages_pending", Keep::NonZero),
    // ECC switched off (now, or at the next reset): the rules and panels
    // read `== 0` only, so the healthy 1 carries nothing they use.
    ("gpu_ecc_enabled", Keep::Zero),
];

/// The PCIe link shape, as (current, maximum) pairs. A downgraded link
/// compares current with maximum per GPU: the fleet profile serves a GPU's
/// four series only while its link runs below either maximum
/// ([`Profile::trim_together`]), so a healthy link costs nothing.
const PCIE_LINK: [(&str, &str); 2] = [
    ("gpu_pcie_link_generation", "gpu_pcie_link_max_generation"),
    ("gpu_pcie_link_width", "gpu_pcie_link_max_width"),
];

/// NVLink links by state. GPUNVLinkDown fires for inactive links while
/// others are active, so the fleet profile serves both of a GPU's series
/// while any of its links is inactive, and neither while all are up.
const NVLINK_LINKS: &str = "gpu_nvlink_links";

fn label<'a>(labels: &'a Labels, key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
}

impl Keep {
    fn keeps(self, labels: &Labels, value: f64) -> bool {
        let listed =
            |key: &str, values: &[&str]| label(labels, key).is_some_and(|v| values.contains(&v));
        match self {
            Keep::Only(key, values) => listed(key, values),
            Keep::NonZero => value != 0.0,
            Keep::Zero => value == 0.0,
        }
    }
}

/// The GPU index of a device sample.
fn device(sample: &Sample) -> Option<u32> {
    match &sample.subject {
        Subject::Device(d) => Some(d.index),
        _ => None,
    }
}

/// Per GPU, the value of `name`'s device samples whose `state` label is
/// `state` (any, for `None`).
fn values(families: &[Family], name: &str, state: Option<&str>) -> HashMap<u32, f64> {
    families
        .iter()
        .filter(|f| f.name == name)
        .flat_map(|f| &f.samples)
        .filter(|s| state.is_none_or(|want| label(&s.labels, "state") == Some(want)))
        .filter_map(|s| Some((device(s)?, s.value)))
        .collect()
}

/// The GPUs whose PCIe link runs below its maximum generation or width.
fn downgraded(families: &[Family]) -> HashSet<u32> {
    let mut out = HashSet::new();
    for (current, max) in PCIE_LINK {
        let max = values(families, max, None);
        for (gpu, now) in values(families, current, None) {
            if max.get(&gpu).is_some_and(|m| now < *m) {
                out.insert(gpu);
            }
        }
    }
    out
}

/// The GPUs with at least one NVLink link inactive.
fn links_down(families: &[Family]) -> HashSet<u32> {
    values(families, NVLINK_LINKS, Some("inactive"))
        .into_iter()
        .filter(|(_, inactive)| *inactive > 0.0)
        .map(|(gpu, _)| gpu)
        .collect()
}

impl Profile {
    /// Trims that compare families built together: the fleet profile keeps
    /// the PCIe link shape of downgraded links and the NVLink link counts
    /// of GPUs with a link down, and nothing of either while healthy.
    pub fn trim_together(self, families: &mut [Family]) {
        if self == Profile::Full {
            return;
        }
        let (pcie, nvlink) = (downgraded(families), links_down(families));
        let pcie_family = |name: &str| PCIE_LINK.iter().any(|(c, m)| *c == name || *m == name);
        for family in families.iter_mut() {
            let keep = match family.name {
                NVLINK_LINKS => &nvlink,
                name if pcie_family(name) => &pcie,
                _ => continue,
            };
            family
                .samples
                .retain(|s| device(s).is_some_and(|gpu| keep.contains(&gpu)));
        }
    }

    /// Drops the samples of `family` this profile does not serve.
    pub fn trim(self, family: &mut Family) {
        if self == Profile::Full {
            return;
        }
        if let Some((_, keep)) = FLEET.iter().find(|(name, _)| *name == family.name) {
            family.samples.retain(|s| keep.keeps(&s.labels, s.value));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::{DeviceRef, Subject};

    fn family(name: &'static str, samples: &[(&'static str, &str, f64)]) -> Family {
        let gpu = Subject::Device(Arc::new(DeviceRef::new(0, "GPU-0".into())));
        let mut f = Family::gauge(name, "");
        for (k, v, value) in samples {
            f.push(gpu.clone(), vec![(*k, v.to_string())], *value);
        }
        f
    }

    fn kept(f: &Family) -> Vec<(String, f64)> {
        f.samples
            .iter()
            .map(|s| (s.labels[0].1.clone(), s.value))
            .collect()
    }

    #[test]
    fn every_trimmed_family_exists() {
        let names: Vec<&str> = crate::catalog::native().iter().map(|d| d.name).collect();
        for (name, keep) in FLEET {
            assert!(names.contains(name), "fleet trims unknown family {name}");
            if let Keep::Only(key, _) = keep {
                let desc = crate::catalog::native()
                    .into_iter()
                    .find(|d| d.name == *name);
                assert!(
                    desc.is_some_and(|d| d.labels.contains(key)),
                    "{name} has no label {key}"
                );
            }
        }
    }

    #[test]
    fn fleet_keeps_listed_values_and_non_zero_samples() {
        let mut t = family(
            "gpu_clock_hertz",
            &[("clock", "video", 1.7e9), ("clock", "sm", 1.9e9)],
        );
        Profile::Fleet.trim(&mut t);
        assert_eq!(kept(&t), [("sm".to_string(), 1.9e9)]);

        let mut rows = family(
            "gpu_remapped_rows",
            &[
                ("cause", "correctable", 2.0),
                ("cause", "uncorrectable", 0.0),
            ],
        );
        Profile::Fleet.trim(&mut rows);
        assert_eq!(kept(&rows), [("correctable".to_string(), 2.0)]);

        let mut events = family(
            "gpu_clock_event_active",
            &[("reason", "gpu_idle", 1.0), ("reason", "sw_thermal", 0.0)],
        );
        let full = events.clone();
        Profile::Full.trim(&mut events);
        assert_eq!(events, full);
        Profile::Fleet.trim(&mut events);
        assert_eq!(kept(&events), [("gpu_idle".to_string(), 1.0)]);
    }

    fn link(name: &'static str, values: [f64; 2]) -> Family {
        let mut f = Family::gauge(name, "");
        for (index, value) in values.into_iter().enumerate() {
            let gpu = Arc::new(DeviceRef::new(index as u32, format!("GPU-{index}").into()));
            f.push(Subject::Device(gpu), vec![], value);
        }
        f
    }

    #[test]
    fn fleet_keeps_the_pcie_link_shape_of_downgraded_links_only() {
        // GPU 0 runs at x16 gen 5 as it can; GPU 1 trained at x8.
        let mut families = vec![
            link("gpu_pcie_link_generation", [5.0, 5.0]),
            link("gpu_pcie_link_max_generation", [5.0, 5.0]),
            link("gpu_pcie_link_width", [16.0, 8.0]),
            link("gpu_pcie_link_max_width", [16.0, 16.0]),
        ];
        let full = families.clone();
        Profile::Full.trim_together(&mut families);
        assert_eq!(families, full);
        Profile::Fleet.trim_together(&mut families);
        for f in &families {
            let gpus: Vec<_> = f.samples.iter().filter_map(device).collect();
            assert_eq!(gpus, [1], "{}", f.name);
        }
    }

    #[test]
    fn fleet_keeps_both_link_counts_of_gpus_with_a_link_down_only() {
        // GPU 0 has all 18 links up; GPU 1 has one of 18 down.
        let mut links = Family::gauge("gpu_nvlink_links", "");
        for (index, active, inactive) in [(0, 18.0, 0.0), (1, 17.0, 1.0)] {
            let gpu = Subject::Device(Arc::new(DeviceRef::new(
                index,
                format!("GPU-{index}").into(),
            )));
            links.push(gpu.clone(), vec![("state", "active".into())], active);
            links.push(gpu, vec![("state", "inactive".into())], inactive);
        }
        let mut families = vec![links];
        Profile::Fleet.trim_together(&mut families);
        let kept: Vec<_> = families[0]
            .samples
            .iter()
            .map(|s| (device(s), label(&s.labels, "state"), s.value))
            .collect();
        assert_eq!(
            kept,
            [
                (Some(1), Some("active"), 17.0),
                (Some(1), Some("inactive"), 1.0)
            ]
        );
    }
}
