//! A `/api/v1/query` answer read one series at a time.
//!
//! Each series is checked as it is read (its value a number, its label set
//! not seen before in the answer) and handed to the caller, who folds it
//! into what it keeps: no JSON tree, no text, no vector of every series.
//! A duplicate is found by a 128-bit keyed hash of the label set (16 bytes
//! a series; two different sets collide with odds under 10⁻²⁴ at ten
//! million series, and a collision could only refuse, never admit).

use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::Sample;

/// What an answer says besides its series.
#[derive(Default)]
struct Head {
    status: Option<String>,
    error_type: Option<String>,
    error: Option<String>,
    warnings: Vec<String>,
    result_type: Option<String>,
}

#[derive(Deserialize)]
struct Series {
    metric: std::collections::BTreeMap<String, String>,
    value: (serde_json::Number, String),
}

/// The reading of one answer: where series go, and what was seen.
struct Reading<'f> {
    each: &'f mut dyn FnMut(Sample),
    seen: HashSet<u128, BuildHasherDefault<Low64>>,
    keys: (RandomState, RandomState),
    /// Why the answer was refused mid-stream (not a JSON fault).
    refused: Option<String>,
    /// The answer said it failed before its data: its series are skipped.
    failed: bool,
}

/// The series of an answer that must be a vector, each handed to `each`
/// as it is read, and the answer's warnings. On an error, what `each` got
/// must be dropped (the callers return the error).
pub fn read(r: impl std::io::Read, each: &mut dyn FnMut(Sample)) -> Result<Vec<String>, String> {
    let mut reading = Reading {
        each,
        seen: HashSet::default(),
        keys: (RandomState::new(), RandomState::new()),
        refused: None,
        failed: false,
    };
    let mut de = serde_json::Deserializer::from_reader(r);
    let parsed = AnswerSeed(&mut reading)
        .deserialize(&mut de)
        .and_then(|h| de.end().map(|()| h));
    let head = match (parsed, reading.refused) {
        (_, Some(why)) => return Err(why),
        (Err(e), None) => return Err(format!("answer is not JSON: {e}")),
        (Ok(h), None) => h,
    };
    if head.status.as_deref() != Some("success") {
        return Err(format!(
            "{} {}",
            head.error_type.unwrap_or_default(),
            head.error.unwrap_or_default()
        ));
    }
    match head.result_type.as_deref() {
        None => Err("answer has no data".to_string()),
        Some("vector") => Ok(head.warnings),
        Some(t) => Err(format!("result type {t:?} is not a vector")),
    }
}

impl Reading<'_> {
    /// A refusal that stops the reading, kept to be told as it is.
    fn refuse<E: de::Error>(&mut self, why: String) -> E {
        let e = E::custom(&why);
        self.refused = Some(why);
        e
    }

    fn take<E: de::Error>(&mut self, s: Series) -> Result<(), E> {
        let text = &s.value.1;
        let Ok(value) = text.parse::<f64>() else {
            return Err(self.refuse(format!("value {text:?} is not a number")));
        };
        let sample = Sample {
            labels: s.metric.into_iter().collect(),
            value,
        };
        let h = (u128::from(self.keys.0.hash_one(&sample.labels)) << 64)
            | u128::from(self.keys.1.hash_one(&sample.labels));
        if !self.seen.insert(h) {
            let name = sample.name();
            return Err(self.refuse(format!("duplicate series: {name} twice in one answer")));
        }
        (self.each)(sample);
        Ok(())
    }
}

/// The answer object: `status`, `data`, `errorType`, `error`, `warnings`.
struct AnswerSeed<'r, 'f>(&'r mut Reading<'f>);

impl<'de> DeserializeSeed<'de> for AnswerSeed<'_, '_> {
    type Value = Head;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Head, D::Error> {
        d.deserialize_map(self)
    }
}

/// A field given twice is refused, as a derived `Deserialize` would.
fn once<T, E: de::Error>(slot: &Option<T>, name: &'static str) -> Result<(), E> {
    match slot {
        Some(_) => Err(E::duplicate_field(name)),
        None => Ok(()),
    }
}

