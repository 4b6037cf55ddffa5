//! Locating (and building, once per test process) the workspace binaries.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// target/debug (or the profile dir the tests were built in).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>
    exe.parent()
        .and_then(|p| p.parent())
        .expect("target dir")
        .to_path_buf()
}

static BUILT: OnceLock<()> = OnceLock::new();

/// Builds the exporter, the simulator and the adapter so tests run the current sources.
pub fn ensure_built() {
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "-p",
            "gpuscale-exporter",
            "-p",
            "gpuscale-nvml-sim",
            "--bins",
            "--lib",
        ]);
        if target_dir().ends_with("release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "cargo build of the binaries failed");
    });
}

pub fn exporter() -> PathBuf {
    ensure_built();
    target_dir().join("gpuscale-exporter")
}

/// The NVML simulator library, freshly built.
pub fn simulator_lib() -> PathBuf {
    ensure_built();
    target_dir().join("libgpuscale_nvml_sim.so")
}

/// The repository root (for docs/, alerts/, dashboards/).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}
