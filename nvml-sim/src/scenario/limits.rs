//! Size limits of a scenario (`docs/scenario.md`, "Limits").
//!
//! A scenario is trusted operator input, but one typo'd generator must not
//! cost gigabytes or minutes: the file size is checked before it is read,
//! the nesting depth by a linear pre-scan before the YAML parser (whose
//! flow-collection handling is quadratic in depth), aliases refused by the
//! same scan (they would repeat nodes past every limit), the GPU and pod lists
//! while they are deserialized, and string lengths by validation (the node
//! name and pod labels end up on every series the exporter serves).

use std::fmt;
use std::io::Read;
use std::marker::PhantomData;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::depth::{self, Found};
use super::error::ScenarioError;

/// Largest scenario file: 8× a 256-GPU, 1,000-pod node (about 0.5 MB).
pub const MAX_FILE_BYTES: usize = 4 << 20;
/// Deepest YAML nesting; the schema itself needs 7 levels.
pub const MAX_DEPTH: usize = 32;
/// GPUs in a scenario (device handle encoding limit).
pub const MAX_GPUS: usize = 256;
/// MIG instances per GPU (NVML's limit).
pub const MAX_MIG_PER_GPU: usize = 7;
/// Pods on the node: the kubelet's default `--max-pods` is 110, the largest
/// cloud node types allow about 750.
pub const MAX_PODS: usize = 1000;
/// Labels per pod.
pub const MAX_LABELS: usize = 64;
/// DNS subdomain (Kubernetes object names): node, pod, owner, claim names.
pub const MAX_NAME: usize = 253;
/// DNS label / label value: namespace, container name, owner kind, label
/// values, DRA driver.
pub const MAX_LABEL: usize = 63;
/// Qualified name `prefix/name`: label keys, extended resource names.
pub const MAX_QUALIFIED: usize = 317;
/// Identifiers: pod uid, claim device names, `share_id`.
pub const MAX_ID: usize = 128;
/// Free text: process names.
pub const MAX_TEXT: usize = 255;
/// Driver version string.
pub const MAX_VERSION: usize = 79;
pub use super::error::MAX_REPORTED;

/// Read a scenario file, refusing one over [`MAX_FILE_BYTES`] before reading
/// it, and anything but a regular file before opening it (opening a FIFO
/// would wait for a writer).
pub(crate) fn read(path: &Path, origin: &str) -> Result<String, ScenarioError> {
    let io = |e: std::io::Error| ScenarioError::Io {
        origin: origin.to_string(),
        message: e.to_string(),
    };
    let kind = std::fs::metadata(path).map_err(io)?.file_type();
    if !kind.is_file() {
        return Err(ScenarioError::Io {
            origin: origin.to_string(),
            message: format!(
                "not a regular file ({}): a scenario is read from a file",
                describe(kind)
            ),
        });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len > MAX_FILE_BYTES as u64 {
        return Err(too_large(origin, len));
    }
    // The file may grow (or be a pipe): never read past the limit.
    let mut text = String::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() > MAX_FILE_BYTES {
        return Err(too_large(origin, text.len() as u64));
    }
    Ok(text)
}

/// Size and nesting depth of scenario text, before it is parsed.
pub(crate) fn check_text(text: &str, origin: &str) -> Result<(), ScenarioError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(too_large(origin, text.len() as u64));
    }
    let Some((line, column, found)) = depth::first_problem(text, MAX_DEPTH) else {
        return Ok(());
    };
    let message = match found {
        Found::TooDeep => format!("nested deeper than {MAX_DEPTH} levels, the limit"),
        Found::Alias => "YAML aliases (*name) are not accepted: each repeats a node past the size limits; write the node out (and quote a value that starts with '*')".to_string(),
    };
    Err(ScenarioError::Invalid {
        origin: origin.to_string(),
        line,
        column,
        path: String::new(),
        message,
    })
}

fn describe(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a file"
    }
}

fn too_large(origin: &str, len: u64) -> ScenarioError {
    ScenarioError::Invalid {
        origin: origin.to_string(),
        line: 1,
        column: 1,
        path: String::new(),
        message: format!(
            "the file is {len} bytes, more than the limit of {MAX_FILE_BYTES} bytes ({} MiB)",
            MAX_FILE_BYTES >> 20
        ),
    }
}

/// `gpus:` with at most [`MAX_GPUS`] entries.
pub(crate) fn gpus<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    d.deserialize_seq(AtMost::new(MAX_GPUS, "GPUs"))
}

/// `pods:` with at most [`MAX_PODS`] entries.
pub(crate) fn pods<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    d.deserialize_seq(AtMost::new(MAX_PODS, "pods"))
}

/// A list that stops at the first element past `max`, with that element's
/// position in the error, instead of building the whole list first.
struct AtMost<T> {
    max: usize,
    what: &'static str,
    item: PhantomData<T>,
}

impl<T> AtMost<T> {
    fn new(max: usize, what: &'static str) -> Self {
        AtMost {
            max,
            what,
            item: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for AtMost<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of at most {} {}", self.max, self.what)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::new();
        while out.len() < self.max {
            match seq.next_element()? {
                Some(x) => out.push(x),
                None => return Ok(out),
            }
        }
        let extra = TooMany {
            max: self.max,
            what: self.what,
        };
        seq.next_element_seed(extra)?;
        Ok(out)
    }
}

/// Fails on whatever element it is given: the parser then reports that
/// element's line and column, and the path its index.
struct TooMany {
    max: usize,
    what: &'static str,
}

impl TooMany {
    fn fail<E: de::Error>(&self) -> Result<(), E> {
        Err(E::custom(format!(
            "more than {} {}, the limit",
            self.max, self.what
        )))
    }
}

impl<'de> DeserializeSeed<'de> for TooMany {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TooMany {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "no more than {} {}", self.max, self.what)
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.fail()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.fail()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.fail()
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.fail()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.fail()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.fail()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.fail()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.fail()
    }
}
