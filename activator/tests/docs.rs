//! docs/activator.md and the code must agree: flags and their defaults,
//! metric families, route keys.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use clap::CommandFactory as _;
use gpuscale_activator::cli::Args;
use gpuscale_activator::config::ROUTE_KEYS;
use gpuscale_activator::metrics::{FAMILIES, Metrics};

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/activator.md");
    std::fs::read_to_string(path).expect("docs/activator.md")
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
    let code: BTreeSet<(String, String)> = Args::command()
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            // The hidden ones are deprecated forms of a subcommand.
            if long == "help" || long == "version" || a.is_hide_set() {
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
    assert_eq!(documented, code, "docs/activator.md ## Flags vs the CLI");
}

#[test]
fn metric_families_match_the_registry() {
    let code: BTreeSet<(String, String, String)> = FAMILIES
        .iter()
        .map(|(n, t, l, _)| (n.to_string(), t.to_string(), l.to_string()))
        .collect();
    let documented: BTreeSet<(String, String, String)> = rows(&section(&doc(), "Metrics"))
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
        .collect();
    assert_eq!(documented, code, "docs/activator.md ## Metrics vs FAMILIES");
    // And the registry serves exactly those (besides process_*).
    let m = Metrics::new().unwrap();
    m.init_route("ns", "r");
    m.held.with_label_values(&["ns", "r"]).observe(1.0);
    m.cold_start.with_label_values(&["ns", "r"]).observe(1.0);
    m.wake_signal.with_label_values(&["ns", "r"]).observe(1.0);
    m.unrouted.with_label_values(&["no_route"]).inc();
    // Sleep routes' and the shared-GPU families, served once they apply.
    m.gpu_room.with_label_values(&["ns", "r", "fits"]).inc();
    m.neighbour_sleeps
        .with_label_values(&["ns", "r", "slept"])
        .inc();
    m.vram_need.with_label_values(&["ns", "r"]).set(1);
    m.sleeping_endpoints.with_label_values(&["ns", "r"]).set(0);
    let text = String::from_utf8(m.render()).unwrap();
    let served: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .filter(|n| !n.starts_with("process_"))
        .map(String::from)
        .collect();
    let named: BTreeSet<String> = FAMILIES.iter().map(|f| f.0.to_string()).collect();
    assert_eq!(served, named, "families the registry serves");
}

#[test]
fn route_keys_match_the_parser() {
    let documented: BTreeSet<String> = rows(&section(&doc(), "Routes"))
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let code: BTreeSet<String> = ROUTE_KEYS.iter().map(|k| k.to_string()).collect();
    assert_eq!(documented, code, "docs/activator.md ## Routes key table");
}
