//! The scenario file: what the simulated node looks like over time.
//!
//! The schema is documented in `docs/scenario.md`; these types implement it
//! exactly (`deny_unknown_fields` everywhere). [`parse`] and [`load`] enforce
//! the size [`limits`] first, then run the semantic checks of `validate`, and
//! report errors as `FILE:LINE:COL: field.path[2].x: message` (every semantic
//! problem at once, one such line each).

mod curve;
mod dcgm;
mod depth;
mod error;
pub mod limits;
pub(crate) mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use curve::{Curve, Ramp, Sine, Step};
pub use dcgm::{Dcgm, DcgmField};
pub use error::{FieldPath, ScenarioError, Segment};
pub use validate::parse_pci_bus_id;

/// The built-in scenario (one 8-GPU H100 node), compiled into the library.
pub const DEFAULT_SCENARIO_YAML: &str = include_str!("../../scenarios/default.yaml");

/// Origin string used in error messages for the built-in scenario.
pub const DEFAULT_SCENARIO_ORIGIN: &str = "<built-in default scenario>";

/// The built-in scenarios other than the default, by name: the GPUs
/// without GPM whose activity DCGM serves (A100 with MIG, L4).
pub const BUILTIN_SCENARIOS: &[(&str, &str)] = &[(
    "pre-hopper",
    include_str!("../../scenarios/pre-hopper.yaml"),
)];

/// Environment variable naming a built-in scenario (`pre-hopper`), read by
/// the simulators when `GPUSCALE_SIM_SCENARIO` names no file.
pub const ENV_BUILTIN: &str = "GPUSCALE_SIM_BUILTIN";

/// A built-in scenario by name, parsed; None for an unknown name.
pub fn builtin(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    let (_, yaml) = BUILTIN_SCENARIOS.iter().find(|(n, _)| *n == name)?;
    Some(parse(yaml, &format!("<built-in scenario {name}>")))
}

/// The scenario the simulators run: the file `GPUSCALE_SIM_SCENARIO`
/// names, else the built-in `GPUSCALE_SIM_BUILTIN` names, else the default.
pub fn from_env() -> Result<Scenario, String> {
    if let Some(p) = std::env::var_os("GPUSCALE_SIM_SCENARIO").filter(|p| !p.is_empty()) {
        return load(Path::new(&p)).map_err(|e| e.to_string());
    }
    match std::env::var(ENV_BUILTIN) {
        Ok(name) if !name.is_empty() => match builtin(&name) {
            Some(parsed) => parsed.map_err(|e| e.to_string()),
            None => Err(format!("{ENV_BUILTIN}={name:?}: no such built-in scenario")),
        },
        _ => parse(DEFAULT_SCENARIO_YAML, DEFAULT_SCENARIO_ORIGIN).map_err(|e| e.to_string()),
    }
}

/// Parse and validate a scenario. `origin` names the text in error messages
/// (usually the file path).
/// Every semantic problem is reported at once; a syntax or type error stops
/// the parse where it is.
pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
    limits::check_text(text, origin)?;
    let de = yaml_serde::Deserializer::from_str(text);
    let scenario: Scenario =
        serde_path_to_error::deserialize(de).map_err(|e| error::from_serde(origin, e))?;
    validate::validate(&scenario).map_err(|found| error::located(origin, text, found))?;
    Ok(scenario)
}

/// Read, parse and validate a scenario file; a file over
/// [`limits::MAX_FILE_BYTES`] is refused before it is read.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let origin = path.display().to_string();
    let text = limits::read(path, &origin)?;
    parse(&text, &origin)
}

/// The built-in default scenario, parsed.
///
/// # Panics
/// Never in practice: the built-in file is checked by the unit tests.
#[allow(clippy::expect_used)]
pub fn default_scenario() -> Scenario {
    parse(DEFAULT_SCENARIO_YAML, DEFAULT_SCENARIO_ORIGIN).expect("built-in scenario is valid")
}

