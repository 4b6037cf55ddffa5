//! Kubernetes label selectors, parsed with the full syntax: the metric
//! selector of the external and custom metrics APIs (keys are Prometheus
//! labels) and the pod selector an HPA sends (Kubernetes keys). The PromQL
//! translation lives with the provider, in `prometheus::matchers`.

use crate::limits::{MAX_REQUIREMENTS, MAX_SELECTOR_BYTES, MAX_SET_VALUES, excerpt};

/// Why a selector (or namespace) was refused. Client input is quoted
/// through [`excerpt`] (bounded), never whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid label selector at byte {pos}: {msg}")]
    Syntax { pos: usize, msg: String },
    #[error("label key {0} is not a valid Prometheus label name (use [a-zA-Z_][a-zA-Z0-9_]*)")]
    NotPromLabel(String),
    #[error("label key {0} is reserved: the namespace comes from the request path")]
    Reserved(String),
    #[error("invalid label value {0}")]
    BadValue(String),
    #[error("invalid namespace {0}")]
    BadNamespace(String),
    #[error("operator {0:?} cannot be translated to PromQL")]
    Unsupported(String),
    #[error("label selector is {0} bytes, over the limit of {MAX_SELECTOR_BYTES}")]
    TooLong(usize),
    #[error(
        "label selector has more than {MAX_SET_VALUES} values in one in/notin set (at byte {0})"
    )]
    TooManyValues(usize),
    #[error("label selector has more than {MAX_REQUIREMENTS} requirements")]
    TooManyRequirements,
    #[error("the query this selector renders is {0} bytes, over the limit of {max}", max = crate::limits::MAX_QUERY_BYTES)]
    QueryTooLong(usize),
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    pub fn key(&self) -> &str {
        match self {
            Self::Equals(k, _)
            | Self::NotEquals(k, _)
            | Self::In(k, _)
            | Self::NotIn(k, _)
            | Self::Exists(k)
            | Self::DoesNotExist(k) => k,
        }
    }

    /// The same requirement on another label (kube-state-metrics spells
    /// `workload` as `owner_name`).
    pub fn with_key(&self, key: &str) -> Self {
        let k = key.to_owned();
        match self {
            Self::Equals(_, v) => Self::Equals(k, v.clone()),
            Self::NotEquals(_, v) => Self::NotEquals(k, v.clone()),
            Self::In(_, vs) => Self::In(k, vs.clone()),
            Self::NotIn(_, vs) => Self::NotIn(k, vs.clone()),
            Self::Exists(_) => Self::Exists(k),
            Self::DoesNotExist(_) => Self::DoesNotExist(k),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Comma,
    Open,
    Close,
    Eq,
    DoubleEq,
    NotEq,
    Bang,
    In,
    NotIn,
    Gt,
    Lt,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn lex(input: &str) -> Result<Vec<(usize, Tok)>, SelectorError> {
    let mut out = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some(&(pos, c)) = chars.peek() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                chars.next();
            }
            ',' => push(&mut out, &mut chars, pos, Tok::Comma),
            '(' => push(&mut out, &mut chars, pos, Tok::Open),
            ')' => push(&mut out, &mut chars, pos, Tok::Close),
            '>' => push(&mut out, &mut chars, pos, Tok::Gt),
            '<' => push(&mut out, &mut chars, pos, Tok::Lt),
            '=' => {
                chars.next();
                if chars.peek().map(|p| p.1) == Some('=') {
                    chars.next();
                    out.push((pos, Tok::DoubleEq));
                } else {
                    out.push((pos, Tok::Eq));
                }
            }
            '!' => {
                chars.next();
                if chars.peek().map(|p| p.1) == Some('=') {
                    chars.next();
                    out.push((pos, Tok::NotEq));
                } else {
                    out.push((pos, Tok::Bang));
                }
            }
            c if is_ident_char(c) => {
                let mut s = String::new();
                while let Some(&(_, c)) = chars.peek() {
                    if !is_ident_char(c) {
                        break;
                    }
                    s.push(c);
                    chars.next();
                }
                let tok = match s.as_str() {
                    "in" => Tok::In,
                    "notin" => Tok::NotIn,
                    _ => Tok::Ident(s),
                };
                out.push((pos, tok));
            }
            other => {
                return Err(SelectorError::Syntax {
                    pos,
                    msg: format!("unexpected character {other:?}"),
                });
            }
        }
    }
    Ok(out)
}

