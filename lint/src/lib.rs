//! The repository's own rules, checked without running a gpuscale binary:
//! every generated file and the generator that writes them all
//! ([`generate`], `cargo run -p gpuscale-lint`), and the static checks of
//! the sources in `tests/` (import direction of every crate, the
//! Dockerfile, the install guide against the chart, the conventions of the
//! alerts, runbooks and dashboards). The end-to-end crate (`tests/`,
//! `gpuscale-e2e`) is about running the binaries.

pub mod generate;

use std::path::{Path, PathBuf};

/// The repository root: the parent of this crate's directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
