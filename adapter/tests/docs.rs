//! docs/adapter.md and the code must agree: flags and their defaults, config
//! keys, presets (names, windows, queries) and self-metric families.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use clap::CommandFactory as _;
use gpuscale_adapter::cli::Args;
use gpuscale_adapter::config::{METRIC_KEYS, MetricsConfig, PLACEHOLDERS, TOP_KEYS};
use gpuscale_adapter::exposition::FamilyDoc;
use gpuscale_adapter::presets;
use gpuscale_adapter::selfmetrics::QueryResult;

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/adapter.md");
    std::fs::read_to_string(path).expect("docs/adapter.md")
}

fn section(doc: &str, title: &str) -> String {
    let start = doc
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("section {title} missing"));
    let rest = &doc[start + title.len() + 5..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
}

/// Table rows whose first cell is code: the cells, backticks removed.
fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect()
}

#[test]
fn flags_and_defaults_match_the_cli() {
    let cmd = Args::command();
    let code: BTreeSet<(String, String)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            if long == "help" || long == "version" {
                return None;
            }
            let default = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(",");
            let default = if default == "false" {
                String::new()
            } else {
                default
            };
            Some((format!("--{long}"), default))
        })
        .collect();
    let documented: BTreeSet<(String, String)> = rows(&section(&doc(), "Flags"))
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    assert_eq!(documented, code, "docs/adapter.md ## Flags vs the CLI");
}

#[test]
fn config_keys_match_the_parser() {
    let (placeholders, keys): (BTreeSet<String>, BTreeSet<String>) =
        rows(&section(&doc(), "Metrics config"))
            .into_iter()
            .map(|r| r[0].clone())
            .partition(|k| k.starts_with("${"));
    let code: BTreeSet<String> = PLACEHOLDERS.iter().map(|p| format!("${{{p}}}")).collect();
    assert_eq!(placeholders, code, "template placeholders");
    let documented = keys;
    let code: BTreeSet<String> = TOP_KEYS
        .iter()
        .chain(METRIC_KEYS)
        .map(|s| s.to_string())
        .collect();
    assert_eq!(documented, code);
}

#[test]
fn presets_match_names_windows_and_queries() {
    let text = section(&doc(), "Presets");
    let table = rows(&text);
    let names: Vec<&str> = table.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, presets::NAMES);
    let config = MetricsConfig::presets();
    for r in &table {
        let def = config.get(&r[0]).unwrap();
        assert_eq!(
            r[1],
            format!("{}s", def.window.as_secs()),
            "window of {}",
            r[0]
        );
        let line = format!("- `{}`: `{}`", def.name, def.query);
        assert!(
            text.contains(&line),
            "docs/adapter.md lacks the query of {}:\n{line}",
            def.name
        );
        for (kind, q) in &def.objects {
            let line = format!("- `{}` per {}: `{q}`", def.name, kind.label());
            assert!(
                text.contains(&line),
                "docs/adapter.md lacks the per-{} query of {}:\n{line}",
                kind.label(),
                def.name
            );
        }
    }
}

#[test]
fn keda_scaler_metadata_keys_match_the_parser() {
    let text = section(&doc(), "KEDA external scaler");
    let documented: Vec<String> = rows(&text)
        .into_iter()
        .map(|r| r[0].clone())
        // The RPC table's rows start with an upper-case method name.
        .filter(|k| k.starts_with(|c: char| c.is_ascii_lowercase()))
        .collect();
    assert_eq!(documented, gpuscale_adapter::keda::trigger::KEYS);
    for k in gpuscale_adapter::keda::trigger::KEDA_KEYS {
        assert!(
            text.contains(&format!("`{k}`")),
            "KEDA's key {k} not mentioned"
        );
    }
}

/// The served families whose names `keep` accepts, as documentation rows
/// (name, type, labels), sorted by name.
fn served(keep: impl Fn(&str) -> bool) -> BTreeSet<(String, String, String)> {
    gpuscale_adapter::selfmetrics::describe()
        .into_iter()
        .filter(|f| keep(&f.name))
        .map(
            |FamilyDoc {
                 name, kind, labels, ..
             }| (name, kind, labels.join(",")),
        )
        .collect()
}

/// The families of an exposition, by their `# TYPE` lines.
fn typed(text: &str) -> BTreeSet<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect()
}

/// Documented rows as (name, type, labels).
fn documented(rows: Vec<Vec<String>>) -> BTreeSet<(String, String, String)> {
    rows.into_iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].replace(['`', ' '], "")))
        .collect()
}

#[test]
fn self_metrics_match_the_families() {
    let documented = documented(rows(&section(&doc(), "Self-metrics")));
    let code = served(|n| !n.starts_with("gpuscale_scale_to_zero_"));
    assert_eq!(documented, code);
}

#[test]
fn scale_to_zero_families_match_the_guide() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scale-to-zero.md");
    let guide = std::fs::read_to_string(path).expect("docs/scale-to-zero.md");
    let rows = rows(&guide)
        .into_iter()
        .filter(|r| r[0].starts_with("gpuscale_scale_to_zero_"));
    let code = served(|n| n.starts_with("gpuscale_scale_to_zero_"));
    assert_eq!(
        documented(rows.collect()),
        code,
        "docs/scale-to-zero.md self-metrics table"
    );
    let text = gpuscale_adapter::scale_to_zero::report::Report::described().render();
    let typed = typed(&text);
    let names: BTreeSet<&str> = code.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(typed, names, "rendered families");
}

#[test]
fn the_rendered_metrics_are_the_documented_families() {
    let m = gpuscale_adapter::selfmetrics::SelfMetrics::default();
    let text = m.render(&Default::default());
    let typed = typed(&text);
    let documented: BTreeSet<String> = rows(&section(&doc(), "Self-metrics"))
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    for name in typed {
        assert!(documented.contains(name), "{name} is not documented");
    }
}

#[test]
fn the_join_table_names_each_presets_server_series() {
    let text = section(&doc(), "Joining on pod metadata");
    let table: Vec<Vec<String>> = rows(&text)
        .into_iter()
        .filter(|r| presets::NAMES.contains(&r[0].as_str()))
        .collect();
    let names: Vec<&str> = table.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, presets::NAMES);
    let config = MetricsConfig::presets();
    for r in &table {
        let series = gpuscale_adapter::check::server_series(&config.get(&r[0]).unwrap().query);
        if series.is_empty() {
            continue;
        }
        let documented: Vec<String> = r[1]
            .split(", ")
            .map(|c| c.trim_matches('`').to_string())
            .collect();
        assert_eq!(documented, series, "server series of {}", r[0]);
    }
}

#[test]
fn query_results_are_the_documented_label_values() {
    let rows = rows(&section(&doc(), "Self-metrics"));
    let row = rows
        .iter()
        .find(|r| r[0] == "gpuscale_adapter_prometheus_queries_total")
        .expect("the queries family is documented");
    let values = row[3]
        .split("`result` is")
        .nth(1)
        .expect("the result values");
    let documented: Vec<&str> = values.split('`').skip(1).step_by(2).collect();
    let mut code: Vec<&str> = QueryResult::ALL.iter().map(|r| r.label()).collect();
    let mut sorted = documented.clone();
    sorted.sort_unstable();
    code.sort_unstable();
    assert_eq!(sorted, code, "{}", row[3]);
}