fn default_node() -> String {
    "sim-node-1".into()
}
fn default_driver_version() -> String {
    "570.172.08".into()
}
fn default_cuda_version() -> i32 {
    12080
}
fn default_true() -> bool {
    true
}
fn default_vbios() -> String {
    "96.00.99.00.01".into()
}
fn default_power_limit() -> f64 {
    700.0
}

/// A whole simulated node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Node name; pods are bound to it. Default `sim-node-1`.
    #[serde(default = "default_node")]
    pub node: String,
    /// Reported driver version. Default `570.172.08`.
    #[serde(default = "default_driver_version")]
    pub driver_version: String,
    /// CUDA driver version in NVML's integer form (major*1000 + minor*10). Default 12080.
    #[serde(default = "default_cuda_version")]
    pub cuda_version: i32,
    /// The GPUs; index = position in the list.
    #[serde(default, deserialize_with = "limits::gpus")]
    pub gpus: Vec<Gpu>,
    /// Pods on the node (used by the exporter's simulated pod sources, not by NVML).
    #[serde(default, deserialize_with = "limits::pods")]
    pub pods: Vec<Pod>,
    /// Seconds a pod of a Deployment or StatefulSet scaled up on the
    /// simulated cluster takes to become Ready (its model loading), 0 to
    /// 3600. Default 5.
    #[serde(default = "default_cold_start", deserialize_with = "cold_start")]
    pub cold_start_seconds: f64,
    /// The simulated DCGM host engine: with this section `--simulate`
    /// starts one and reads it; how it treats the profiling fields.
    #[serde(default)]
    pub dcgm: Option<Dcgm>,
}

fn default_cold_start() -> f64 {
    5.0
}

fn cold_start<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let s = f64::deserialize(d)?;
    if (0.0..=3600.0).contains(&s) {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "cold_start_seconds {s}: must be between 0 and 3600"
        )))
    }
}

/// GPU architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    Volta,
    Turing,
    Ampere,
    Ada,
    #[default]
    Hopper,
    Blackwell,
}

impl Architecture {
    /// GPM (GPU performance monitoring) exists on Hopper and newer.
    pub fn has_gpm(self) -> bool {
        matches!(self, Architecture::Hopper | Architecture::Blackwell)
    }
    /// MIG exists on Ampere (A100/A30), Hopper and Blackwell.
    pub fn has_mig(self) -> bool {
        matches!(
            self,
            Architecture::Ampere | Architecture::Hopper | Architecture::Blackwell
        )
    }
    /// Row remapping exists on Ampere and newer.
    pub fn has_row_remapping(self) -> bool {
        !matches!(self, Architecture::Volta | Architecture::Turing)
    }
    /// CUDA compute capability (major, minor).
    pub fn compute_capability(self) -> (i32, i32) {
        match self {
            Architecture::Volta => (7, 0),
            Architecture::Turing => (7, 5),
            Architecture::Ampere => (8, 0),
            Architecture::Ada => (8, 9),
            Architecture::Hopper => (9, 0),
            Architecture::Blackwell => (10, 0),
        }
    }
    /// NVLink version of the architecture's NVLink generation.
    pub fn nvlink_version(self) -> u32 {
        match self {
            Architecture::Volta | Architecture::Turing => 2,
            Architecture::Ampere | Architecture::Ada => 3,
            Architecture::Hopper => 4,
            Architecture::Blackwell => 5,
        }
    }
}

/// Names accepted in a GPU's `unsupported` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    Utilization,
    MemoryUtilization,
    Power,
    PowerLimit,
    Energy,
    Temperature,
    MemoryTemperature,
    FanSpeed,
    Clocks,
    Throttle,
    Violation,
    Pstate,
    Pcie,
    PcieReplay,
    Nvlink,
    Ecc,
    RemappedRows,
    RetiredPages,
    Encoder,
    Decoder,
    Gpm,
    Processes,
    ProcessUtilization,
    Serial,
    Vbios,
}

/// Maximum clocks in MHz.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxClocks {
    pub graphics: u32,
    pub sm: u32,
    pub memory: u32,
    pub video: u32,
}

