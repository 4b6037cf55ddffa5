//! docs/ and the code must agree: every metric family the code can emit is in
//! docs/metrics.md and vice versa; every flag in `--help` is documented.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

fn rust_sources(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read src dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).expect("read source"));
        }
    }
}

/// Family names in the code: a `"gpu_…"`/`"gpuscale_exporter_…"` literal
/// followed by a help literal (`"name", "Help."`), or a `const` passed to
/// `Family::gauge(`/`Family::counter(`.
fn code_families() -> BTreeSet<String> {
    let mut sources = Vec::new();
    rust_sources(&repo().join("exporter/src"), &mut sources);
    let all = sources.join("\n");
    let mut names = BTreeSet::new();
    for (at, _) in all.match_indices('"') {
        let lit = &all[at + 1..];
        let Some(end) = lit.find('"') else { continue };
        let name = &lit[..end];
        let native = (name.starts_with("gpu_") || name.starts_with("gpuscale_exporter_"))
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let is_metric = native || is_compat(name);
        let followed_by_help = lit[end + 1..]
            .trim_start()
            .strip_prefix(',')
            .is_some_and(|r| r.trim_start().starts_with('"'));
        if is_metric && followed_by_help {
            names.insert(name.to_string());
        }
    }
    for marker in ["Family::gauge(", "Family::counter("] {
        for (at, _) in all.match_indices(marker) {
            let ident: String = all[at + marker.len()..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let last = ident.rsplit("::").next().unwrap_or("");
            if last.is_empty() || !last.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                continue;
            }
            let decl = format!("const {last}: &str = \"");
            let start = all
                .find(&decl)
                .unwrap_or_else(|| panic!("cannot resolve family name constant {ident}"));
            let value = &all[start + decl.len()..];
            names.insert(value[..value.find('"').expect("closing quote")].to_string());
        }
    }
    names
}

/// A dcgm-exporter family name (`--compat dcgm`).
fn is_compat(name: &str) -> bool {
    name.starts_with("DCGM_FI_")
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The compat families of `metrics/dcgm.rs` and their type: the `gauge(` or
/// `counter(` call each name literal is the first argument of.
fn code_compat_kinds() -> BTreeMap<String, String> {
    let src = std::fs::read_to_string(repo().join("exporter/src/metrics/dcgm.rs"))
        .expect("exporter/src/metrics/dcgm.rs");
    let mut kinds = BTreeMap::new();
    for kind in ["gauge", "counter"] {
        let call = format!("{kind}(");
        for (at, _) in src.match_indices(&call) {
            let rest = src[at + call.len()..].trim_start();
            let Some(lit) = rest.strip_prefix('"') else {
                continue;
            };
            let name = &lit[..lit.find('"').expect("closing quote")];
            if is_compat(name) {
                kinds.insert(name.to_string(), kind.to_string());
            }
        }
    }
    kinds
}

/// First-column backticked names in the tables of docs/metrics.md.
fn documented_families() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("docs/metrics.md")).expect("docs/metrics.md");
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn docs_metrics_md_lists_exactly_the_families_the_code_emits() {
    let code = code_families();
    let docs = documented_families();
    assert!(
        code.len() > 40,
        "found only {} families in the code",
        code.len()
    );
    let undocumented: Vec<_> = code.difference(&docs).collect();
    let stale: Vec<_> = docs.difference(&code).collect();
    assert!(
        undocumented.is_empty(),
        "families missing from docs/metrics.md: {undocumented:?}"
    );
    assert!(
        stale.is_empty(),
        "docs/metrics.md lists families the code never emits: {stale:?}"
    );
}

/// The compat table: every row's type is the code's, and every native family
/// it names as a source is a documented one.
#[test]
fn docs_compat_table_types_and_native_sources_match_the_code() {
    let text = std::fs::read_to_string(repo().join("docs/metrics.md")).expect("docs/metrics.md");
    let documented = documented_families();
    let kinds = code_compat_kinds();
    assert!(
        kinds.len() >= 26,
        "found only {} compat families",
        kinds.len()
    );
    let mut seen = BTreeSet::new();
    for line in text.lines().filter(|l| l.starts_with("| `DCGM_FI_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`');
        assert_eq!(
            kinds.get(name).map(String::as_str),
            Some(cells[2]),
            "type of {name} in docs/metrics.md"
        );
        let sources: Vec<&str> = cells[4]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|s| s.split('{').next().unwrap_or(s))
            .filter(|s| s.starts_with("gpu_"))
            .collect();
        assert!(!sources.is_empty(), "{name} names no native source");
        for s in sources {
            assert!(
                documented.contains(s),
                "{name}: source {s} is no documented family"
            );
        }
        seen.insert(name.to_string());
    }
    let missing: Vec<_> = kinds.keys().filter(|k| !seen.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "compat families missing from the table: {missing:?}"
    );
}

fn flags_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("--") {
        let prev = text[..at].chars().last();
        if prev.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if !name.is_empty() {
            out.insert(format!("--{name}"));
        }
    }
    out
}

#[test]
fn every_flag_in_help_is_documented_and_every_documented_flag_exists() {
    let help = Command::new(env!("CARGO_BIN_EXE_gpuscale-exporter"))
        .arg("--help")
        .output()
        .expect("run --help");
    let help_flags = flags_in(&String::from_utf8_lossy(&help.stdout));
    let mut doc_flags = BTreeSet::new();
    for doc in ["docs/exporter.md", "docs/pods.md"] {
        let Ok(text) = std::fs::read_to_string(repo().join(doc)) else {
            continue;
        };
        // Only the flag tables count: rows whose first cell is a flag.
        for line in text.lines().filter(|l| l.starts_with("| `--")) {
            doc_flags.extend(flags_in(line.split('|').nth(1).unwrap_or("")));
        }
    }
    let undocumented: Vec<_> = help_flags.difference(&doc_flags).collect();
    let stale: Vec<_> = doc_flags.difference(&help_flags).collect();
    assert!(
        undocumented.is_empty(),
        "flags missing from the docs flag tables: {undocumented:?}"
    );
    assert!(
        stale.is_empty(),
        "documented flags that --help does not know: {stale:?}"
    );
}
