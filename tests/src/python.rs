//! The Python environment of the tests (grpcio, prometheus_client's strict
//! OpenMetrics parser, kubernetes-validate, Helm's engine): a venv under
//! `target/pyenv` made by `.ci/run` from `tests/python/requirements.txt`.

use std::path::PathBuf;
use std::process::Command;

use crate::bins::repo_root;

/// The venv's interpreter; panics with the command that makes it when absent,
/// so a missing tool fails the test instead of skipping it.
pub fn python() -> PathBuf {
    let py = repo_root().join("target/pyenv/bin/python3");
    assert!(
        py.exists(),
        "{} is missing: run `bash .ci/run` (or `python3 -m venv target/pyenv && \
         target/pyenv/bin/pip install -r tests/python/requirements.txt`)",
        py.display()
    );
    py
}

/// A command that runs `python3 -c CODE` (or a script) in the venv.
pub fn command() -> Command {
    Command::new(python())
}

/// `kubernetes-validate --strict` for each Kubernetes version the project
/// supports (1.33 and 1.37) over the given manifest files; returns the first
/// failure's output.
pub fn validate_manifests(files: &[PathBuf]) -> Result<(), String> {
    let bin = repo_root().join("target/pyenv/bin/kubernetes-validate");
    python();
    for version in ["1.33.0", "1.37.0"] {
        let out = Command::new(&bin)
            .args(["--strict", "--quiet", "-k", version])
            .args(files)
            .output()
            .map_err(|e| format!("run kubernetes-validate: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "kubernetes-validate {version}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok(())
}
