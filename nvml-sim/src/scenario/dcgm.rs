//! The scenario's `dcgm:` section: how the simulated DCGM host engine
//! treats the profiling fields (the values themselves are the GPUs' `load`
//! curves, read by the DCGM simulator library on every GPU, Hopper or not).

use serde::{Deserialize, Serialize};

use super::Scenario;

/// A profiling field, as the scenario names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DcgmField {
    GraphicsActive,
    SmActive,
    SmOccupancy,
    TensorActive,
    DramActive,
    PcieTxBytes,
    PcieRxBytes,
    NvlinkTxBytes,
    NvlinkRxBytes,
}

impl DcgmField {
    pub const ALL: [DcgmField; 9] = [
        DcgmField::GraphicsActive,
        DcgmField::SmActive,
        DcgmField::SmOccupancy,
        DcgmField::TensorActive,
        DcgmField::DramActive,
        DcgmField::PcieTxBytes,
        DcgmField::PcieRxBytes,
        DcgmField::NvlinkTxBytes,
        DcgmField::NvlinkRxBytes,
    ];

    /// DCGM's field id (`DCGM_FI_PROF_*`).
    pub fn id(self) -> u16 {
        match self {
            DcgmField::GraphicsActive => 1001,
            DcgmField::SmActive => 1002,
            DcgmField::SmOccupancy => 1003,
            DcgmField::TensorActive => 1004,
            DcgmField::DramActive => 1005,
            DcgmField::PcieTxBytes => 1009,
            DcgmField::PcieRxBytes => 1010,
            DcgmField::NvlinkTxBytes => 1011,
            DcgmField::NvlinkRxBytes => 1012,
        }
    }

    pub fn from_id(id: u16) -> Option<DcgmField> {
        DcgmField::ALL.into_iter().find(|f| f.id() == id)
    }
}

/// `dcgm:`: every key optional; the default is a host engine that watches
/// every profiling field together and has a value for each. With the
/// section, the exporter's `--simulate` starts a simulated host engine.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dcgm {
    /// `dcgmWatchFields` refuses a field group holding any of these
    /// (DCGM_ST_PROFILING_NOT_SUPPORTED): the whole group is not watched.
    #[serde(default)]
    pub refuse: Vec<DcgmField>,
    /// These sit in a metric group of their own with the same major id as
    /// the activity fields (`dcgmProfGetSupportedMetricGroups`): they
    /// cannot be watched at the same time as the others.
    #[serde(default)]
    pub multi_pass: Vec<DcgmField>,
    /// These sit in a metric group of their own, with a major id of their
    /// own: watched in a field group of their own, beside the others.
    #[serde(default)]
    pub own_group: Vec<DcgmField>,
    /// GPUs (by UUID) without DCGM profiling, as a GPU whose host engine
    /// lacks the profiling module: `dcgmProfGetSupportedMetricGroups`
    /// answers DCGM_ST_PROFILING_NOT_SUPPORTED for them.
    #[serde(default)]
    pub no_profiling: Vec<String>,
    /// Watched, but every value is blank (`DCGM_FP64_BLANK`,
    /// `DCGM_INT64_BLANK`), as before a profiling sample exists.
    #[serde(default)]
    pub blank: Vec<DcgmField>,
}

/// A scenario without a `dcgm:` section: every field watched together.
static NO_SECTION: Dcgm = Dcgm {
    refuse: Vec::new(),
    multi_pass: Vec::new(),
    own_group: Vec::new(),
    no_profiling: Vec::new(),
    blank: Vec::new(),
};

impl Scenario {
    /// The `dcgm:` section, or the defaults without one.
    pub fn dcgm(&self) -> &Dcgm {
        self.dcgm.as_ref().unwrap_or(&NO_SECTION)
    }
}
