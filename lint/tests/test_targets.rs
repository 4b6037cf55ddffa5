//! `cargo test` skips nothing silently. Each crate builds one integration
//! binary (`autotests = false`, `tests/main.rs`), so a story file that
//! `tests/main.rs` does not name would never compile or run; and a target
//! marked `test = false` (a `main.rs` with no tests, a library with none)
//! must stay without tests, or they would be dropped unseen.

use std::path::{Path, PathBuf};

use gpuscale_lint::repo_root;

use crate::imports::rs_files;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace's member directories, from the root manifest.
fn members() -> Vec<PathBuf> {
    let manifest = read(&repo_root().join("Cargo.toml"));
    let line = manifest
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("members in the workspace manifest");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(|m| repo_root().join(m))
        .collect()
}

/// The manifest's tables as (header, body lines), in order.
fn tables(manifest: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            out.push((line.to_string(), Vec::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push(line.to_string());
        }
    }
    out
}

fn value<'a>(body: &'a [String], key: &str) -> Option<&'a str> {
    body.iter().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

fn has_tests(source: &str) -> bool {
    source.contains("#[test]") || source.contains("#[cfg(test)]")
}

#[test]
fn every_story_file_is_a_module_of_its_crates_one_test_binary() {
    for crate_dir in members() {
        let manifest = read(&crate_dir.join("Cargo.toml"));
        if !manifest.contains("autotests = false") {
            continue;
        }
        let main = read(&crate_dir.join("tests/main.rs"));
        let Ok(entries) = std::fs::read_dir(crate_dir.join("tests")) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let is_story = path.extension().is_some_and(|e| e == "rs") && stem != "main";
            let declared = main.lines().any(|l| {
                let l = l.trim();
                l == format!("mod {stem};") || (l.starts_with("#[path") && l.contains(stem))
            });
            assert!(
                !is_story || declared,
                "{} is not a module of tests/main.rs: it would never compile or run",
                path.display()
            );
        }
    }
}

#[test]
fn targets_cargo_test_skips_have_no_tests() {
    for crate_dir in members() {
        let manifest = read(&crate_dir.join("Cargo.toml"));
        let tables = tables(&manifest);
        let bin = |body: &[String]| crate_dir.join(value(body, "path").unwrap_or("src/main.rs"));
        let bins: Vec<PathBuf> = tables
            .iter()
            .filter(|(h, _)| h == "[[bin]]")
            .map(|(_, body)| bin(body))
            .collect();
        for (header, body) in &tables {
            if value(body, "test") != Some("false") {
                continue;
            }
            if header == "[[bin]]" {
                let path = bin(body);
                let source = read(&path);
                let modules = source.lines().any(|l| l.trim_start().starts_with("mod "));
                assert!(
                    !has_tests(&source) && !modules,
                    "{}: test = false, but it has tests or modules of its own",
                    path.display()
                );
            }
            if header == "[lib]" {
                let files = rs_files(&crate_dir.join("src"));
                for f in files.iter().filter(|f| !bins.contains(f)) {
                    assert!(
                        !has_tests(&read(f)),
                        "{}: its library has test = false, but this file has tests",
                        f.display()
                    );
                }
            }
        }
    }
}