impl<'de> Visitor<'de> for AnswerSeed<'_, '_> {
    type Value = Head;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Prometheus answer object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Head, A::Error> {
        let mut h = Head::default();
        let mut data = false;
        let mut warnings = false;
        while let Some(k) = m.next_key::<String>()? {
            match k.as_str() {
                "status" => {
                    once(&h.status, "status")?;
                    let s: String = m.next_value()?;
                    self.0.failed = s != "success";
                    h.status = Some(s);
                }
                "data" if data => return Err(de::Error::duplicate_field("data")),
                "data" => {
                    data = true;
                    h.result_type = m.next_value_seed(DataSeed(&mut *self.0))?;
                }
                "errorType" => h.error_type = m.next_value()?,
                "error" => h.error = m.next_value()?,
                "warnings" if warnings => return Err(de::Error::duplicate_field("warnings")),
                "warnings" => {
                    warnings = true;
                    h.warnings = m.next_value()?;
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        if h.status.is_none() {
            return Err(de::Error::missing_field("status"));
        }
        Ok(h)
    }
}

/// `data` (or `null`): its result type, the series handed on.
struct DataSeed<'r, 'f>(&'r mut Reading<'f>);

impl<'de> DeserializeSeed<'de> for DataSeed<'_, '_> {
    type Value = Option<String>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for DataSeed<'_, '_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the answer's data object")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut result_type: Option<String> = None;
        let mut result = false;
        while let Some(k) = m.next_key::<String>()? {
            match k.as_str() {
                "resultType" => {
                    once(&result_type, "resultType")?;
                    let t: String = m.next_value()?;
                    if t != "vector" && !self.0.failed {
                        let why = format!("result type {t:?} is not a vector");
                        return Err(self.0.refuse(why));
                    }
                    result_type = Some(t);
                }
                "result" if result => return Err(de::Error::duplicate_field("result")),
                "result" if self.0.failed => {
                    result = true;
                    m.next_value::<IgnoredAny>()?;
                }
                "result" => {
                    result = true;
                    m.next_value_seed(ResultSeed(&mut *self.0))?;
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        result_type
            .map(Some)
            .ok_or_else(|| de::Error::missing_field("resultType"))
    }
}

/// `result`: each series checked and handed on as it is read.
struct ResultSeed<'r, 'f>(&'r mut Reading<'f>);

impl<'de> DeserializeSeed<'de> for ResultSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ResultSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of series")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while let Some(series) = s.next_element::<Series>()? {
            self.0.take(series)?;
        }
        Ok(())
    }
}

/// The set's hasher: its keys are already keyed hashes.
#[derive(Default)]
struct Low64(u64);

impl Hasher for Low64 {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u128(&mut self, v: u128) {
        // The low half: a SipHash output of its own.
        self.0 = v as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(body: &str) -> Result<(Vec<Sample>, Vec<String>), String> {
        let mut out = Vec::new();
        let w = read(body.as_bytes(), &mut |s| out.push(s))?;
        Ok((out, w))
    }

    #[test]
    fn series_are_handed_on_in_order_whatever_the_field_order() {
        let body = r#"{"data":{"result":[{"value":[1,"2"],"metric":{"b":"y","a":"x"}},
            {"metric":{},"value":[1,"+Inf"]}],"resultType":"vector"},
            "infos":["i"],"warnings":["w"],"status":"success"}"#;
        let (s, w) = all(body).unwrap();
        assert_eq!(w, ["w"]);
        assert_eq!(
            s[0].labels,
            [("a".into(), "x".into()), ("b".into(), "y".into())]
        );
        assert_eq!(s[0].value, 2.0);
        assert!(s[1].value.is_infinite() && s[1].labels.is_empty());
    }

    #[test]
    fn refusals_name_their_reason() {
        let cases = [
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[]}]}}"#,
                "result type \"matrix\" is not a vector",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#,
                "value \"x\" is not a number",
            ),
            (r#"{"status":"success","data":null}"#, "answer has no data"),
            (
                r#"{"status":"success","status":"success","data":null}"#,
                "duplicate field `status`",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[]}} x"#,
                "answer is not JSON",
            ),
            (
                r#"{"data":{"resultType":"vector","result":[]}}"#,
                "missing field `status`",
            ),
            (
                r#"{"status":"error","errorType":"timeout","error":"query timed out","data":{"resultType":"matrix","result":7}}"#,
                "timeout query timed out",
            ),
        ];
        for (body, want) in cases {
            let e = all(body).unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
    }

    #[test]
    fn a_duplicate_stops_the_reading_at_its_second_copy() {
        let one = r#"{"metric":{"a":"1"},"value":[1,"1"]}"#;
        let other = r#"{"metric":{"a":"2"},"value":[1,"1"]}"#;
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{one},{other},{one},{other}]}}}}"#
        );
        let mut n = 0;
        let e = read(body.as_bytes(), &mut |_| n += 1).unwrap_err();
        assert_eq!(e, "duplicate series: {a=\"1\"} twice in one answer");
        assert_eq!(n, 2);
    }
}
