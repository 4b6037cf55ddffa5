//! A parsed label selector as escaped PromQL label matchers. The request's
//! namespace is always the first matcher; anything that cannot be translated
//! safely is an error (HTTP 400).

use std::fmt::Write as _;

use crate::selector::{Requirement, SelectorError, parse, validate_key, validate_namespace};

/// Escape a string for a double-quoted PromQL string literal.
pub fn escape_promql(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

/// Escape regex metacharacters (RE2 syntax) so a value matches literally.
fn escape_regex(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Translate a parsed selector into PromQL matchers, the namespace first:
/// `namespace="ns",app="chat",tier=~"a|b"`.
pub fn to_matchers(namespace: &str, reqs: &[Requirement]) -> Result<String, SelectorError> {
    validate_namespace(namespace)?;
    let mut out = format!("namespace=\"{}\"", escape_promql(namespace));
    for r in reqs {
        validate_key(r.key())?;
        let alt = |vs: &[String]| {
            escape_promql(
                &vs.iter()
                    .map(|v| escape_regex(v))
                    .collect::<Vec<_>>()
                    .join("|"),
            )
        };
        // Writing to a String cannot fail.
        let _ = match r {
            Requirement::Equals(k, v) => write!(out, ",{k}=\"{}\"", escape_promql(v)),
            Requirement::NotEquals(k, v) => write!(out, ",{k}!=\"{}\"", escape_promql(v)),
            Requirement::In(k, vs) => write!(out, ",{k}=~\"{}\"", alt(vs)),
            Requirement::NotIn(k, vs) => write!(out, ",{k}!~\"{}\"", alt(vs)),
            Requirement::Exists(k) => write!(out, ",{k}!=\"\""),
            Requirement::DoesNotExist(k) => write!(out, ",{k}=\"\""),
        };
    }
    Ok(out)
}

/// `label=~"a|b"` (or `label="a"`) matching exactly these names.
pub fn names_matcher(label: &str, names: &[String]) -> String {
    match names {
        [one] => format!("{label}=\"{}\"", escape_promql(one)),
        _ => {
            let alt: Vec<String> = names.iter().map(|n| escape_regex(n)).collect();
            format!("{label}=~\"{}\"", escape_promql(&alt.join("|")))
        }
    }
}

/// Parse and translate in one step.
pub fn translate(namespace: &str, selector: &str) -> Result<String, SelectorError> {
    to_matchers(namespace, &parse(selector)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operator_translates() {
        let m = translate(
            "inference",
            "app=chat,tier==web,env!=dev,zone in (a, b.c),gpu notin (h100),canary,!legacy",
        )
        .unwrap();
        assert_eq!(
            m,
            r#"namespace="inference",app="chat",canary!="",env!="dev",gpu!~"h100",legacy="",tier="web",zone=~"a|b\\.c""#
        );
    }

    #[test]
    fn names_match_literally() {
        assert_eq!(
            names_matcher("pod", &["a.b".into(), "c".into()]),
            r#"pod=~"a\\.b|c""#
        );
        assert_eq!(names_matcher("pod", &["a\"".into()]), r#"pod="a\"""#);
    }

    #[test]
    fn empty_selector_is_namespace_only() {
        assert_eq!(translate("x", "").unwrap(), r#"namespace="x""#);
        assert_eq!(translate("x", "  ").unwrap(), r#"namespace="x""#);
    }

    #[test]
    fn refusals() {
        for bad in [
            "app=\"x\"",
            "app=x\"}",
            "namespace=other",
            "__name__=up",
            "app.kubernetes.io/name=x",
            "a>1",
            "a in (",
            "a in (x",
            "a=b c",
            "=x",
            "a=b,",
            "a=b)or(vector(1)",
        ] {
            assert!(translate("ns", bad).is_err(), "{bad} should be refused");
        }
        assert!(translate("Other", "").is_err());
        assert!(translate("a\"b", "").is_err());
    }
}
