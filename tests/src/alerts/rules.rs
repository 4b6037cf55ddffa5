//! The Prometheus rule files in `alerts/` and their test-only copy.
//!
//! The end-to-end test cannot wait an hour for `for: 1h`. It loads a copy of
//! the real rule files, generated here, in which every duration is divided by
//! [`TIME_SCALE`] (1h → 6s) with a floor that keeps rates computable at a 1s
//! scrape interval. Only durations change; expressions, labels and
//! annotations are the shipped ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use yaml_serde::Value;

use super::promql::{format_duration, parse_duration, rewrite_ranges};
use super::repo_root;

/// Where every alert's `runbook_url` points: `docs/runbooks/<alert>.md`.
pub const RUNBOOK_BASE: &str = "https://github.com/gpuscale/gpuscale/blob/main/docs/runbooks/";
/// The `severity` label values an alert may have.
pub const SEVERITIES: &[&str] = &["critical", "warning", "info"];

/// Durations in the test copy are divided by this.
pub const TIME_SCALE: u64 = 600;
/// Smallest range selector in the test copy (4 scrapes at 1s).
pub const MIN_RANGE_MS: u64 = 4_000;
/// Smallest `for:`, subquery step and group interval in the test copy.
pub const MIN_STEP_MS: u64 = 1_000;

/// One rule of a rule file.
#[derive(Debug, Clone)]
pub struct Rule {
    pub file: String,
    pub group: String,
    /// Alert name, or recorded series name.
    pub name: String,
    pub is_alert: bool,
    pub expr: String,
    pub for_: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// `alerts/*.rules.yml`, sorted.
pub fn rule_files() -> Vec<PathBuf> {
    let dir = repo_root().join("alerts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".rules.yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no rule files in {}", dir.display());
    files
}

/// `alerts/tests/*.test.yml` (the promtool unit tests), sorted.
pub fn unit_test_files() -> Vec<PathBuf> {
    let dir = repo_root().join("alerts/tests");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("alerts/tests")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.yml"))
        .collect();
    v.sort();
    v
}

fn load(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(Value::Mapping(m)) = v {
        for (k, v) in m {
            let k = k.as_str().expect("string key").to_string();
            let v = match v {
                Value::String(s) => s.clone(),
                other => yaml_serde::to_string(other)
                    .expect("yaml")
                    .trim()
                    .to_string(),
            };
            out.insert(k, v);
        }
    }
    out
}

/// Every rule of every rule file.
pub fn all_rules() -> Vec<Rule> {
    let mut rules = Vec::new();
    for path in rule_files() {
        let file = path
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .to_string();
        let doc = load(&path);
        for group in doc["groups"].as_sequence().expect("groups") {
            let gname = group["name"].as_str().expect("group name").to_string();
            for r in group["rules"].as_sequence().expect("rules") {
                let (name, is_alert) = match (r.get("alert"), r.get("record")) {
                    (Some(a), _) => (a.as_str().expect("alert name").to_string(), true),
                    (_, Some(rec)) => (rec.as_str().expect("record name").to_string(), false),
                    _ => panic!("{file}: rule without alert or record"),
                };
                rules.push(Rule {
                    file: file.clone(),
                    group: gname.clone(),
                    name,
                    is_alert,
                    expr: r["expr"].as_str().expect("expr").to_string(),
                    for_: r.get("for").and_then(|v| v.as_str()).map(str::to_string),
                    labels: string_map(r.get("labels")),
                    annotations: string_map(r.get("annotations")),
                });
            }
        }
    }
    rules
}

fn scaled(d: &str, floor_ms: u64) -> String {
    let ms = parse_duration(d).unwrap_or_else(|| panic!("not a duration: {d}"));
    format_duration((ms / TIME_SCALE).max(floor_ms))
}

/// The test-only copy of one rule file's text: every `for:`, group
/// `interval:`, range selector and subquery step divided by [`TIME_SCALE`].
pub fn time_scaled(path: &Path) -> String {
    let mut doc = load(path);
    for group in doc["groups"].as_sequence_mut().expect("groups") {
        if let Some(Value::String(iv)) = group.get_mut("interval") {
            *iv = scaled(iv, MIN_STEP_MS);
        }
        for r in group["rules"].as_sequence_mut().expect("rules") {
            let m = r.as_mapping_mut().expect("rule mapping");
            if let Some(Value::String(f)) = m.get_mut("for") {
                *f = scaled(f, MIN_STEP_MS);
            }
            if let Some(Value::String(e)) = m.get_mut("expr") {
                assert!(
                    !e.contains(" offset "),
                    "time scaling does not handle `offset` yet: {e}"
                );
                *e = rewrite_ranges(e, |d, step| {
                    scaled(d, if step { MIN_STEP_MS } else { MIN_RANGE_MS })
                });
            }
        }
    }
    format!(
        "# Test-only copy of alerts/{}: durations divided by {TIME_SCALE}. Generated by tests/src/alerts/rules.rs.\n{}",
        path.file_name().expect("name").to_string_lossy(),
        yaml_serde::to_string(&doc).expect("serialize rules")
    )
}

/// Writes the test copies of all rule files into `dir`; returns their paths.
pub fn write_time_scaled(dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).expect("rules dir");
    rule_files()
        .iter()
        .map(|p| {
            let out = dir.join(p.file_name().expect("name"));
            std::fs::write(&out, time_scaled(p)).expect("write rules copy");
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_keeps_rates_computable() {
        assert_eq!(scaled("1h", MIN_STEP_MS), "6s");
        assert_eq!(scaled("5m", MIN_STEP_MS), "1s");
        assert_eq!(scaled("5m", MIN_RANGE_MS), "4s");
        assert_eq!(scaled("6h", MIN_RANGE_MS), "36s");
    }
}
