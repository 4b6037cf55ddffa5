//! Just enough PromQL for the tests: Prometheus durations, rewriting the
//! durations inside `[…]` range and subquery selectors, and finding the
//! metric names an expression reads.

use std::collections::BTreeSet;

/// A Prometheus duration (`1h30m`, `5m`, `500ms`, `1d`) in milliseconds.
pub fn parse_duration(s: &str) -> Option<u64> {
    let d = gpuscale_util::duration::parse(s).ok()?;
    u64::try_from(d.as_millis()).ok()
}

/// Milliseconds as a Prometheus duration (`90s` → `1m30s`).
pub fn format_duration(ms: u64) -> String {
    gpuscale_util::duration::format(std::time::Duration::from_millis(ms))
}

/// Calls `f` on the duration text of every `[range]` and `[range:step]`
/// selector outside string literals and label matchers, replacing it with
/// what `f` returns (`f(range, is_step)`).
pub fn rewrite_ranges(expr: &str, mut f: impl FnMut(&str, bool) -> String) -> String {
    let mut out = String::with_capacity(expr.len());
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                let end = skip_string(&chars, i);
                out.extend(&chars[i..end]);
                i = end;
            }
            '{' => {
                let end = skip_group(&chars, i, '{', '}');
                out.extend(&chars[i..end]);
                i = end;
            }
            '[' => {
                let end = skip_group(&chars, i, '[', ']');
                let inner: String = chars[i + 1..end - 1].iter().collect();
                out.push('[');
                match inner.split_once(':') {
                    Some((range, step)) => {
                        out.push_str(&f(range.trim(), false));
                        out.push(':');
                        if !step.trim().is_empty() {
                            out.push_str(&f(step.trim(), true));
                        }
                    }
                    None => out.push_str(&f(inner.trim(), false)),
                }
                out.push(']');
                i = end;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Index after the string literal that starts at `i`.
fn skip_string(chars: &[char], i: usize) -> usize {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() {
        if chars[j] == '\\' && quote != '`' {
            j += 2;
            continue;
        }
        if chars[j] == quote {
            return j + 1;
        }
        j += 1;
    }
    chars.len()
}

/// Index after the group that opens at `i` (strings inside are skipped).
fn skip_group(chars: &[char], i: usize, open: char, close: char) -> usize {
    let mut depth = 0;
    let mut j = i;
    while j < chars.len() {
        match chars[j] {
            '"' | '\'' | '`' => {
                j = skip_string(chars, j);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    chars.len()
}

const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN", "start", "end",
];
/// Aggregation operators: `sum by (x) (…)` has no `(` right after the name.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Metric names read by a PromQL expression (Grafana variables such as
/// `$node` or `$__interval_ms` are skipped).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = skip_string(&chars, i);
        } else if c == '{' {
            i = skip_group(&chars, i, '{', '}');
        } else if c == '[' {
            i = skip_group(&chars, i, '[', ']');
        } else if c == '$' {
            // Grafana variable: $name, ${name…}
            i += 1;
            if i < chars.len() && chars[i] == '{' {
                i = skip_group(&chars, i, '{', '}');
            } else {
                while i < chars.len() && is_part(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            // number (1, 0.05, 1e9, 0x1f) or duration (5m): letters included
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                let exp = matches!(chars[i], 'e' | 'E');
                i += 1;
                if exp && i < chars.len() && matches!(chars[i], '+' | '-') {
                    i += 1;
                }
            }
        } else if is_start(c) {
            let start = i;
            while i < chars.len() && is_part(chars[i]) {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let next = chars.get(j).copied();
            if LABEL_LISTS.contains(&ident.as_str()) {
                if next == Some('(') {
                    i = skip_group(&chars, j, '(', ')');
                }
            } else if KEYWORDS.contains(&ident.as_str())
                || AGGREGATIONS.contains(&ident.as_str())
                || next == Some('(')
            {
                // operator keyword, or a function / aggregation name
            } else {
                names.insert(ident);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5m"), Some(300_000));
        assert_eq!(parse_duration("1h30m"), Some(5_400_000));
        assert_eq!(parse_duration("500ms"), Some(500));
        assert_eq!(parse_duration("1d"), Some(86_400_000));
        assert_eq!(parse_duration("$__range"), None);
        assert_eq!(parse_duration("5"), None);
        assert_eq!(format_duration(90_000), "1m30s");
        assert_eq!(format_duration(6_000), "6s");
        assert_eq!(format_duration(1_500), "1s500ms");
    }

    #[test]
    fn rewrites_ranges_not_regexes() {
        let e = r#"rate(x{a=~"[0-9]+"}[5m]) + sum_over_time(y[1h:1m]) + z[10m:]"#;
        let got = rewrite_ranges(e, |d, step| format!("<{d}{}>", if step { "s" } else { "" }));
        assert_eq!(
            got,
            r#"rate(x{a=~"[0-9]+"}[<5m>]) + sum_over_time(y[<1h>:<1ms>]) + z[<10m>:]"#
        );
    }

    #[test]
    fn finds_metric_names() {
        let e = r#"sum by (namespace, pod) (max without (a) (b) + rate(gpu_energy_consumed_joules_total{node=~"$node"}[$__rate_interval]))
            * on (cluster, node, uuid) group_left (model) gpu_info
            / ignoring(x) gpuscale:gpu_allocation:share > 0.5 and bool up offset 5m
            or vector(1e-3) * $__interval_ms / histogram_quantile(0.9, rate(a_bucket[5m]))
            + label_replace(ALERTS, "a", "b-$1", "c", "(.*)")"#;
        let names: Vec<String> = metric_names(e).into_iter().collect();
        assert_eq!(
            names,
            [
                "ALERTS",
                "a_bucket",
                "b",
                "gpu_energy_consumed_joules_total",
                "gpu_info",
                "gpuscale:gpu_allocation:share",
                "up"
            ]
        );
    }
}