impl Default for MaxClocks {
    fn default() -> Self {
        MaxClocks {
            graphics: 1980,
            sm: 1980,
            memory: 2619,
            video: 1755,
        }
    }
}

/// Temperature thresholds in °C.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    pub shutdown: u32,
    pub slowdown: u32,
    pub gpu_max: u32,
    pub memory_max: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            shutdown: 92,
            slowdown: 87,
            gpu_max: 85,
            memory_max: 95,
        }
    }
}

/// PCIe link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pcie {
    /// The link as trained now.
    pub generation: u32,
    pub width: u32,
    /// What the GPU and slot support; default: the current value (a link
    /// below its maximum is a downgraded link).
    #[serde(default)]
    pub max_generation: Option<u32>,
    #[serde(default)]
    pub max_width: Option<u32>,
}

impl Pcie {
    pub fn max_generation(&self) -> u32 {
        self.max_generation.unwrap_or(self.generation)
    }
    pub fn max_width(&self) -> u32 {
        self.max_width.unwrap_or(self.width)
    }
}

impl Default for Pcie {
    fn default() -> Self {
        Pcie {
            generation: 5,
            width: 16,
            max_generation: None,
            max_width: None,
        }
    }
}

/// An NVLink link that is down (inactive) over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDown {
    pub link: u32,
    pub from_s: f64,
    /// null = down for good.
    #[serde(default)]
    pub to_s: Option<f64>,
}

/// The GPU's NVSwitch fabric registration (nvmlDeviceGetGpuFabricInfo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    NotStarted,
    InProgress,
    Completed,
    /// Completed with an error status (Fabric Manager refused the GPU).
    Failed,
}

/// One physical GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub model: String,
    /// `GPU-…`; unique.
    pub uuid: String,
    /// `DDDDDDDD:BB:DD.F` (hex); unique.
    pub pci_bus_id: String,
    /// Board serial; absent = NVML_ERROR_NOT_SUPPORTED (as on consumer boards).
    #[serde(default)]
    pub serial: Option<String>,
    #[serde(default = "default_vbios")]
    pub vbios_version: String,
    #[serde(default)]
    pub architecture: Architecture,
    pub memory_mib: u64,
    #[serde(default)]
    pub reserved_mib: u64,
    #[serde(default = "default_power_limit")]
    pub power_limit_watts: f64,
    /// The board's default power limit; absent = `power_limit_watts` (a GPU
    /// whose limit nobody lowered).
    #[serde(default)]
    pub power_limit_default_watts: Option<f64>,
    #[serde(default)]
    pub max_clocks_mhz: MaxClocks,
    #[serde(default)]
    pub thresholds_celsius: Thresholds,
    #[serde(default)]
    pub pcie: Pcie,
    /// Number of NVLink links (0 = none).
    #[serde(default)]
    pub nvlinks: u32,
    #[serde(default = "default_true")]
    pub ecc: bool,
    /// ECC after the next reset; default: `ecc`.
    #[serde(default)]
    pub ecc_pending: Option<bool>,
    /// NVLink links down over intervals.
    #[serde(default)]
    pub nvlink_down: Vec<LinkDown>,
    /// Fabric state over time (`steps` of states); absent = no NVSwitch
    /// fabric (NOT_SUPPORTED).
    #[serde(default)]
    pub fabric: Vec<FabricStep>,
    #[serde(default)]
    pub unsupported: Vec<Feature>,
    #[serde(default)]
    pub load: Load,
    /// Energy counter at the epoch, joules.
    #[serde(default)]
    pub energy_offset_joules: f64,
    #[serde(default)]
    pub throttle: Vec<ThrottleInterval>,
    #[serde(default)]
    pub xids: Vec<XidEvent>,
    #[serde(default)]
    pub ecc_errors: Vec<EccErrorEvent>,
    #[serde(default)]
    pub nvlink_errors: Vec<NvlinkErrorEvent>,
    #[serde(default)]
    pub pcie_replays: u64,
    #[serde(default)]
    pub remapped_rows: RemappedRows,
    #[serde(default)]
    pub retired_pages: RetiredPages,
    /// From then on every call on this GPU returns NVML_ERROR_GPU_IS_LOST.
    #[serde(default)]
    pub lost_at_s: Option<f64>,
    /// MIG instances; non-empty = MIG mode enabled.
    #[serde(default)]
    pub mig: Vec<MigInstance>,
    #[serde(default)]
    pub processes: Vec<Process>,
}

