//! gpuscale NVML simulator.
//!
//! Built as a `cdylib` (`libgpuscale_nvml_sim.so`) it exports the NVML C
//! functions that `nvml-wrapper` 0.13 calls, driven by a scenario file (see
//! `docs/scenario.md`); as an `rlib` it exposes the scenario types.

pub mod scenario;

pub use scenario::{DEFAULT_SCENARIO_YAML, Scenario, ScenarioError, default_scenario, load, parse};

pub mod ffi;
pub mod live;
mod sim;

pub use sim::{ENV_EPOCH, ENV_SCENARIO};
