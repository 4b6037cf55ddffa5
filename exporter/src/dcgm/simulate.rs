//! `--simulate` with GPUs without GPM: a simulated `nv-hostengine` on
//! loopback and the DCGM simulator library, so the real reader (loading,
//! connecting, watching, reading) runs against the scenario.

use std::path::{Path, PathBuf};

use gpuscale_dcgm_sim::LIBRARY_FILE;
use gpuscale_dcgm_sim::hostengine::HostEngine;

use super::{DEFAULT_LIB, Flags, Settings};

/// The DCGM simulator library: `--dcgm-lib` when given, else next to the
/// executable (or its `deps/`), else the container image's lib dir.
fn library(flags: &Flags<'_>) -> Option<PathBuf> {
    if flags.lib != Path::new(DEFAULT_LIB) {
        return Some(flags.lib.to_path_buf());
    }
    let exe = std::env::current_exe().ok();
    let mut candidates = Vec::new();
    if let Some(dir) = exe.as_deref().and_then(Path::parent) {
        candidates.push(dir.join(LIBRARY_FILE));
        candidates.push(dir.join("deps").join(LIBRARY_FILE));
    }
    candidates.push(PathBuf::from("/usr/local/lib/gpuscale").join(LIBRARY_FILE));
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

pub fn start(flags: &Flags<'_>) -> Result<(Settings, HostEngine), String> {
    let lib = library(flags).ok_or_else(|| {
        format!(
            "--simulate: cannot find {LIBRARY_FILE} next to the executable; build it with `cargo build -p gpuscale-dcgm-sim` or pass --dcgm-lib"
        )
    })?;
    let engine = HostEngine::start("127.0.0.1:0")
        .map_err(|e| format!("--simulate: cannot start the simulated DCGM host engine: {e}"))?;
    tracing::info!(hostengine = %engine.addr(), library = %lib.display(),
                   "simulated DCGM host engine for the GPUs without GPM");
    let settings = Settings {
        lib,
        hostengine: engine.addr().to_string(),
        interval: flags.interval,
    };
    Ok((settings, engine))
}