impl Gpu {
    /// Whether `feature` is listed in `unsupported`.
    pub fn unsupported(&self, feature: Feature) -> bool {
        self.unsupported.contains(&feature)
    }
    /// MIG mode is enabled (at least one instance).
    pub fn mig_enabled(&self) -> bool {
        !self.mig.is_empty()
    }
    /// Whether the GPU has fallen off the bus at scenario time `t`.
    pub fn is_lost(&self, t: f64) -> bool {
        self.lost_at_s.is_some_and(|at| t >= at)
    }
    /// Processes running in the MIG instance with `uuid`.
    pub fn processes_in_mig<'a>(&'a self, uuid: &'a str) -> impl Iterator<Item = &'a Process> + 'a {
        self.processes
            .iter()
            .filter(move |p| p.mig.as_deref() == Some(uuid))
    }
    /// Used memory (MiB) at `t`: `load.memory_used_mib`, or the sum of the processes' memory.
    pub fn memory_used_mib(&self, t: f64) -> f64 {
        match &self.load.memory_used_mib {
            Some(c) => c.at(t),
            None => self.processes.iter().map(|p| p.memory_mib as f64).sum(),
        }
    }
    /// Active throttle reasons at `t`.
    pub fn throttle_reasons(&self, t: f64) -> Vec<ThrottleReason> {
        let mut out = Vec::new();
        for iv in &self.throttle {
            if iv.active_at(t) {
                for r in &iv.reasons {
                    if !out.contains(r) {
                        out.push(*r);
                    }
                }
            }
        }
        out
    }
    /// Total seconds in `[0, t]` during which any of `reasons` was active.
    pub fn throttle_seconds(&self, reasons: &[ThrottleReason], t: f64) -> f64 {
        let mut ivs: Vec<(f64, f64)> = self
            .throttle
            .iter()
            .filter(|iv| iv.reasons.iter().any(|r| reasons.contains(r)))
            .map(|iv| (iv.from_s.max(0.0), iv.to_s.unwrap_or(f64::INFINITY).min(t)))
            .filter(|(a, b)| b > a)
            .collect();
        ivs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut total = 0.0;
        let mut cur: Option<(f64, f64)> = None;
        for (a, b) in ivs {
            match cur {
                Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
                Some((ca, cb)) => {
                    total += cb - ca;
                    cur = Some((a, b));
                }
                None => cur = Some((a, b)),
            }
        }
        if let Some((a, b)) = cur {
            total += b - a;
        }
        total
    }
    /// ECC errors of `kind` that happened by `t`.
    pub fn ecc_count(&self, kind: EccErrorType, t: f64) -> u64 {
        self.ecc_errors
            .iter()
            .filter(|e| e.kind == kind && e.at_s <= t)
            .map(|e| e.count)
            .sum()
    }
    /// Whether NVLink `link` is down at `t`.
    pub fn nvlink_down(&self, link: u32, t: f64) -> bool {
        self.nvlink_down
            .iter()
            .any(|d| d.link == link && t >= d.from_s && d.to_s.is_none_or(|to| t < to))
    }
    /// The fabric state at `t`: the last step at or before `t` (the first
    /// before it); `None` without a fabric.
    pub fn fabric_at(&self, t: f64) -> Option<FabricState> {
        let first = self.fabric.first()?;
        let last = self
            .fabric
            .iter()
            .rev()
            .find(|s| s.at_s <= t)
            .unwrap_or(first);
        Some(last.state)
    }
    /// NVLink errors of `kind` on `link` that happened by `t`.
    pub fn nvlink_error_count(&self, link: u32, kind: NvlinkErrorType, t: f64) -> u64 {
        self.nvlink_errors
            .iter()
            .filter(|e| e.link == link && e.kind == kind && e.at_s <= t)
            .map(|e| e.count)
            .sum()
    }
}

