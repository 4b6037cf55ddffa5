//! Shared helpers: find the built simulator library and run a test against a
//! scenario with the real nvml-wrapper.
//!
//! The library keeps global state per process, and reads
//! `GPUSCALE_SIM_SCENARIO` / `GPUSCALE_SIM_EPOCH` when the init count goes
//! from 0 to 1. Tests in one binary run on parallel threads, so every test
//! holds `LOCK` while it sets the environment and uses NVML, and drops all
//! `Nvml` instances before releasing it.
#![allow(dead_code, clippy::unwrap_used)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use nvml_wrapper::Nvml;

static LOCK: Mutex<()> = Mutex::new(());

/// Path of `libgpuscale_nvml_sim.so` built next to this test executable
/// (target/<profile>/ or target/<profile>/deps/), or `GPUSCALE_SIM_LIB`.
pub fn lib_path() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUSCALE_SIM_LIB") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    let name = format!(
        "{}gpuscale_nvml_sim{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    for dir in exe.ancestors().skip(1).take(3) {
        let p = dir.join(&name);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{name} not found next to {}; build it with `cargo build -p gpuscale-nvml-sim`",
        exe.display()
    );
}

/// Holds the global test lock and a temporary scenario file.
pub struct Session {
    _guard: MutexGuard<'static, ()>,
    pub dir: tempfile::TempDir,
}

impl Session {
    /// Take the lock and point the simulator at `yaml` (None = built-in
    /// default). `epoch_offset_s`: the epoch is that many seconds before now.
    pub fn new(yaml: Option<&str>, epoch_offset_s: Option<f64>) -> Session {
        let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scenario.yaml");
        // SAFETY: every test that touches the environment holds LOCK.
        unsafe {
            match yaml {
                Some(y) => {
                    std::fs::write(&path, y).unwrap();
                    std::env::set_var("GPUSCALE_SIM_SCENARIO", &path);
                }
                None => std::env::remove_var("GPUSCALE_SIM_SCENARIO"),
            }
            match epoch_offset_s {
                Some(off) => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_secs_f64();
                    std::env::set_var("GPUSCALE_SIM_EPOCH", format!("{}", now - off));
                }
                None => std::env::remove_var("GPUSCALE_SIM_EPOCH"),
            }
        }
        Session { _guard: guard, dir }
    }

    pub fn nvml(&self) -> Nvml {
        Nvml::builder()
            .lib_path(&OsString::from(lib_path()))
            .init()
            .unwrap()
    }
}
