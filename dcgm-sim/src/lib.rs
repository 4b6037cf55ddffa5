//! gpuscale DCGM simulator.
//!
//! Built as a `cdylib` (`libgpuscale_dcgm_sim.so`) it exports the DCGM C
//! functions the exporter's DCGM reader calls (`dcgmInit`, `dcgmConnect_v2`,
//! groups, field groups, watches, `dcgmEntitiesGetLatestValues`,
//! `dcgmProfGetSupportedMetricGroups`, ...), with DCGM 4's structures and
//! version words (the `gpuscale-dcgm-abi` crate, which the reader uses
//! too). Values come from the NVML simulator's scenario file
//! (`GPUSCALE_SIM_SCENARIO`): the GPUs' `load` curves and the `dcgm:`
//! section (docs/scenario.md). In standalone mode it connects to a host
//! engine over TCP: [`hostengine::HostEngine`] (and the `nv-hostengine-sim`
//! binary) is that peer, which can stop, come back or hang.

pub mod ffi;
pub mod hostengine;
mod state;
mod values;

pub use state::{ENV_EPOCH, ENV_SCENARIO};

/// File name of the simulator library.
pub const LIBRARY_FILE: &str = "libgpuscale_dcgm_sim.so";
