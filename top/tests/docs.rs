//! docs/top.md and the code agree: every flag and every family read.

use clap::CommandFactory;
use gpuscale_top::cli::Cli;
use gpuscale_top::source::{FAMILIES, WORKLOAD_FAMILIES};

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/top.md");
    std::fs::read_to_string(path).expect("docs/top.md")
}

#[test]
fn every_flag_is_documented() {
    let doc = doc();
    for arg in Cli::command().get_arguments() {
        if let Some(long) = arg.get_long() {
            assert!(
                doc.contains(&format!("`--{long}")),
                "docs/top.md lacks --{long}"
            );
        }
    }
}

#[test]
fn every_family_read_is_documented() {
    let doc = doc();
    for f in FAMILIES.iter().chain(WORKLOAD_FAMILIES) {
        assert!(doc.contains(&format!("`{f}`")), "docs/top.md lacks {f}");
    }
}
