//! The spec-and-price table and the MIG profile tables (`advisor/data/`),
//! built in and replaceable by a file of the same format.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Error;

const GPUS: &str = include_str!("../data/gpus.yaml");
const MIG: &str = include_str!("../data/mig-profiles.yaml");

/// One GPU type the advisor knows.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GpuType {
    pub name: String,
    /// Substrings of the NVML model name that mean this type.
    #[serde(rename = "match")]
    pub matches: Vec<String>,
    pub memory_gib: f64,
    pub bandwidth_gbps: f64,
    pub fp8: bool,
    /// Dense FP16/BF16 tensor TFLOPs (not the sparse figure); none: compute
    /// is not judged on this type.
    #[serde(default)]
    pub fp16_tflops: Option<f64>,
    /// Dense FP8 tensor TFLOPs, where the type has FP8.
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    /// Key of its MIG profile table, if it has MIG.
    pub mig: Option<String>,
    pub price_usd_per_hour: f64,
    /// The price is the fleet's `gpu_price_usd_per_hour`, not the table's.
    #[serde(skip)]
    pub price_from_fleet: bool,
}

/// `gpus.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuTable {
    pub source: String,
    pub date: String,
    pub gpus: Vec<GpuType>,
}

/// One MIG profile: its share of the GPU and the memory it gives.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MigProfile {
    pub profile: String,
    pub compute_slices: u32,
    pub memory_eighths: u32,
    pub memory_gib: f64,
    /// Memory slices (0-7) an instance may start at (`nvidia-smi mig -lgipp`).
    pub placements: Vec<u32>,
}

/// `mig-profiles.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigTable {
    pub source: String,
    pub date: String,
    pub models: BTreeMap<String, Vec<MigProfile>>,
}

/// Both tables, checked.
#[derive(Debug, Clone)]
pub struct Tables {
    pub gpus: GpuTable,
    pub mig: MigTable,
    /// The types each cluster has nodes of (none known: all of them).
    pub sites: crate::sites::Sites,
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, Error> {
    yaml_serde::from_str(text).map_err(|e| Error::Table(format!("{what}: {e}")))
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::Table(format!("{}: {e}", path.display())))
}

impl Tables {
    /// The built-in tables, or the files given instead.
    pub fn load(gpus: Option<&Path>, mig: Option<&Path>) -> Result<Self, Error> {
        let gpus: GpuTable = match gpus {
            Some(p) => parse(&p.display().to_string(), &read(p)?)?,
            None => parse("built-in gpus.yaml", GPUS)?,
        };
        let mig: MigTable = match mig {
            Some(p) => parse(&p.display().to_string(), &read(p)?)?,
            None => parse("built-in mig-profiles.yaml", MIG)?,
        };
        let t = Self {
            gpus,
            mig,
            sites: Default::default(),
        };
        t.check()?;
        Ok(t)
    }

