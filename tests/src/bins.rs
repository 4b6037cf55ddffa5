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

/// Runs `cargo build ARGS` in the profile the tests were built in.
fn cargo_build(args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build").args(args);
    if target_dir().ends_with("release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build");
    assert!(status.success(), "cargo build {args:?} failed");
}

/// Builds every workspace binary and library (the NVML simulator's
/// `cdylib` included) once per test process, so tests run the current
/// sources. One build of the whole workspace resolves the same features
/// as `cargo test --workspace` (see `util/Cargo.toml`), so after the test
/// build this is a no-op instead of a second build of kube and rustls.
pub fn ensure_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| cargo_build(&["--workspace", "--bins", "--lib"]));
}

/// The freshly built `gpuscale-adapter` binary.
pub fn adapter() -> PathBuf {
    ensure_built();
    target_dir().join("gpuscale-adapter")
}

/// The freshly built `gpuscale-activator` binary.
pub fn activator() -> PathBuf {
    ensure_built();
    target_dir().join("gpuscale-activator")
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
