//! Time curves: a plain number, or `sine` / `ramp` / `steps`.

use std::f64::consts::PI;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// A value that varies with scenario time (seconds since the epoch).
#[derive(Debug, Clone, PartialEq)]
pub enum Curve {
    /// A constant.
    Const(f64),
    /// `{ sine: { min, max, period_s } }`: starts at the midpoint, rising.
    Sine(Sine),
    /// `{ ramp: { from, to, over_s } }`: linear from `from` to `to`, then holds `to`.
    Ramp(Ramp),
    /// `{ steps: [ { at_s, value }, ... ] }`: piecewise constant; before the
    /// first step the first step's value.
    Steps(Vec<Step>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sine {
    pub min: f64,
    pub max: f64,
    pub period_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ramp {
    pub from: f64,
    pub to: f64,
    pub over_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub at_s: f64,
    pub value: f64,
}

impl Default for Curve {
    fn default() -> Self {
        Curve::Const(0.0)
    }
}

impl From<f64> for Curve {
    fn from(v: f64) -> Self {
        Curve::Const(v)
    }
}

impl Curve {
    /// The value at `t` seconds after the epoch.
    pub fn at(&self, t: f64) -> f64 {
        match self {
            Curve::Const(v) => *v,
            Curve::Sine(s) => {
                let mid = (s.min + s.max) / 2.0;
                let amp = (s.max - s.min) / 2.0;
                if s.period_s > 0.0 {
                    mid + amp * (2.0 * PI * t / s.period_s).sin()
                } else {
                    mid
                }
            }
            Curve::Ramp(r) => {
                if r.over_s <= 0.0 || t >= r.over_s {
                    r.to
                } else if t <= 0.0 {
                    r.from
                } else {
                    r.from + (r.to - r.from) * t / r.over_s
                }
            }
            Curve::Steps(steps) => {
                let mut v = steps.first().map(|s| s.value).unwrap_or(0.0);
                for s in steps {
                    if s.at_s <= t {
                        v = s.value;
                    } else {
                        break;
                    }
                }
                v
            }
        }
    }

    /// The integral of the curve over `[t0, t1]` (value-seconds); 0 when `t1 <= t0`.
    pub fn integral(&self, t0: f64, t1: f64) -> f64 {
        if t1 <= t0 {
            return 0.0;
        }
        match self {
            Curve::Const(v) => v * (t1 - t0),
            Curve::Sine(s) => {
                let mid = (s.min + s.max) / 2.0;
                let amp = (s.max - s.min) / 2.0;
                if s.period_s > 0.0 {
                    let w = 2.0 * PI / s.period_s;
                    mid * (t1 - t0) - amp / w * ((w * t1).cos() - (w * t0).cos())
                } else {
                    mid * (t1 - t0)
                }
            }
            Curve::Ramp(r) => {
                let mut total = 0.0;
                // before 0: from; [0, over_s]: linear; after: to
                let (a, b) = (t0.min(0.0), t1.min(0.0));
                total += r.from * (b - a).max(0.0);
                if r.over_s > 0.0 {
                    let (a, b) = (t0.clamp(0.0, r.over_s), t1.clamp(0.0, r.over_s));
                    if b > a {
                        let va = r.from + (r.to - r.from) * a / r.over_s;
                        let vb = r.from + (r.to - r.from) * b / r.over_s;
                        total += (va + vb) / 2.0 * (b - a);
                    }
                }
                let start = r.over_s.max(0.0);
                let (a, b) = (t0.max(start), t1.max(start));
                total += r.to * (b - a).max(0.0);
                total
            }
            Curve::Steps(steps) => {
                if steps.is_empty() {
                    return 0.0;
                }
                let mut total = 0.0;
                for (i, s) in steps.iter().enumerate() {
                    let seg_start = if i == 0 { f64::NEG_INFINITY } else { s.at_s };
                    let seg_end = steps.get(i + 1).map(|n| n.at_s).unwrap_or(f64::INFINITY);
                    let a = t0.max(seg_start);
                    let b = t1.min(seg_end);
                    if b > a {
                        total += s.value * (b - a);
                    }
                }
                total
            }
        }
    }

    /// Mean over `[t0, t1]`; the value at `t1` when the interval is empty.
    pub fn mean(&self, t0: f64, t1: f64) -> f64 {
        if t1 - t0 > 1e-9 {
            self.integral(t0, t1) / (t1 - t0)
        } else {
            self.at(t1)
        }
    }

    /// Smallest and largest value the curve can take.
    pub fn range(&self) -> (f64, f64) {
        match self {
            Curve::Const(v) => (*v, *v),
            Curve::Sine(s) => (s.min.min(s.max), s.max.max(s.min)),
            Curve::Ramp(r) => (r.from.min(r.to), r.from.max(r.to)),
            Curve::Steps(steps) => steps
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                    (lo.min(s.value), hi.max(s.value))
                }),
        }
    }

    /// Problems with the curve's own parameters, if any.
    pub(crate) fn check(&self) -> Option<String> {
        let finite = |name: &str, v: f64| {
            (!v.is_finite()).then(|| format!("{name} must be a finite number"))
        };
        match self {
            Curve::Const(v) => finite("value", *v),
            Curve::Sine(s) => finite("sine.min", s.min)
                .or_else(|| finite("sine.max", s.max))
                .or_else(|| finite("sine.period_s", s.period_s))
                .or_else(|| {
                    (s.min > s.max).then(|| {
                        format!("sine.min ({}) is greater than sine.max ({})", s.min, s.max)
                    })
                })
                .or_else(|| (s.period_s <= 0.0).then(|| "sine.period_s must be > 0".to_string())),
            Curve::Ramp(r) => finite("ramp.from", r.from)
                .or_else(|| finite("ramp.to", r.to))
                .or_else(|| finite("ramp.over_s", r.over_s))
                .or_else(|| (r.over_s < 0.0).then(|| "ramp.over_s must be >= 0".to_string())),
            Curve::Steps(steps) => {
                if steps.is_empty() {
                    return Some("steps must not be empty".into());
                }
                for (i, s) in steps.iter().enumerate() {
                    if let Some(e) = finite(&format!("steps[{i}].value"), s.value)
                        .or_else(|| finite(&format!("steps[{i}].at_s"), s.at_s))
                    {
                        return Some(e);
                    }
                    if i > 0 && s.at_s <= steps[i - 1].at_s {
                        return Some(format!(
                            "steps[{i}].at_s must be greater than the previous step's at_s"
                        ));
                    }
                }
                None
            }
        }
    }
}

const CURVE_KINDS: &[&str] = &["sine", "ramp", "steps"];

struct CurveVisitor;

impl<'de> Visitor<'de> for CurveVisitor {
    type Value = Curve;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a curve")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Curve, E> {
        Ok(Curve::Const(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Curve, E> {
        Ok(Curve::Const(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Curve, E> {
        Ok(Curve::Const(v as f64))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Curve, A::Error> {
        let key: String = match map.next_key()? {
            Some(k) => k,
            None => {
                return Err(de::Error::custom(
                    "empty curve, expected one of `sine`, `ramp`, `steps`",
                ));
            }
        };
        let curve = match key.as_str() {
            "sine" => Curve::Sine(map.next_value()?),
            "ramp" => Curve::Ramp(map.next_value()?),
            "steps" => Curve::Steps(map.next_value()?),
            other => return Err(de::Error::unknown_variant(other, CURVE_KINDS)),
        };
        if map.next_key::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(
                "a curve has exactly one key: `sine`, `ramp` or `steps`",
            ));
        }
        Ok(curve)
    }
}

impl<'de> Deserialize<'de> for Curve {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CurveVisitor)
    }
}

impl Serialize for Curve {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Curve::Const(v) => s.serialize_f64(*v),
            Curve::Sine(v) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("sine", v)?;
                m.end()
            }
            Curve::Ramp(v) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("ramp", v)?;
                m.end()
            }
            Curve::Steps(v) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("steps", v)?;
                m.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * (1.0 + a.abs() + b.abs())
    }