fn push(
    out: &mut Vec<(usize, Tok)>,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    pos: usize,
    tok: Tok,
) {
    chars.next();
    out.push((pos, tok));
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.1)
    }
    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.end, |t| t.0)
    }
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, SelectorError> {
        Err(SelectorError::Syntax {
            pos: self.pos(),
            msg: msg.into(),
        })
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).map(|t| t.1.clone());
        self.at += 1;
        t
    }
    fn ident(&mut self, what: &str) -> Result<String, SelectorError> {
        match self.peek() {
            Some(Tok::Ident(_)) => match self.next() {
                Some(Tok::Ident(s)) => Ok(s),
                _ => self.err(format!("expected {what}")),
            },
            // `in`/`notin` are fine as values.
            Some(Tok::In) => {
                self.at += 1;
                Ok("in".into())
            }
            Some(Tok::NotIn) => {
                self.at += 1;
                Ok("notin".into())
            }
            _ => self.err(format!("expected {what}")),
        }
    }
    /// A value may be empty (`key=`): then the next token is `,` or the end.
    fn value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            None | Some(Tok::Comma) => Ok(String::new()),
            _ => self.ident("a value"),
        }
    }
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        if self.peek() == Some(&Tok::Bang) {
            self.at += 1;
            let key = self.ident("a label key after '!'")?;
            return Ok(Requirement::DoesNotExist(key));
        }
        let key = self.ident("a label key")?;
        match self.peek() {
            None | Some(Tok::Comma) => Ok(Requirement::Exists(key)),
            Some(Tok::Eq) | Some(Tok::DoubleEq) => {
                self.at += 1;
                Ok(Requirement::Equals(key, self.value()?))
            }
            Some(Tok::NotEq) => {
                self.at += 1;
                Ok(Requirement::NotEquals(key, self.value()?))
            }
            Some(Tok::In) | Some(Tok::NotIn) => {
                let negate = self.next() == Some(Tok::NotIn);
                let values = self.set()?;
                Ok(if negate {
                    Requirement::NotIn(key, values)
                } else {
                    Requirement::In(key, values)
                })
            }
            Some(Tok::Gt) | Some(Tok::Lt) => Err(SelectorError::Unsupported(
                if self.peek() == Some(&Tok::Gt) {
                    ">"
                } else {
                    "<"
                }
                .into(),
            )),
            _ => self.err("expected an operator (=, ==, !=, in, notin) or ','"),
        }
    }
    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        if self.next() != Some(Tok::Open) {
            self.at -= 1;
            return self.err("expected '('");
        }
        let mut values = Vec::new();
        loop {
            if values.len() >= MAX_SET_VALUES {
                return Err(SelectorError::TooManyValues(self.pos()));
            }
            match self.peek() {
                // `in ()` is the set holding the empty value, as in Kubernetes.
                Some(Tok::Close) if values.is_empty() => values.push(String::new()),
                Some(Tok::Comma) | Some(Tok::Close) => values.push(String::new()),
                _ => values.push(self.ident("a value")?),
            }
            match self.next() {
                Some(Tok::Comma) => continue,
                Some(Tok::Close) => break,
                _ => {
                    self.at -= 1;
                    return self.err("expected ',' or ')'");
                }
            }
        }
        values.sort();
        values.dedup();
        Ok(values)
    }
}

/// Parse a Kubernetes label selector (the `labelSelector` query parameter)
/// whose keys are Prometheus labels.
pub fn parse(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    parse_with(input, validate_key)
}

/// Parse a selector of Kubernetes object labels (`app.kubernetes.io/name`
/// is fine): the pod selector an HPA sends for `pods/*`.
pub fn parse_kube(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    parse_with(input, validate_kube_key)
}

fn parse_with(
    input: &str,
    validate_key: fn(&str) -> Result<(), SelectorError>,
) -> Result<Vec<Requirement>, SelectorError> {
    if input.len() > MAX_SELECTOR_BYTES {
        return Err(SelectorError::TooLong(input.len()));
    }
    let toks = lex(input)?;
    let mut p = Parser {
        toks,
        at: 0,
        end: input.len(),
    };
    let mut reqs = Vec::new();
    if p.peek().is_none() {
        return Ok(reqs);
    }
    loop {
        if reqs.len() >= MAX_REQUIREMENTS {
            return Err(SelectorError::TooManyRequirements);
        }
        let r = p.requirement()?;
        validate_key(r.key())?;
        match &r {
            Requirement::Equals(_, v) | Requirement::NotEquals(_, v) => validate_value(v)?,
            Requirement::In(_, vs) | Requirement::NotIn(_, vs) => {
                vs.iter().try_for_each(|v| validate_value(v))?
            }
            _ => {}
        }
        reqs.push(r);
        match p.next() {
            None => break,
            Some(Tok::Comma) => continue,
            Some(_) => {
                p.at -= 1;
                return p.err("expected ','");
            }
        }
    }
    reqs.sort_by(|a, b| {
        a.key()
            .cmp(b.key())
            .then_with(|| format!("{a:?}").cmp(&format!("{b:?}")))
    });
    reqs.dedup();
    Ok(reqs)
}