    /// Numbers that would make a recommendation nonsense are refused.
    fn check(&self) -> Result<(), Error> {
        for g in &self.gpus.gpus {
            let bad = |what: &str| Error::Table(format!("GPU {}: {what}", g.name));
            if g.matches.iter().all(|m| m.trim().is_empty()) {
                return Err(bad("`match` is empty"));
            }
            for (what, v) in [
                ("memory_gib", g.memory_gib),
                ("bandwidth_gbps", g.bandwidth_gbps),
                ("price_usd_per_hour", g.price_usd_per_hour),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(bad(&format!("{what} must be a positive number, not {v}")));
                }
            }
            for (what, v) in [("fp16_tflops", g.fp16_tflops), ("fp8_tflops", g.fp8_tflops)] {
                if let Some(v) = v.filter(|v| !(v.is_finite() && *v > 0.0)) {
                    return Err(bad(&format!("{what} must be a positive number, not {v}")));
                }
            }
            if g.fp8_tflops.is_some() && !g.fp8 {
                return Err(bad("fp8_tflops on a type with fp8: false"));
            }
            if let Some(m) = &g.mig
                && !self.mig.models.contains_key(m)
            {
                return Err(bad(&format!("MIG table {m:?} is not in the MIG profiles")));
            }
        }
        for (model, profiles) in &self.mig.models {
            for p in profiles {
                if p.compute_slices == 0
                    || p.compute_slices > 7
                    || p.memory_eighths == 0
                    || p.memory_eighths > 8
                    || !(p.memory_gib.is_finite() && p.memory_gib > 0.0)
                {
                    return Err(Error::Table(format!(
                        "MIG {model} {}: compute_slices 1-7, memory_eighths 1-8 and a positive memory_gib",
                        p.profile
                    )));
                }
                if p.placements.is_empty() || p.placements.iter().any(|s| s + p.memory_eighths > 8)
                {
                    return Err(Error::Table(format!(
                        "MIG {model} {}: placements must be starts whose {} memory slices end by slice 8",
                        p.profile, p.memory_eighths
                    )));
                }
            }
        }
        Ok(())
    }

    /// The type an NVML model name is, if the table knows it.
    pub fn gpu(&self, model: &str) -> Option<&GpuType> {
        let model = model.to_ascii_lowercase();
        self.gpus.gpus.iter().find(|g| {
            g.matches
                .iter()
                .any(|m| !m.is_empty() && model.contains(&m.to_ascii_lowercase()))
        })
    }

    /// The table with the prices Prometheus knows: a type some GPU of the
    /// fleet has a `gpu_price_usd_per_hour` for is priced at the highest
    /// such price, so a saving compares prices of one source.
    pub fn with_prices<'a>(&self, seen: impl Iterator<Item = (&'a str, f64)>) -> Self {
        let mut t = self.clone();
        let mut best: BTreeMap<String, f64> = BTreeMap::new();
        for (model, price) in seen {
            if let Some(g) = self.gpu(model) {
                let e = best.entry(g.name.clone()).or_insert(price);
                *e = e.max(price);
            }
        }
        for g in &mut t.gpus.gpus {
            if let Some(p) = best.get(&g.name) {
                g.price_usd_per_hour = *p;
                g.price_from_fleet = true;
            }
        }
        t
    }

    /// The table with the types each cluster was seen to have.
    pub fn with_sites(mut self, sites: crate::sites::Sites) -> Self {
        self.sites = sites;
        self
    }

    /// Where a type's price comes from, for the reasons printed.
    pub fn price_source(&self, g: &GpuType) -> String {
        if g.price_from_fleet {
            "the fleet's gpu_price_usd_per_hour".into()
        } else {
            format!("{} {}", self.gpus.source, self.gpus.date)
        }
    }

    /// The MIG profiles of a GPU type, smallest first.
    pub fn mig_profiles(&self, gpu: &GpuType) -> Vec<&MigProfile> {
        let mut v: Vec<&MigProfile> = gpu
            .mig
            .as_ref()
            .and_then(|m| self.mig.models.get(m))
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        v.sort_by(|a, b| {
            (a.compute_slices, a.memory_eighths).cmp(&(b.compute_slices, b.memory_eighths))
        });
        v
    }

    /// A MIG profile by name (`3g.40gb`, or `1c.3g.40gb`: its GPU instance)
    /// on a GPU type.
    pub fn mig_profile(&self, gpu: &GpuType, name: &str) -> Option<&MigProfile> {
        let gi = name.rsplit_once("c.").map_or(name, |(_, gi)| gi);
        let gi = gi.trim_end_matches("+me");
        self.mig_profiles(gpu).into_iter().find(|p| p.profile == gi)
    }
}

/// A valid MIG layout: each profile given a start of its own placements,
/// no two instances sharing a memory slice and at most 7 compute slices
/// in all (the MIG User Guide's placement rule). The starts, in the order
/// of `profiles`; none when no layout exists.
pub fn mig_layout(profiles: &[&MigProfile]) -> Option<Vec<u32>> {
    if profiles.iter().map(|p| p.compute_slices).sum::<u32>() > 7 {
        return None;
    }
    // Largest first: they have the fewest starts.
    let mut order: Vec<usize> = (0..profiles.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(profiles[*i].memory_eighths));
    let mut starts = vec![0; profiles.len()];
    place(profiles, &order, 0, &mut starts).then_some(starts)
}