    fn numeric(c: &Curve, t0: f64, t1: f64) -> f64 {
        let n = 20000;
        let h = (t1 - t0) / n as f64;
        (0..n).map(|i| c.at(t0 + (i as f64 + 0.5) * h) * h).sum()
    }

    #[test]
    fn values_and_integrals() {
        let sine = Curve::Sine(Sine {
            min: 20.0,
            max: 90.0,
            period_s: 60.0,
        });
        assert!(approx(sine.at(0.0), 55.0));
        assert!(approx(sine.at(15.0), 90.0));
        let ramp = Curve::Ramp(Ramp {
            from: 0.0,
            to: 100.0,
            over_s: 30.0,
        });
        assert!(approx(ramp.at(15.0), 50.0));
        assert!(approx(ramp.at(100.0), 100.0));
        let steps = Curve::Steps(vec![
            Step {
                at_s: 0.0,
                value: 10.0,
            },
            Step {
                at_s: 30.0,
                value: 95.0,
            },
        ]);
        assert!(approx(steps.at(29.9), 10.0));
        assert!(approx(steps.at(30.0), 95.0));
        for c in [&sine, &ramp, &steps, &Curve::Const(7.0)] {
            for (a, b) in [(0.0, 10.0), (5.0, 47.0), (-3.0, 100.0)] {
                assert!(
                    (c.integral(a, b) - numeric(c, a, b)).abs() < 0.5,
                    "{c:?} {a} {b}"
                );
            }
        }
    }
}