/// The fabric state from `at_s` on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricStep {
    pub at_s: f64,
    pub state: FabricState,
}

/// GPU load. Every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Load {
    /// GPU utilization %, default 0.
    pub utilization: Curve,
    pub memory_utilization: Curve,
    /// Default: sum of the GPU's processes' `memory_mib`.
    pub memory_used_mib: Option<Curve>,
    /// Default 0.
    pub power_watts: Curve,
    pub temperature_celsius: Curve,
    pub memory_temperature_celsius: Curve,
    pub fan_speed: Curve,
    /// Default: the max clock.
    pub graphics_clock_mhz: Option<Curve>,
    pub sm_clock_mhz: Option<Curve>,
    pub memory_clock_mhz: Option<Curve>,
    pub video_clock_mhz: Option<Curve>,
    pub pstate: Curve,
    pub encoder_utilization: Curve,
    pub decoder_utilization: Curve,
    pub sm_active: Curve,
    pub sm_occupancy: Curve,
    pub tensor_active: Curve,
    pub dram_active: Curve,
    pub pcie_tx_bytes_per_second: Curve,
    pub pcie_rx_bytes_per_second: Curve,
    /// Per active link.
    pub nvlink_tx_bytes_per_second: Curve,
    pub nvlink_rx_bytes_per_second: Curve,
}

/// Clock event ("throttle") reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleReason {
    GpuIdle,
    ApplicationsClocks,
    SwPowerCap,
    HwSlowdown,
    SyncBoost,
    SwThermal,
    HwThermal,
    HwPowerBrake,
    Display,
}

impl ThrottleReason {
    /// NVML bit (nvmlClocksEventReason*).
    pub fn bit(self) -> u64 {
        match self {
            ThrottleReason::GpuIdle => 0x1,
            ThrottleReason::ApplicationsClocks => 0x2,
            ThrottleReason::SwPowerCap => 0x4,
            ThrottleReason::HwSlowdown => 0x8,
            ThrottleReason::SyncBoost => 0x10,
            ThrottleReason::SwThermal => 0x20,
            ThrottleReason::HwThermal => 0x40,
            ThrottleReason::HwPowerBrake => 0x80,
            ThrottleReason::Display => 0x100,
        }
    }
}

/// Throttle reasons active over `[from_s, to_s)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThrottleInterval {
    pub reasons: Vec<ThrottleReason>,
    #[serde(default)]
    pub from_s: f64,
    /// `null` = forever.
    #[serde(default)]
    pub to_s: Option<f64>,
}