fn place(profiles: &[&MigProfile], order: &[usize], used: u16, starts: &mut [u32]) -> bool {
    let Some((&i, rest)) = order.split_first() else {
        return true;
    };
    let p = profiles[i];
    for &s in &p.placements {
        let mask = ((1u16 << p.memory_eighths) - 1) << s;
        if used & mask == 0 {
            starts[i] = s;
            if place(profiles, rest, used | mask, starts) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_the_placement_rules() {
        let t = Tables::load(None, None).unwrap();
        let h100 = t.gpu("NVIDIA H100 80GB HBM3").unwrap();
        let p = |n: &str| t.mig_profile(h100, n).unwrap();
        // 3g + 2g + 2g: the 3g at slice 4, the 2g at 0 and 2.
        let l = mig_layout(&[p("3g.40gb"), p("2g.20gb"), p("2g.20gb")]).unwrap();
        assert_eq!(l, [4, 0, 2]);
        assert!(mig_layout(&[p("4g.40gb"), p("3g.40gb")]).is_some());
        // 7 compute slices, but the two 3g fill slices 0-7: no room for a 1g.
        assert!(mig_layout(&[p("3g.40gb"), p("3g.40gb"), p("1g.10gb")]).is_none());
        // Two 4g: only one start (0) each.
        assert!(mig_layout(&[p("4g.40gb"), p("4g.40gb")]).is_none());
        // 1g instances never start at slice 7: seven of them, not eight.
        assert!(mig_layout(&[p("1g.10gb"); 7]).is_some());
        assert!(mig_layout(&[p("1g.20gb"); 5]).is_none());
    }

    #[test]
    fn built_in_tables_load_and_match_nvml_names() {
        let t = Tables::load(None, None).unwrap();
        for (nvml, want) in [
            ("NVIDIA H100 80GB HBM3", "H100-80GB"),
            ("NVIDIA H100 NVL", "H100-94GB"),
            ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
            ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
            ("NVIDIA A100 80GB PCIe", "A100-80GB"),
            ("Tesla T4", "T4"),
            ("NVIDIA L40S", "L40S"),
            ("NVIDIA L4", "L4"),
            ("NVIDIA A10G", "A10G"),
            ("NVIDIA H200", "H200"),
        ] {
            assert_eq!(t.gpu(nvml).map(|g| g.name.as_str()), Some(want), "{nvml}");
        }
        assert!(t.gpu("NVIDIA GeForce RTX 4090").is_none());
        let h100 = t.gpu("NVIDIA H100 80GB HBM3").unwrap();
        let names: Vec<_> = t
            .mig_profiles(h100)
            .iter()
            .map(|p| p.profile.clone())
            .collect();
        assert_eq!(names[0], "1g.10gb");
        assert_eq!(t.mig_profile(h100, "1c.3g.40gb").unwrap().compute_slices, 3);
    }

    #[test]
    fn a_bad_override_is_an_error_naming_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gpus.yaml");
        std::fs::write(
            &p,
            "source: x\ndate: y\ngpus:\n- {name: X, match: [X], memory_gib: 10, bandwidth_gbps: 100, fp8: false, mig: null, price_usd_per_hour: -1}\n",
        )
        .unwrap();
        let e = Tables::load(Some(&p), None).unwrap_err().to_string();
        assert!(e.contains("price_usd_per_hour"), "{e}");
        std::fs::write(
            &p,
            "source: x\ndate: y\ngpus:\n- {name: X, match: [X], memory_gib: 10, bandwidth_gbps: 100, fp8: false, fp16_tflops: 0, mig: null, price_usd_per_hour: 1}\n",
        )
        .unwrap();
        let e = Tables::load(Some(&p), None).unwrap_err().to_string();
        assert!(e.contains("fp16_tflops"), "{e}");
        std::fs::write(&p, "gpus: [").unwrap();
        assert!(Tables::load(Some(&p), None).is_err());
        let missing = Tables::load(Some(&dir.path().join("none.yaml")), None).unwrap_err();
        assert!(missing.to_string().contains("none.yaml"));
    }
}
