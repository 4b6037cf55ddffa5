//! The Grafana dashboards in `dashboards/` and their panel queries.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use super::promql::metric_names;
use super::repo_root;

/// A dashboard file.
pub struct Dashboard {
    pub file: String,
    pub json: Value,
}

/// One query of one panel.
#[derive(Debug, Clone)]
pub struct PanelQuery {
    pub dashboard: String,
    pub panel: String,
    pub ref_id: String,
    pub expr: String,
}

impl PanelQuery {
    /// `dashboard / panel / refId`, how the tests name a query.
    pub fn key(&self) -> String {
        format!("{} / {} / {}", self.dashboard, self.panel, self.ref_id)
    }
}

/// A template variable.
#[derive(Debug, Clone)]
pub struct Variable {
    pub dashboard: String,
    pub name: String,
    pub kind: String,
    /// The query of a query variable (`label_values(…)`).
    pub query: Option<String>,
    pub all_value: Option<String>,
}

/// `dashboards/*.json`, sorted.
pub fn load_all() -> Vec<Dashboard> {
    let dir = repo_root().join("dashboards");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no dashboards in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            Dashboard {
                file: p.file_name().expect("name").to_string_lossy().to_string(),
                json,
            }
        })
        .collect()
}

/// The metric names of every dashboard query.
pub fn charted_names() -> BTreeSet<String> {
    load_all()
        .iter()
        .flat_map(Dashboard::queries)
        .flat_map(|q| metric_names(&q.expr))
        .collect()
}

impl Dashboard {
    pub fn title(&self) -> String {
        self.json["title"]
            .as_str()
            .unwrap_or(&self.file)
            .to_string()
    }

    /// Every panel, rows' nested panels included (rows themselves too).
    pub fn panels(&self) -> Vec<&Value> {
        fn walk<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
            if let Some(ps) = v["panels"].as_array() {
                for p in ps {
                    out.push(p);
                    walk(p, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.json, &mut out);
        out
    }

    pub fn queries(&self) -> Vec<PanelQuery> {
        let mut out = Vec::new();
        for p in self.panels() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = t["expr"].as_str() {
                    out.push(PanelQuery {
                        dashboard: self.title(),
                        panel: p["title"].as_str().unwrap_or("?").to_string(),
                        ref_id: t["refId"].as_str().unwrap_or("?").to_string(),
                        expr: expr.to_string(),
                    });
                }
            }
        }
        out
    }

    pub fn variables(&self) -> Vec<Variable> {
        self.json["templating"]["list"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| Variable {
                dashboard: self.title(),
                name: v["name"].as_str().unwrap_or("").to_string(),
                kind: v["type"].as_str().unwrap_or("").to_string(),
                query: v["query"]["query"]
                    .as_str()
                    .or(v["query"].as_str())
                    .map(str::to_string),
                all_value: v["allValue"].as_str().map(str::to_string),
            })
            .collect()
    }
}

/// Values the e2e test gives Grafana's built-in variables.
pub const BUILTINS: &[(&str, &str)] = &[
    ("__rate_interval", "1m"),
    ("__interval_ms", "1000"),
    ("__interval", "1s"),
    ("__range_s", "3600"),
    ("__range_ms", "3600000"),
    ("__range", "1h"),
];

/// Replaces Grafana variables (`$name`, `${name}`, `${name:format}`,
/// `[[name]]`) as the dashboard's "All" selection would: template variables
/// by their `allValue` (`.*`), built-ins by [`BUILTINS`]. Unknown variables
/// panic.
pub fn substitute(expr: &str, vars: &[Variable]) -> String {
    let value = |name: &str| -> String {
        if let Some((_, v)) = BUILTINS.iter().find(|(n, _)| *n == name) {
            return v.to_string();
        }
        let var = vars
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("query uses undefined variable ${name}: {expr}"));
        var.all_value
            .clone()
            .unwrap_or_else(|| panic!("variable ${name} has no allValue (use .*)"))
    };
    let mut out = String::new();
    let mut rest = expr;
    while let Some(pos) = rest.find(['$', '[']) {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(inner) = tail.strip_prefix("${") {
            let end = inner.find('}').expect("closing } of ${var}");
            let name = inner[..end].split(':').next().unwrap_or("");
            out.push_str(&value(name));
            rest = &inner[end + 1..];
        } else if let Some(inner) = tail.strip_prefix("[[") {
            let end = inner.find("]]").expect("closing ]] of [[var]]");
            out.push_str(&value(&inner[..end]));
            rest = &inner[end + 2..];
        } else if let Some(inner) = tail.strip_prefix('$') {
            let len = inner
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(inner.len());
            // longest built-in first: $__interval_ms before $__interval
            let name = &inner[..len];
            out.push_str(&value(name));
            rest = &inner[len..];
        } else {
            out.push('[');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A stat query with ` or vector(0)` reads 0 instead of "No data"; the test
/// strips the suffix so the real part must still return data.
pub fn without_zero_fallback(expr: &str) -> &str {
    expr.trim()
        .strip_suffix("or vector(0)")
        .map(str::trim)
        .unwrap_or(expr.trim())
}

/// `label_values(selector, label)` → (selector, label).
pub fn parse_label_values(q: &str) -> Option<(String, String)> {
    let inner = q.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    let (sel, label) = inner.rsplit_once(',')?;
    Some((sel.trim().to_string(), label.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str) -> Variable {
        Variable {
            dashboard: "d".into(),
            name: name.into(),
            kind: "query".into(),
            query: None,
            all_value: Some(".*".into()),
        }
    }

    #[test]
    fn substitutes_like_all_is_selected() {
        let vars = [var("node"), var("cluster")];
        let e = r#"sum_over_time(x{node=~"$node", cluster=~"${cluster}", a=~"[[node]]"}[$__range:$__interval]) * $__interval_ms + rate(y[$__rate_interval])"#;
        assert_eq!(
            substitute(e, &vars),
            r#"sum_over_time(x{node=~".*", cluster=~".*", a=~".*"}[1h:1s]) * 1000 + rate(y[1m])"#
        );
        assert_eq!(without_zero_fallback("count(x) or vector(0)"), "count(x)");
        assert_eq!(
            parse_label_values(r#"label_values(gpu_info{cluster=~"$cluster"}, node)"#),
            Some((r#"gpu_info{cluster=~"$cluster"}"#.into(), "node".into()))
        );
    }
}
