//! Kubernetes label selectors with the full syntax (`k=v`, `k==v`, `k!=v`,
//! `k in (a,b)`, `k notin (a,b)`, `k`, `!k`): one parser for the adapter
//! (metric and pod selectors, bounded because they are client input) and
//! the simulated API server (`labelSelector` on list and watch).

/// Bounds on one selector: a parser of client input refuses past them
/// before it builds anything.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_requirements: usize,
    pub max_set_values: usize,
}

impl Limits {
    /// No bounds beyond memory, as an API server parses its own clients.
    pub const NONE: Self = Self {
        max_bytes: usize::MAX,
        max_requirements: usize::MAX,
        max_set_values: usize::MAX,
    };
}

/// Characters of input quoted in an error message.
pub const EXCERPT_CHARS: usize = 100;

/// `s` quoted for an error message: whole when short, else its first
/// [`EXCERPT_CHARS`] characters and its length.
pub fn excerpt(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &s[..cut], s.len()),
    }
}

/// Why a selector was refused; input is quoted through [`excerpt`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("invalid label selector at byte {pos}: {msg}")]
    Syntax { pos: usize, msg: String },
    #[error("invalid label value {0}")]
    BadValue(String),
    #[error("operator {0:?} cannot be translated to PromQL")]
    Unsupported(String),
    #[error("label selector is {len} bytes, over the limit of {max}")]
    TooLong { len: usize, max: usize },
    #[error("label selector has more than {max} values in one in/notin set (at byte {pos})")]
    TooManyValues { pos: usize, max: usize },
    #[error("label selector has more than {0} requirements")]
    TooManyRequirements(usize),
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

    /// Whether a label with this key's `value` (None: absent) satisfies it.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match self {
            Self::Equals(_, v) => value == Some(v.as_str()),
            Self::NotEquals(_, v) => value != Some(v.as_str()),
            Self::In(_, vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
            Self::NotIn(_, vs) => value.is_none_or(|x| vs.iter().all(|v| v != x)),
            Self::Exists(_) => value.is_some(),
            Self::DoesNotExist(_) => value.is_none(),
        }
    }
}

