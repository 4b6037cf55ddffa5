//! A route's `sleep:` key, read with the routes file (`crate::config`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A route's `sleep:` key.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SleepSpec {
    /// The port of the sleep endpoints; default the endpoint's own (vLLM
    /// serves them on its API port).
    #[serde(default)]
    pub port: Option<u16>,
    /// How often each endpoint's `/is_sleeping` is read (default `1s`).
    #[serde(default = "probe", deserialize_with = "duration")]
    pub probe_interval: Duration,
    /// How long one endpoint's wake may take before it is tried again
    /// (default `2m`).
    #[serde(default = "wake_timeout", deserialize_with = "duration")]
    pub wake_timeout: Duration,
    /// The level (1 or 2) the activator puts these pods to sleep at when a
    /// neighbour on their GPU needs the room (default 1).
    #[serde(default = "level", deserialize_with = "sleep_level")]
    pub level: u8,
    /// VRAM one pod needs awake (`24Gi`, `512Mi`, bytes): overrides the
    /// largest reading remembered while awake (`crate::gpu_share`).
    #[serde(default, deserialize_with = "vram")]
    pub vram: Option<u64>,
}

fn level() -> u8 {
    1
}

fn sleep_level<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    match u8::deserialize(d)? {
        l @ (1 | 2) => Ok(l),
        l => Err(serde::de::Error::custom(format!("level {l}: 1 or 2"))),
    }
}

/// A size: a whole number of bytes, or with `Ki`, `Mi`, `Gi`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let at = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(at);
    let scale: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => 0,
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{s:?}: a size in bytes, or with Ki, Mi, Gi"))
}

fn vram<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    parse_bytes(&s).map(Some).map_err(serde::de::Error::custom)
}

fn probe() -> Duration {
    Duration::from_secs(1)
}

fn wake_timeout() -> Duration {
    Duration::from_secs(120)
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    let v = gpuscale_util::duration::parse(&s).map_err(serde::de::Error::custom)?;
    if v < Duration::from_millis(10) || v > Duration::from_secs(3600) {
        return Err(serde::de::Error::custom(format!("{s:?}: from 10ms to 1h")));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_levels_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_bytes("24Gi"), Ok(24 << 30));
        assert_eq!(parse_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert!(parse_bytes("24GB").is_err() && parse_bytes("0").is_err());
        let spec: SleepSpec = yaml_serde::from_str("vram: 8Gi\nlevel: 2\n").unwrap();
        assert_eq!((spec.level, spec.vram), (2, Some(8 << 30)));
        let spec: SleepSpec = yaml_serde::from_str("{}").unwrap();
        assert_eq!((spec.level, spec.vram), (1, None));
        assert!(yaml_serde::from_str::<SleepSpec>("level: 3\n").is_err());
    }
}
