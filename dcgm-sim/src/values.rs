//! What the simulated host engine knows: the entities of the scenario's
//! node, their profiling metric groups and their field values.

use gpuscale_nvml_sim::scenario::{DcgmField, Gpu, MigInstance, Scenario};

use gpuscale_dcgm_abi::*;

/// Entity ids of GPU and compute instances: `gpu * 8 + slot`, as DCGM
/// numbers them (`DCGM_MAX_INSTANCES_PER_GPU`).
pub(crate) const PER_GPU: u32 = 8;

/// A resolved entity.
pub(crate) enum Entity<'a> {
    Gpu(&'a Gpu),
    /// A GPU instance, or the compute instance in it.
    Instance {
        mig: &'a MigInstance,
    },
}

pub(crate) fn resolve(s: &Scenario, e: dcgmGroupEntityPair_t, t: f64) -> Option<Entity<'_>> {
    let (gpu_idx, slot) = match e.entityGroupId {
        DCGM_FE_GPU => (e.entityId, None),
        DCGM_FE_GPU_I | DCGM_FE_GPU_CI => (e.entityId / PER_GPU, Some(e.entityId % PER_GPU)),
        _ => return None,
    };
    let gpu = s.gpus.get(gpu_idx as usize).filter(|g| !g.is_lost(t))?;
    match slot {
        None => Some(Entity::Gpu(gpu)),
        Some(j) => Some(Entity::Instance {
            mig: gpu.mig.get(j as usize)?,
        }),
    }
}

/// A field's value now.
pub(crate) enum Reading {
    Double(f64),
    Int(i64),
    Str(String),
    /// Status other than OK (unknown field, not watched...).
    Status(dcgmReturn_t),
}

/// The value of `field` for `entity` at scenario time `t`.
pub(crate) fn read(s: &Scenario, entity: &Entity<'_>, field: u16, t: f64) -> Reading {
    if field == DCGM_FI_DEV_UUID {
        return Reading::Str(match entity {
            Entity::Gpu(g) => g.uuid.clone(),
            Entity::Instance { mig, .. } => mig.uuid.clone(),
        });
    }
    let Some(f) = DcgmField::from_id(field) else {
        return Reading::Status(DCGM_ST_UNKNOWN_FIELD);
    };
    let int = matches!(
        f,
        DcgmField::PcieTxBytes
            | DcgmField::PcieRxBytes
            | DcgmField::NvlinkTxBytes
            | DcgmField::NvlinkRxBytes
    );
    let value = if s.dcgm().blank.contains(&f) {
        None
    } else {
        profiling(entity, f, t)
    };
    match (value, int) {
        (Some(v), false) => Reading::Double(v),
        (Some(v), true) => Reading::Int(v.round() as i64),
        (None, false) => Reading::Double(DCGM_FP64_BLANK),
        (None, true) => Reading::Int(DCGM_INT64_BLANK),
    }
}

/// The scenario's curve for a profiling field: ratios from its percentages,
/// rates in bytes per second; None where the entity has no such value.
fn profiling(entity: &Entity<'_>, f: DcgmField, t: f64) -> Option<f64> {
    let pct = |v: f64| v / 100.0;
    match entity {
        Entity::Gpu(g) => {
            let l = &g.load;
            let links = f64::from(g.nvlinks);
            Some(match f {
                DcgmField::GraphicsActive => pct(l.utilization.at(t)),
                DcgmField::SmActive => pct(l.sm_active.at(t)),
                DcgmField::SmOccupancy => pct(l.sm_occupancy.at(t)),
                DcgmField::TensorActive => pct(l.tensor_active.at(t)),
                DcgmField::DramActive => pct(l.dram_active.at(t)),
                DcgmField::PcieTxBytes => l.pcie_tx_bytes_per_second.at(t),
                DcgmField::PcieRxBytes => l.pcie_rx_bytes_per_second.at(t),
                DcgmField::NvlinkTxBytes => l.nvlink_tx_bytes_per_second.at(t) * links,
                DcgmField::NvlinkRxBytes => l.nvlink_rx_bytes_per_second.at(t) * links,
            })
        }
        Entity::Instance { mig, .. } => {
            let l = &mig.load;
            match f {
                DcgmField::SmActive => Some(pct(l.sm_active.at(t))),
                DcgmField::SmOccupancy => Some(pct(l.sm_occupancy.at(t))),
                DcgmField::TensorActive => Some(pct(l.tensor_active.at(t))),
                DcgmField::DramActive => Some(pct(l.dram_active.at(t))),
                _ => None,
            }
        }
    }
}

/// The profiling metric groups of a GPU: (major, minor, fields). The
/// activity fields are major 0, PCIe 1, NVLink 2; a field the scenario
/// lists in `dcgm.own_group` has a major of its own, one in
/// `dcgm.multi_pass` sits in minor 1 of its major.
pub(crate) fn metric_groups(s: &Scenario) -> Vec<(u16, u16, Vec<u16>)> {
    let mut groups: Vec<(u16, u16, Vec<u16>)> = Vec::new();
    for (k, f) in DcgmField::ALL.into_iter().enumerate() {
        let major = match f.id() {
            _ if s.dcgm().own_group.contains(&f) => 10 + k as u16,
            1001..=1005 => 0,
            1009 | 1010 => 1,
            _ => 2,
        };
        let minor = u16::from(s.dcgm().multi_pass.contains(&f));
        match groups.iter_mut().find(|g| g.0 == major && g.1 == minor) {
            Some(g) => g.2.push(f.id()),
            None => groups.push((major, minor, vec![f.id()])),
        }
    }
    groups
}
