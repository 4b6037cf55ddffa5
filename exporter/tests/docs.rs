//! docs/ and the code must agree: every metric family the code can emit (its
//! descriptor in the catalog) is in docs/metrics.md with its type, unit and
//! labels, and vice versa; every flag in `--help` is documented.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuscale_exporter::metrics::Kind;
use gpuscale_exporter::{catalog, selfmetrics};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Every family the exporter can serve, from the descriptors the code
/// builds them with (native and `--compat dcgm`) and from its self-metrics
/// registry (`process_*` included).
fn code_families() -> BTreeSet<String> {
    let native = catalog::native().into_iter().map(|d| d.name);
    let compat = catalog::compat().map(|(name, _)| name);
    let own = selfmetrics::describe().into_iter().map(|f| f.name);
    native
        .chain(compat)
        .map(str::to_string)
        .chain(own)
        .collect()
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
    }
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

/// The rows of docs/metrics.md's tables by their first cell.
fn documented_rows() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(repo().join("docs/metrics.md")).expect("docs/metrics.md");
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<String> = l.split('|').map(|c| c.trim().to_string()).collect();
            (cells[1].trim_matches('`').to_string(), cells)
        })
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

/// The native rows give the descriptor's type and unit, and name each of its
/// label keys.
#[test]
fn docs_metrics_md_types_units_and_labels_match_the_descriptors() {
    let rows = documented_rows();
    for d in catalog::native() {
        let row = &rows[d.name];
        assert_eq!(
            row[2],
            kind_name(d.kind),
            "type of {} in docs/metrics.md",
            d.name
        );
        assert_eq!(row[3], d.unit, "unit of {} in docs/metrics.md", d.name);
        let words: BTreeSet<&str> = row[4]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        for key in d.labels {
            assert!(
                words.contains(key),
                "{}: label {key} missing from the labels cell {:?}",
                d.name,
                row[4]
            );
        }
    }
}

/// The compat table: every row's type is the code's, and every native family
/// it names as a source is a documented one.
#[test]
fn docs_compat_table_types_and_native_sources_match_the_code() {
    let text = std::fs::read_to_string(repo().join("docs/metrics.md")).expect("docs/metrics.md");
    let documented = documented_families();
    let kinds: BTreeMap<&str, &str> = catalog::compat()
        .map(|(name, kind)| (name, kind_name(kind)))
        .collect();
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
            kinds.get(name).copied(),
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
    let missing: Vec<_> = kinds.keys().filter(|k| !seen.contains(**k)).collect();
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

/// The self-metric rows (`process_*` included) give the registry's type and
/// exactly the labels it serves.
#[test]
fn docs_self_metric_rows_match_the_registry() {
    let rows = documented_rows();
    let families = selfmetrics::describe();
    assert!(families.len() > 15, "only {} self-metrics", families.len());
    for f in families {
        let row = rows
            .get(&f.name)
            .unwrap_or_else(|| panic!("{} missing from docs/metrics.md", f.name));
        assert_eq!(row[2], kind_name(f.kind), "type of {}", f.name);
        let documented: BTreeSet<&str> = row[4].split(',').map(str::trim).collect();
        let labels: BTreeSet<&str> = f.labels.iter().map(String::as_str).collect();
        assert_eq!(documented, labels, "labels of {}", f.name);
    }
}
