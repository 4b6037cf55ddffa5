//! docs/architecture.md follows the code: every repository path it names
//! exists, and every module of the adapter's crates is named in it (by its
//! file name, as the crate map lists them).

use std::collections::BTreeSet;

use gpuscale_lint::repo_root;

use crate::imports::rs_files;

fn doc() -> String {
    std::fs::read_to_string(repo_root().join("docs/architecture.md")).expect("docs/architecture.md")
}

/// Every `code span` of the text.
fn spans(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Top-level directories of the repository.
fn top_dirs() -> BTreeSet<String> {
    std::fs::read_dir(repo_root())
        .expect("repo root")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect()
}

#[test]
fn every_path_the_architecture_names_exists() {
    let tops = top_dirs();
    let mut stale = Vec::new();
    for span in spans(&doc()) {
        let path = span.trim_end_matches('/');
        let top = path.split('/').next().unwrap_or("");
        let plain = path
            .chars()
            .all(|c| c.is_alphanumeric() || "/._-".contains(c));
        if !path.contains('/') || !tops.contains(top) || !plain || path.contains("..") {
            continue;
        }
        if !repo_root().join(path).exists() {
            stale.push(span);
        }
    }
    assert!(
        stale.is_empty(),
        "docs/architecture.md names paths that do not exist: {stale:?}"
    );
}

#[test]
fn every_module_of_the_adapter_is_in_the_architecture() {
    let doc = doc();
    let named: BTreeSet<String> = spans(&doc).into_iter().collect();
    let mut missing = Vec::new();
    for krate in [
        "adapter",
        "adapter/signals",
        "adapter/decide",
        "adapter/keda",
        "adapter/scale-to-zero",
    ] {
        for file in rs_files(&repo_root().join(krate).join("src")) {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let stem = name.trim_end_matches(".rs");
            if matches!(name, "lib.rs" | "mod.rs" | "tests.rs" | "main.rs") {
                continue;
            }
            let dir = file
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|d| d.to_str());
            let listed = named.contains(name)
                || named.contains(stem)
                || named.contains(&format!("{stem}/"))
                || dir.is_some_and(|d| {
                    named.contains(&format!("{d}/{stem}"))
                        || named.contains(&format!("{d}/{stem}/"))
                        || named.contains(&format!("{d}/{name}"))
                });
            if !listed {
                missing.push(
                    file.strip_prefix(repo_root())
                        .unwrap_or(&file)
                        .display()
                        .to_string(),
                );
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules docs/architecture.md does not name: {missing:?}"
    );
}
