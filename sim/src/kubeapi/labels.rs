//! Label selectors as the Kubernetes API evaluates them on `list` and
//! `watch`: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`.

use serde_json::Value;

#[derive(Debug, Clone)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// A parsed selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub struct Selector(Vec<Req>);

fn valid(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// Split on commas outside parentheses.
fn terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set(key: &str, rest: &str) -> Result<(String, Vec<String>), String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a (values) list after {key:?}"))?;
    let vals: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if vals.iter().any(|v| !v.is_empty() && !valid(v)) {
        return Err(format!("invalid value in {inner:?}"));
    }
    Ok((key.to_string(), vals))
}

fn term(t: &str) -> Result<Req, String> {
    let t = t.trim();
    let check = |k: &str, v: &str| {
        if valid(k) && (v.is_empty() || valid(v)) {
            Ok(())
        } else {
            Err(format!("invalid requirement {t:?}"))
        }
    };
    if let Some(k) = t.strip_prefix('!') {
        check(k.trim(), "")?;
        return Ok(Req::Absent(k.trim().into()));
    }
    if let Some((k, v)) = t.split_once("!=") {
        check(k.trim(), v.trim())?;
        return Ok(Req::Ne(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = t.split_once('=') {
        let v = v.strip_prefix('=').unwrap_or(v);
        check(k.trim(), v.trim())?;
        return Ok(Req::Eq(k.trim().into(), v.trim().into()));
    }
    if let Some((k, rest)) = t.split_once(" notin ") {
        let (k, v) = set(k.trim(), rest)?;
        return Ok(Req::NotIn(k, v));
    }
    if let Some((k, rest)) = t.split_once(" in ") {
        let (k, v) = set(k.trim(), rest)?;
        return Ok(Req::In(k, v));
    }
    check(t, "")?;
    Ok(Req::Exists(t.into()))
}

impl Selector {
    /// Parse `labelSelector`; the error is the message a real server gives.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        terms(s)
            .into_iter()
            .map(term)
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
            .map_err(|e| format!("unable to parse requirement: {e}"))
    }

    /// Whether an object's `metadata.labels` match.
    pub fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Req::Exists(k) => get(k).is_some(),
            Req::Absent(k) => get(k).is_none(),
        })
    }
}