/// Whether labels (looked up by `get`) satisfy every requirement; an empty
/// selector matches everything.
pub fn matches_all<'a>(reqs: &[Requirement], get: impl Fn(&str) -> Option<&'a str>) -> bool {
    reqs.iter().all(|r| r.matches(get(r.key())))
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

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

/// `first` or, when the next character is `=`, `with_eq` (`==`, `!=`).
fn maybe_eq(chars: &mut Chars<'_>, first: Tok, with_eq: Tok) -> Tok {
    chars.next();
    if chars.peek().map(|p| p.1) == Some('=') {
        chars.next();
        with_eq
    } else {
        first
    }
}

fn word(chars: &mut Chars<'_>) -> Tok {
    let mut s = String::new();
    while let Some(&(_, c)) = chars.peek() {
        if !is_ident_char(c) {
            break;
        }
        s.push(c);
        chars.next();
    }
    match s.as_str() {
        "in" => Tok::In,
        "notin" => Tok::NotIn,
        _ => Tok::Ident(s),
    }
}

fn lex(input: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let mut out = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some(&(pos, c)) = chars.peek() {
        let single = match c {
            ' ' | '\t' | '\n' | '\r' => {
                chars.next();
                continue;
            }
            ',' => Tok::Comma,
            '(' => Tok::Open,
            ')' => Tok::Close,
            '>' => Tok::Gt,
            '<' => Tok::Lt,
            '=' => {
                out.push((pos, maybe_eq(&mut chars, Tok::Eq, Tok::DoubleEq)));
                continue;
            }
            '!' => {
                out.push((pos, maybe_eq(&mut chars, Tok::Bang, Tok::NotEq)));
                continue;
            }
            c if is_ident_char(c) => {
                out.push((pos, word(&mut chars)));
                continue;
            }
            other => {
                return Err(ParseError::Syntax {
                    pos,
                    msg: format!("unexpected character {other:?}"),
                });
            }
        };
        chars.next();
        out.push((pos, single));
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    end: usize,
    max_set_values: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.1)
    }
    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.end, |t| t.0)
    }
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError::Syntax {
            pos: self.pos(),
            msg: msg.into(),
        })
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).map(|t| t.1.clone());
        self.at += 1;
        t
    }
    fn ident(&mut self, what: &str) -> Result<String, ParseError> {
        let word = match self.peek() {
            Some(Tok::Ident(s)) => s.clone(),
            // `in`/`notin` are fine as values.
            Some(Tok::In) => "in".into(),
            Some(Tok::NotIn) => "notin".into(),
            _ => return self.err(format!("expected {what}")),
        };
        self.at += 1;
        Ok(word)
    }
    /// A value may be empty (`key=`): then the next token is `,` or the end.
    fn value(&mut self) -> Result<String, ParseError> {
        match self.peek() {
            None | Some(Tok::Comma) => Ok(String::new()),
            _ => self.ident("a value"),
        }
    }
    fn requirement(&mut self) -> Result<Requirement, ParseError> {
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
            Some(Tok::Gt) => Err(ParseError::Unsupported(">".into())),
            Some(Tok::Lt) => Err(ParseError::Unsupported("<".into())),
            _ => self.err("expected an operator (=, ==, !=, in, notin) or ','"),
        }
    }
    fn set(&mut self) -> Result<Vec<String>, ParseError> {
        if self.next() != Some(Tok::Open) {
            self.at -= 1;
            return self.err("expected '('");
        }
        let mut values = Vec::new();
        loop {
            if values.len() >= self.max_set_values {
                return Err(ParseError::TooManyValues {
                    pos: self.pos(),
                    max: self.max_set_values,
                });
            }
            match self.peek() {
                // `in ()` is the set holding the empty value, as in Kubernetes.
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

/// Parse `input` within `limits`; `validate_key` judges each key (the
/// Kubernetes key syntax is [`validate_kube_key`]), values are checked
/// against the Kubernetes label value syntax. Requirements come back in a
/// canonical order, duplicates removed (what a cache keys on).
pub fn parse<E: From<ParseError>>(
    input: &str,
    limits: Limits,
    validate_key: impl Fn(&str) -> Result<(), E>,
) -> Result<Vec<Requirement>, E> {
    if input.len() > limits.max_bytes {
        return Err(ParseError::TooLong {
            len: input.len(),
            max: limits.max_bytes,
        }
        .into());
    }
    let mut p = Parser {
        toks: lex(input)?,
        at: 0,
        end: input.len(),
        max_set_values: limits.max_set_values,
    };
    let mut reqs = Vec::new();
    if p.peek().is_none() {
        return Ok(reqs);
    }
    loop {
        if reqs.len() >= limits.max_requirements {
            return Err(ParseError::TooManyRequirements(limits.max_requirements).into());
        }
        let r = p.requirement()?;
        validate_key(r.key())?;
        validate_values(&r)?;
        reqs.push(r);
        match p.next() {
            None => break,
            Some(Tok::Comma) => continue,
            Some(_) => {
                p.at -= 1;
                let (pos, msg) = (p.pos(), "expected ','".to_string());
                return Err(ParseError::Syntax { pos, msg }.into());
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

fn validate_values(r: &Requirement) -> Result<(), ParseError> {
    match r {
        Requirement::Equals(_, v) | Requirement::NotEquals(_, v) => validate_value(v),
        Requirement::In(_, vs) | Requirement::NotIn(_, vs) => {
            vs.iter().try_for_each(|v| validate_value(v))
        }
        _ => Ok(()),
    }
}

/// Kubernetes label key syntax: `[prefix/]name`.
pub fn validate_kube_key(key: &str) -> Result<(), ParseError> {
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
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(ParseError::Syntax {
            pos: 0,
            msg: format!("invalid label key {}", excerpt(key)),
        })
    }
}

/// Kubernetes label value syntax (may be empty).
fn validate_value(v: &str) -> Result<(), ParseError> {
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
    if ok {
        Ok(())
    } else {
        Err(ParseError::BadValue(excerpt(v)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kube(s: &str) -> Result<Vec<Requirement>, ParseError> {
        parse(s, Limits::NONE, validate_kube_key)
    }

    #[test]
    fn every_operator_parses_matches_and_round_trips() {
        let r = kube("app.kubernetes.io/name=chat,tier in (b,a),!legacy,gpu,x!=y").unwrap();
        assert_eq!(
            to_text(&r),
            "app.kubernetes.io/name=chat,gpu,!legacy,tier in (a,b),x!=y"
        );
        assert_eq!(kube(&to_text(&r)).unwrap(), r);
        let labels = [
            ("app.kubernetes.io/name", "chat"),
            ("tier", "a"),
            ("gpu", ""),
        ];
        let get = |k: &str| labels.iter().find(|(l, _)| *l == k).map(|(_, v)| *v);
        assert!(matches_all(&r, get));
        assert!(!matches_all(&kube("tier notin (a)").unwrap(), get));
        assert!(matches_all(&kube("").unwrap(), get));
    }

    #[test]
    fn bad_input_is_named_and_limits_hold() {
        assert!(matches!(
            kube("app=x\""),
            Err(ParseError::Syntax { pos: 5, .. })
        ));
        assert_eq!(kube("a>1"), Err(ParseError::Unsupported(">".into())));
        assert_eq!(kube("a=-x"), Err(ParseError::BadValue("\"-x\"".into())));
        let tight = Limits {
            max_bytes: 12,
            max_requirements: 2,
            max_set_values: 2,
        };
        let p = |s: &str| parse::<ParseError>(s, tight, validate_kube_key);
        assert_eq!(
            p("a=b,c=d,e=fgh").unwrap_err().to_string(),
            "label selector is 13 bytes, over the limit of 12"
        );
        assert_eq!(p("a,b,c"), Err(ParseError::TooManyRequirements(2)));
        assert!(matches!(
            p("a in (x,y,z)"),
            Err(ParseError::TooManyValues { max: 2, .. })
        ));
    }
}
