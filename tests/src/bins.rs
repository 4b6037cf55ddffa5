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

/// Removes from `cmd` the variables cargo sets for a test process
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, `OUT_DIR`, …). A build script
/// that reruns when one of them changes (ring's does) would otherwise be
/// rerun by a cargo started from a test, and again by the next cargo
/// started from a shell: ring, rustls and kube built twice per run, and the
/// binaries rebuilt under the stories that run them.
pub fn without_test_env(cmd: &mut Command) -> &mut Command {
    const SET_FOR_TESTS: [&str; 8] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if SET_FOR_TESTS.contains(&name.as_ref())
            || name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_EXE_")
        {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

/// Runs `cargo build ARGS` in the profile the tests were built in.
fn cargo_build(args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    without_test_env(&mut cmd).arg("build").args(args);
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

/// The freshly built `gpuscale-replay` binary.
pub fn replay() -> PathBuf {
    ensure_built();
    target_dir().join("gpuscale-replay")
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