impl ThrottleInterval {
    pub fn active_at(&self, t: f64) -> bool {
        t >= self.from_s && self.to_s.is_none_or(|end| t < end)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidEvent {
    pub at_s: f64,
    pub xid: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EccErrorType {
    Corrected,
    Uncorrected,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EccErrorEvent {
    pub at_s: f64,
    #[serde(rename = "type")]
    pub kind: EccErrorType,
    pub count: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlinkErrorType {
    CrcFlit,
    CrcData,
    Replay,
    Recovery,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkErrorEvent {
    pub at_s: f64,
    pub link: u32,
    #[serde(rename = "type")]
    pub kind: NvlinkErrorType,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RemappedRows {
    #[serde(default)]
    pub correctable: u32,
    #[serde(default)]
    pub uncorrectable: u32,
    #[serde(default)]
    pub pending: bool,
    #[serde(default)]
    pub failure: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RetiredPages {
    #[serde(default)]
    pub single_bit: u32,
    #[serde(default)]
    pub double_bit: u32,
    #[serde(default)]
    pub pending: bool,
}

/// A MIG instance (GPU instance + one compute instance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigInstance {
    /// `MIG-…`; unique.
    pub uuid: String,
    /// e.g. `3g.40gb`.
    pub profile: String,
    pub gpu_instance_id: u32,
    #[serde(default)]
    pub compute_instance_id: u32,
    pub memory_mib: u64,
    #[serde(default)]
    pub load: MigLoad,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MigLoad {
    /// Default: sum of the instance's processes' `memory_mib`.
    #[serde(default)]
    pub memory_used_mib: Option<Curve>,
    #[serde(default)]
    pub sm_active: Curve,
    #[serde(default)]
    pub sm_occupancy: Curve,
    #[serde(default)]
    pub tensor_active: Curve,
    #[serde(default)]
    pub dram_active: Curve,
}

/// A compute process on a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    pub name: String,
    pub memory_mib: u64,
    /// Percent (nvmlDeviceGetProcessUtilization).
    #[serde(default)]
    pub sm_utilization: Curve,
    #[serde(default)]
    pub memory_utilization: Curve,
    /// MIG uuid when the process runs in a MIG instance of this GPU.
    #[serde(default)]
    pub mig: Option<String>,
}

/// Pod phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum PodPhase {
    Pending,
    #[default]
    Running,
    Succeeded,
    Failed,
}

/// A pod bound to the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    #[serde(default)]
    pub phase: PodPhase,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub owner: Option<Owner>,
    #[serde(default)]
    pub containers: Vec<Container>,
}

/// The pod's controller (ReplicaSet owners name their Deployment: `{ kind: Deployment, name: web }`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Container {
    pub name: String,
    /// Container ID, 64 lowercase hex characters.
    pub id: String,
    #[serde(default)]
    pub devices: Vec<DeviceAlloc>,
    /// Devices allocated through DRA ResourceClaims.
    #[serde(default)]
    pub claims: Vec<ClaimAlloc>,
    #[serde(default)]
    pub pids: Vec<u32>,
}

/// The DRA driver whose devices are GPUs and MIG instances.
pub const NVIDIA_DRA_DRIVER: &str = "gpu.nvidia.com";

fn default_dra_driver() -> String {
    NVIDIA_DRA_DRIVER.into()
}

/// Devices a container holds through one DRA ResourceClaim (in the pod's
/// namespace). The simulated node serves them in pod-resources
/// `dynamic_resources` and publishes the node's ResourceSlices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimAlloc {
    /// ResourceClaim name.
    pub name: String,
    /// DRA driver. Default `gpu.nvidia.com`.
    #[serde(default = "default_dra_driver")]
    pub driver: String,
    /// GPU or MIG UUIDs for `gpu.nvidia.com`; device names for other drivers.
    pub devices: Vec<String>,
    /// DRA device sharing: the `share_id` the kubelet reports.
    #[serde(default)]
    pub share_id: Option<String>,
}

/// Devices allocated to a container by a device plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceAlloc {
    /// e.g. `nvidia.com/gpu`, `nvidia.com/mig-3g.40gb`.
    pub resource: String,
    /// GPU or MIG UUIDs; time-sliced replicas as `<uuid>::<n>`.
    pub ids: Vec<String>,
}

impl DeviceAlloc {
    /// The device UUIDs with any time-slicing replica suffix (`::n`) removed.
    pub fn device_uuids(&self) -> impl Iterator<Item = &str> {
        self.ids
            .iter()
            .map(|id| id.split_once("::").map_or(id.as_str(), |(u, _)| u))
    }
}

impl Scenario {
    /// Every DRA claim allocation of every container of every pod.
    pub fn claims(&self) -> impl Iterator<Item = &ClaimAlloc> {
        self.pods
            .iter()
            .flat_map(|p| &p.containers)
            .flat_map(|c| &c.claims)
    }
    /// The GPU (index, gpu) with this GPU uuid.
    pub fn gpu_by_uuid(&self, uuid: &str) -> Option<(usize, &Gpu)> {
        self.gpus.iter().enumerate().find(|(_, g)| g.uuid == uuid)
    }
    /// The (gpu index, mig index) with this MIG uuid.
    pub fn mig_by_uuid(&self, uuid: &str) -> Option<(usize, usize)> {
        self.gpus
            .iter()
            .enumerate()
            .find_map(|(i, g)| g.mig.iter().position(|m| m.uuid == uuid).map(|j| (i, j)))
    }
}

#[cfg(test)]
mod tests;
