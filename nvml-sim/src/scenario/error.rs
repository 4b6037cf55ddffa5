//! Scenario errors: `FILE:LINE:COL: field.path[2].x: message`.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Semantic problems reported at once; the rest are counted (listed with
/// the other limits in `limits`, which re-exports it: the error type is
/// the leaf that `limits` and `validate` both use).
pub const MAX_REPORTED: usize = 20;

/// One semantic problem at a field, before it is located in the text.
pub(crate) struct Violation {
    pub path: FieldPath,
    pub message: String,
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// A field path such as `gpus[2].load.power_watts`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    pub fn key(mut self, k: &str) -> Self {
        self.0.push(Segment::Key(k.to_string()));
        self
    }
    pub fn index(mut self, i: usize) -> Self {
        self.0.push(Segment::Index(i));
        self
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for s in &self.0 {
            match s {
                Segment::Key(k) => {
                    if !first {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Segment::Index(i) => write!(f, "[{i}]")?,
            }
            first = false;
        }
        Ok(())
    }
}

/// Why a scenario could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScenarioError {
    /// The file could not be read.
    Io { origin: String, message: String },
    /// Syntax, type or semantic error at a position.
    Invalid {
        origin: String,
        line: usize,
        column: usize,
        /// Field path (`gpus[2].load.power_watts`); empty at the top level.
        path: String,
        message: String,
    },
    /// Several semantic problems, each an `Invalid`, in file order; `more`
    /// were found beyond the `limits::MAX_REPORTED` shown.
    Many {
        origin: String,
        problems: Vec<ScenarioError>,
        more: usize,
    },
}

impl ScenarioError {
    /// Each problem on its own: the list of `Many`, else this error alone.
    pub fn problems(&self) -> &[ScenarioError] {
        match self {
            ScenarioError::Many { problems, .. } => problems,
            other => std::slice::from_ref(other),
        }
    }
    /// Field path of the (first) error, if any.
    pub fn path(&self) -> Option<&str> {
        match self.problems().first()? {
            ScenarioError::Invalid { path, .. } => Some(path),
            _ => None,
        }
    }
    /// (line, column) of the (first) error, 1-based.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self.problems().first()? {
            ScenarioError::Invalid { line, column, .. } => Some((*line, *column)),
            _ => None,
        }
    }
    /// The (first) message without position and path.
    pub fn message(&self) -> &str {
        match self.problems().first() {
            Some(ScenarioError::Invalid { message, .. } | ScenarioError::Io { message, .. }) => {
                message
            }
            _ => "",
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioError::Io { origin, message } => write!(f, "{origin}: {message}"),
            ScenarioError::Invalid {
                origin,
                line,
                column,
                path,
                message,
            } => {
                write!(f, "{origin}:{line}:{column}: ")?;
                if !path.is_empty() {
                    write!(f, "{path}: ")?;
                }
                f.write_str(message)
            }
            ScenarioError::Many {
                origin,
                problems,
                more,
            } => {
                write!(f, "{origin}: {} problems:", problems.len() + more)?;
                for p in problems {
                    write!(f, "\n  {p}")?;
                }
                if *more > 0 {
                    write!(f, "\n  … and {more} more")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Convert a deserialization error (with its path) into a located error.
pub(crate) fn from_serde(
    origin: &str,
    e: serde_path_to_error::Error<yaml_serde::Error>,
) -> ScenarioError {
    let path = e.path().to_string();
    let mut path = if path == "." { String::new() } else { path };
    // serde_path_to_error marks keys it could not read as `?`
    while let Some(stripped) = path.strip_suffix(".?").or_else(|| path.strip_suffix('?')) {
        path = stripped.to_string();
    }
    let inner = e.inner();
    let (line, column) = inner
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((1, 1));
    let mut message = inner.to_string();
    // yaml_serde appends " at line L column C" and may prefix its own path.
    let suffix = format!(" at line {line} column {column}");
    if let Some(pos) = message.find(&suffix) {
        message.replace_range(pos..pos + suffix.len(), "");
    }
    if let Some((prefix, rest)) = message.split_once(": ")
        && !prefix.contains(' ')
        && !prefix.is_empty()
    {
        message = rest.to_string();
    }
    ScenarioError::Invalid {
        origin: origin.to_string(),
        line,
        column,
        path,
        message,
    }
}

/// One located error for the semantic problems found in `text` (at least
/// one): the first [`MAX_REPORTED`] are located, the rest counted.
pub(crate) fn located(origin: &str, text: &str, mut found: Vec<Violation>) -> ScenarioError {
    let more = found.len().saturating_sub(MAX_REPORTED);
    found.truncate(MAX_REPORTED);
    let mut problems: Vec<ScenarioError> = found
        .into_iter()
        .map(|v| locate(origin, text, v.path, v.message))
        .collect();
    if problems.len() == 1
        && more == 0
        && let Some(only) = problems.pop()
    {
        return only;
    }
    problems.sort_by_key(|p| p.position());
    ScenarioError::Many {
        origin: origin.to_string(),
        problems,
        more,
    }
}

/// Build a located error for a semantic problem at `path` in `text`.
fn locate(origin: &str, text: &str, path: FieldPath, message: String) -> ScenarioError {
    let mut prefix = path.0.as_slice();
    let (line, column) = loop {
        if let Some(pos) = find_position(text, prefix) {
            break pos;
        }
        match prefix.split_last() {
            Some((_, rest)) => prefix = rest,
            None => break (1, 1),
        }
    };
    ScenarioError::Invalid {
        origin: origin.to_string(),
        line,
        column,
        path: path.to_string(),
        message,
    }
}

/// Where the YAML node at `path` starts, if it exists.
fn find_position(text: &str, path: &[Segment]) -> Option<(usize, usize)> {
    let de = yaml_serde::Deserializer::from_str(text);
    match (Locator { path }).deserialize(de) {
        Ok(()) => None,
        Err(e) => {
            if e.to_string().contains(HERE) {
                e.location().map(|l| (l.line(), l.column()))
            } else {
                None
            }
        }
    }
}

const HERE: &str = "__gpuscale_locator_here__";

struct Locator<'a> {
    path: &'a [Segment],
}

impl<'de> DeserializeSeed<'de> for Locator<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Locator<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.leaf()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.leaf()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.leaf()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.leaf()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.leaf()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.leaf()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.leaf()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        match self.path.split_first() {
            None => Err(de::Error::custom(HERE)),
            Some((Segment::Index(i), rest)) => {
                for _ in 0..*i {
                    if seq.next_element::<IgnoredAny>()?.is_none() {
                        return Ok(());
                    }
                }
                seq.next_element_seed(Locator { path: rest })?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(())
            }
            Some((Segment::Key(_), _)) => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(())
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        match self.path.split_first() {
            None => Err(de::Error::custom(HERE)),
            Some((Segment::Key(k), rest)) => {
                while let Some(key) = map.next_key::<yaml_serde::Value>()? {
                    let matches = match &key {
                        yaml_serde::Value::String(s) => s == k,
                        yaml_serde::Value::Number(n) => n.to_string() == *k,
                        yaml_serde::Value::Bool(b) => b.to_string() == *k,
                        _ => false,
                    };
                    if matches {
                        map.next_value_seed(Locator { path: rest })?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(())
            }
            Some((Segment::Index(_), _)) => {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(())
            }
        }
    }
}

impl Locator<'_> {
    fn leaf<E: de::Error>(self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(HERE))
        } else {
            Ok(())
        }
    }
}
