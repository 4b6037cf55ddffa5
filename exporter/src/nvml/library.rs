//! Where the NVML library comes from: the system driver, an explicit path, or
//! the simulator.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

/// File name of the NVML simulator library built by `nvml-sim/`.
pub const SIMULATOR_FILE: &str = "libgpuscale_nvml_sim.so";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibSource {
    /// `libnvidia-ml.so.1` through the dynamic loader's search path.
    System,
    Path(PathBuf),
}

impl LibSource {
    pub fn describe(&self) -> String {
        match self {
            LibSource::System => "libnvidia-ml.so.1".to_string(),
            LibSource::Path(p) => p.display().to_string(),
        }
    }

    pub fn init(&self) -> Result<Nvml, NvmlError> {
        match self {
            LibSource::System => Nvml::init(),
            LibSource::Path(p) => Nvml::builder().lib_path(OsStr::new(p)).init(),
        }
    }
}

/// Finds the simulator library: next to the executable (cargo puts it in the
/// same target directory, or its `deps/`), or in the container image's lib dir.
pub fn find_simulator(exe: Option<&Path>) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        candidates.push(dir.join(SIMULATOR_FILE));
        candidates.push(dir.join("deps").join(SIMULATOR_FILE));
        if let Some(up) = dir.parent() {
            candidates.push(up.join(SIMULATOR_FILE));
            candidates.push(up.join("lib").join("gpuscale").join(SIMULATOR_FILE));
        }
    }
    candidates.push(PathBuf::from("/usr/local/lib/gpuscale").join(SIMULATOR_FILE));
    // Cargo refreshes only `deps/` when the simulator is built as a dependency,
    // so the newest copy wins.
    candidates
        .into_iter()
        .filter_map(|p| {
            std::fs::metadata(&p)
                .and_then(|m| m.modified())
                .ok()
                .map(|t| (t, p))
        })
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
}