/// Kubernetes label key syntax, and a Prometheus label that is not reserved
/// (the namespace comes from the request path).
pub fn validate_key(key: &str) -> Result<(), SelectorError> {
    validate_kube_key(key)?;
    if !is_prom_label(key) {
        return Err(SelectorError::NotPromLabel(excerpt(key)));
    }
    if key == "namespace" || key.starts_with("__") {
        return Err(SelectorError::Reserved(excerpt(key)));
    }
    Ok(())
}

/// Kubernetes label key syntax: `[prefix/]name`.
fn validate_kube_key(key: &str) -> Result<(), SelectorError> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    if !(name_ok && prefix_ok) {
        return Err(SelectorError::Syntax {
            pos: 0,
            msg: format!("invalid label key {}", excerpt(key)),
        });
    }
    Ok(())
}

/// Kubernetes label value syntax (may be empty).
fn validate_value(v: &str) -> Result<(), SelectorError> {
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
    if ok {
        Ok(())
    } else {
        Err(SelectorError::BadValue(excerpt(v)))
    }
}

/// A Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_prom_label(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A namespace name (DNS-1123 label).
pub fn validate_namespace(ns: &str) -> Result<(), SelectorError> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && ns.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && ns
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(SelectorError::BadNamespace(excerpt(ns)))
    }
}

/// Requirements back in selector text, canonical order (what a cache keys on).
pub fn to_text(reqs: &[Requirement]) -> String {
    let list = |vs: &[String]| vs.join(",");
    reqs.iter()
        .map(|r| match r {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::NotEquals(k, v) => format!("{k}!={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", list(vs)),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", list(vs)),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A `metav1.LabelSelector` object, as the custom metrics API echoes the
/// metric selector.
pub fn to_label_selector(reqs: &[Requirement]) -> serde_json::Value {
    let mut labels = serde_json::Map::new();
    let mut exprs = Vec::new();
    let expr = |k: &str, op: &str, vs: &[String]| {
        let mut e = serde_json::json!({"key": k, "operator": op});
        if !vs.is_empty() {
            e["values"] = serde_json::json!(vs);
        }
        e
    };
    for r in reqs {
        match r {
            Requirement::Equals(k, v) => {
                labels.insert(k.clone(), v.clone().into());
            }
            Requirement::NotEquals(k, v) => exprs.push(expr(k, "NotIn", std::slice::from_ref(v))),
            Requirement::In(k, vs) => exprs.push(expr(k, "In", vs)),
            Requirement::NotIn(k, vs) => exprs.push(expr(k, "NotIn", vs)),
            Requirement::Exists(k) => exprs.push(expr(k, "Exists", &[])),
            Requirement::DoesNotExist(k) => exprs.push(expr(k, "DoesNotExist", &[])),
        }
    }
    let mut out = serde_json::Map::new();
    if !labels.is_empty() {
        out.insert("matchLabels".into(), labels.into());
    }
    if !exprs.is_empty() {
        out.insert("matchExpressions".into(), exprs.into());
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_selectors_take_kubernetes_keys_and_round_trip() {
        let r = parse_kube("app.kubernetes.io/name=chat,tier in (b,a),!legacy").unwrap();
        assert_eq!(
            to_text(&r),
            "app.kubernetes.io/name=chat,!legacy,tier in (a,b)"
        );
        assert_eq!(parse_kube(&to_text(&r)).unwrap(), r);
        assert!(parse_kube("app=x\"").is_err());
        assert!(parse_kube("a>1").is_err());
        let sel = to_label_selector(&parse("model=m,tier notin (x)").unwrap());
        assert_eq!(sel["matchLabels"]["model"], "m");
        assert_eq!(sel["matchExpressions"][0]["operator"], "NotIn");
    }
}
