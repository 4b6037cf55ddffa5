//! Semantic checks beyond the schema. Every problem is collected, so one run
//! names them all (as the adapter's config loader does); [`super::parse`]
//! locates each in the file.

mod gpu;
mod mig;
mod pod;

use std::collections::HashMap;

use super::error::{FieldPath, Violation};
use super::limits::{MAX_NAME, MAX_VERSION};
use super::{Curve, Scenario};

/// The problems found so far, in the order the checks ran (document order).
#[derive(Default)]
pub(crate) struct Problems(Vec<Violation>);

impl Problems {
    pub fn add(&mut self, path: FieldPath, message: impl Into<String>) {
        self.0.push(Violation {
            path,
            message: message.into(),
        });
    }

    /// A curve: well-formed and within `lo..=hi`.
    pub fn curve(&mut self, c: &Curve, path: FieldPath, lo: f64, hi: f64, what: &str) {
        if let Some(msg) = c.check() {
            return self.add(path, msg);
        }
        let (min, max) = c.range();
        if min < lo || max > hi {
            let range = if hi.is_infinite() {
                format!(">= {lo}")
            } else {
                format!("within {lo}..={hi}")
            };
            self.add(
                path,
                format!("{what} must be {range}, the curve ranges over {min}..={max}"),
            );
        }
    }

    pub fn pct(&mut self, c: &Curve, path: FieldPath) {
        self.curve(c, path, 0.0, 100.0, "a percentage");
    }

    pub fn nonneg(&mut self, c: &Curve, path: FieldPath) {
        self.curve(c, path, 0.0, f64::INFINITY, "the value");
    }

    pub fn time(&mut self, v: f64, path: FieldPath) {
        if !v.is_finite() || v < 0.0 {
            self.add(path, format!("time must be a finite number >= 0, got {v}"));
        }
    }

    /// A string of 1 to `max` bytes; the limits keep every label the
    /// exporter derives from it (and so every series) a bounded size.
    pub fn text(&mut self, s: &str, path: FieldPath, max: usize) {
        if s.is_empty() {
            self.add(path, "must not be empty");
        } else if s.len() > max {
            self.add(
                path,
                format!("is {} bytes long, the limit is {max}", s.len()),
            );
        }
    }
}

/// UUIDs and PCI addresses seen so far: unique across GPUs and MIG instances.
#[derive(Default)]
pub(crate) struct Seen<'a> {
    uuids: HashMap<&'a str, FieldPath>,
    buses: HashMap<(u32, u32, u32, u32), usize>,
}

impl<'a> Seen<'a> {
    /// Record `uuid` at `path`; a problem when it was seen before.
    fn uuid(&mut self, uuid: &'a str, path: FieldPath, out: &mut Problems) {
        if let Some(prev) = self.uuids.insert(uuid, path.clone()) {
            out.add(path, format!("duplicate UUID {uuid:?} (also at {prev})"));
        }
    }
}

fn root() -> FieldPath {
    FieldPath::default()
}

/// Parse `DDDDDDDD:BB:DD.F` (domain may have 4 or 8 hex digits).
pub fn parse_pci_bus_id(s: &str) -> Option<(u32, u32, u32, u32)> {
    let (domain, rest) = s.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (dev, func) = rest.split_once('.')?;
    let hex = |x: &str, max_len: usize| {
        if x.is_empty() || x.len() > max_len || !x.chars().all(|c| c.is_ascii_hexdigit()) {
            None
        } else {
            u32::from_str_radix(x, 16).ok()
        }
    };
    Some((hex(domain, 8)?, hex(bus, 2)?, hex(dev, 2)?, hex(func, 1)?))
}

/// `prefix` followed by a hex UUID (`GPU-…`, `MIG-…`) of bounded length.
fn is_uuid(s: &str, prefix: &str) -> bool {
    s.len() < 80
        && s.strip_prefix(prefix)
            .is_some_and(|b| !b.is_empty() && b.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
}

/// `s` for a message: quoted, and cut short when long (a limit was broken).
fn shown(s: &str) -> String {
    const SHOWN: usize = 80;
    match s.char_indices().nth(SHOWN) {
        None => format!("{s:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &s[..end], s.len()),
    }
}

/// Every semantic problem of `s`; `Err` is never empty.
pub(crate) fn validate(s: &Scenario) -> Result<(), Vec<Violation>> {
    let mut out = Problems::default();
    check_node(s, &mut out);
    let mut seen = Seen::default();
    for (i, g) in s.gpus.iter().enumerate() {
        gpu::check(i, g, &mut seen, &mut out);
    }
    pod::check_all(s, &mut out);
    if out.0.is_empty() { Ok(()) } else { Err(out.0) }
}

/// The top-level keys: node name and versions.
fn check_node(s: &Scenario, out: &mut Problems) {
    out.text(&s.node, root().key("node"), MAX_NAME);
    let dv = &s.driver_version;
    let mut parts = dv.split('.');
    let ok = parts.next().is_some_and(|p| p.parse::<u32>().is_ok())
        && parts.next().is_some_and(|p| p.parse::<u32>().is_ok());
    if !ok || dv.len() > MAX_VERSION {
        out.add(
            root().key("driver_version"),
            format!("expected a version like \"570.172.08\", got {dv:?}"),
        );
    }
    if s.cuda_version < 1000 {
        out.add(
            root().key("cuda_version"),
            "expected NVML's integer form major*1000 + minor*10, e.g. 12080",
        );
    }
}
