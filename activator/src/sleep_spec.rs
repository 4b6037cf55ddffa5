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
