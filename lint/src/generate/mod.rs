//! Every generated file of the repository, written by one command:
//!
//! ```text
//! cargo run -p gpuscale-lint              # regenerate everything
//! cargo run -p gpuscale-lint -- --check   # list what is out of date, exit 1
//! ```
//!
//! First the two source generators run (`alerts/xid/generate.py`: the XID
//! rules, their unit test and runbook table from `alerts/xid/xids.csv`;
//! `dashboards/generate.py`: the dashboards' JSON), then the copies that
//! Helm and kustomize read are built from the sources: Helm reads only files
//! inside the chart, kustomize only files below its directory.

mod copies;
mod rules;
mod scripts;

use std::path::Path;

pub use scripts::SOURCE_GENERATORS;

/// The one command that regenerates every generated file.
pub const COMMAND: &str = "cargo run -p gpuscale-lint";

/// Why the generated files could not be built or compared.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: {message}")]
    Yaml { path: String, message: String },
    #[error("the ScaleToZeroPolicy CRD: {0}")]
    Crd(String),
    #[error("{script}: {message}")]
    Script { script: String, message: String },
}

/// One generated file: its path below the repository root, the text it must
/// hold, and what it is generated from.
pub struct Generated {
    pub path: String,
    pub text: String,
    pub from: &'static str,
}

/// A generated file that differs from what its sources give, or a file in a
/// generated-only folder whose source is gone.
#[derive(Debug, PartialEq, Eq)]
pub enum Stale {
    Differs(String),
    Orphan(String),
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::Differs(p) => write!(f, "out of date: {p}"),
            Stale::Orphan(p) => write!(f, "no source left: {p}"),
        }
    }
}

/// Every copy built from the sources (the source generators' own output
/// not included: [`check`] asks them).
pub fn copies(root: &Path) -> Result<Vec<Generated>, Error> {
    let mut out = rules::manifests(root)?;
    out.extend(copies::chart_and_kustomize(root)?);
    Ok(out)
}

/// What is out of date, without writing: the source generators' complaints
/// (`--check`), then each copy that differs or has no source left.
pub fn check(root: &Path) -> Result<Vec<String>, Error> {
    let mut problems = scripts::check(root)?;
    let wanted = copies(root)?;
    problems.extend(stale(root, &wanted)?.iter().map(ToString::to_string));
    Ok(problems)
}

/// Runs the source generators, then writes every copy that differs and
/// removes the orphans; returns what changed.
pub fn write(root: &Path) -> Result<Vec<Stale>, Error> {
    scripts::write(root)?;
    let wanted = copies(root)?;
    let changed = stale(root, &wanted)?;
    for change in &changed {
        match change {
            Stale::Differs(p) => {
                let text = wanted
                    .iter()
                    .find(|g| &g.path == p)
                    .map_or("", |g| g.text.as_str());
                let path = root.join(p);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| io(p, &e))?;
                }
                std::fs::write(&path, text).map_err(|e| io(p, &e))?;
            }
            Stale::Orphan(p) => std::fs::remove_file(root.join(p)).map_err(|e| io(p, &e))?,
        }
    }
    Ok(changed)
}

/// The copies that differ from `wanted`, and the files of the generated-only
/// folders that `wanted` does not name.
pub fn stale(root: &Path, wanted: &[Generated]) -> Result<Vec<Stale>, Error> {
    let mut out = Vec::new();
    for g in wanted {
        match std::fs::read_to_string(root.join(&g.path)) {
            Ok(have) if have == g.text => {}
            Ok(_) => out.push(Stale::Differs(g.path.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                out.push(Stale::Differs(g.path.clone()));
            }
            Err(e) => return Err(io(&g.path, &e)),
        }
    }
    for dir in copies::GENERATED_ONLY {
        for name in list(root, dir, "")? {
            let path = format!("{dir}/{name}");
            if !wanted.iter().any(|g| g.path == path) {
                out.push(Stale::Orphan(path));
            }
        }
    }
    Ok(out)
}

/// The file names in `dir` (below `root`) ending in `suffix`, sorted; none
/// when the folder does not exist yet.
fn list(root: &Path, dir: &str, suffix: &str) -> Result<Vec<String>, Error> {
    let entries = match std::fs::read_dir(root.join(dir)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(dir, &e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io(dir, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(suffix) && entry.path().is_file() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// A source file's text.
fn read(root: &Path, path: &str) -> Result<String, Error> {
    std::fs::read_to_string(root.join(path)).map_err(|e| io(path, &e))
}

fn io(path: &str, e: &std::io::Error) -> Error {
    Error::Io {
        path: path.to_string(),
        message: e.to_string(),
    }
}
