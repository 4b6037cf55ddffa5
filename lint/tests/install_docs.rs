//! docs/install.md and the Helm chart agree: the guide's commands name
//! files, kustomizations, chart values and script flags that exist, and
//! every chart value is in its "Helm values" table.

use gpuscale_lint::repo_root;
use serde_json::Value;

/// The commands of docs/install.md name files, kustomizations, chart values
/// and script flags that exist.
#[test]
fn the_install_guide_names_what_exists() {
    let doc = std::fs::read_to_string(repo_root().join("docs/install.md")).expect("install.md");
    let shell: Vec<&str> = doc
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(shell.len() >= 8, "{} shell blocks", shell.len());
    let values: Value = yaml_serde::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/helm/gpuscale/values.yaml"))
            .expect("values.yaml"),
    )
    .expect("values YAML");
    let script =
        std::fs::read_to_string(repo_root().join("deploy/overlays/provided-tls/make-tls.sh"))
            .expect("make-tls.sh");
    let mut checked = 0;
    for block in &shell {
        let words: Vec<&str> = block.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            if w.starts_with("deploy/") || w.starts_with("docs/") {
                let path = w.trim_end_matches([',', ')', ';']);
                assert!(repo_root().join(path).exists(), "{path} in:\n{block}");
                checked += 1;
            }
            if *w == "-k" {
                let dir = words[i + 1];
                assert!(
                    repo_root().join(dir).join("kustomization.yaml").exists(),
                    "{dir} is no kustomization"
                );
            }
            if words.first() == Some(&"deploy/overlays/provided-tls/make-tls.sh")
                && w.starts_with("--")
            {
                assert!(script.contains(&format!("{w})")), "make-tls.sh has no {w}");
            }
        }
    }
    // Every --set in the guide (commands and tables) names a chart value.
    for chunk in doc.split("--set").skip(1) {
        let chunk = chunk
            .trim_start_matches("-string")
            .trim_start_matches("-file");
        let key = chunk.trim_start().split('=').next().expect("key");
        if !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue; // "`--set`" as a table heading
        }
        let mut node = &values;
        for part in key.split('.') {
            let part = part.split('[').next().expect("name");
            if node.is_object() && node.as_object().is_some_and(|m| m.is_empty()) {
                break; // a free-form map such as nodeSelector
            }
            node = node
                .get(part)
                .unwrap_or_else(|| panic!("--set {key}: no value {part} in values.yaml"));
        }
        checked += 1;
    }
    assert!(checked > 20, "{checked} names checked");
}

/// Every chart value is in the "Helm values" table of docs/install.md.
#[test]
fn every_chart_value_is_documented() {
    let doc = std::fs::read_to_string(repo_root().join("docs/install.md")).expect("install.md");
    let table: Vec<&str> = doc
        .split("## Helm values")
        .nth(1)
        .expect("a Helm values section")
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .collect();
    // `a.b.c`, or a row naming `a.b.…` and `.c`.
    let documented = |path: &str| {
        let (parent, last) = path.rsplit_once('.').unwrap_or(("", path));
        table.iter().any(|row| {
            let first = row.split(" | ").next().unwrap_or("");
            first.contains(&format!("`{path}`"))
                || (!parent.is_empty()
                    && first.contains(&format!("`{parent}."))
                    && first.contains(&format!("`.{last}`")))
        })
    };
    fn walk(v: &Value, path: &str, documented: &dyn Fn(&str) -> bool, missing: &mut Vec<String>) {
        if !path.is_empty() && documented(path) {
            return;
        }
        match v.as_object() {
            Some(map) if !map.is_empty() => {
                for (k, child) in map {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(child, &p, documented, missing);
                }
            }
            _ => missing.push(path.to_string()),
        }
    }
    let values: Value = yaml_serde::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/helm/gpuscale/values.yaml"))
            .expect("values.yaml"),
    )
    .expect("values YAML");
    let mut missing = Vec::new();
    walk(&values, "", &documented, &mut missing);
    assert!(missing.is_empty(), "not in docs/install.md: {missing:?}");
}
