//! Activation (0↔1), kept apart from the HPA target (1↔N). A read is active,
//! inactive or unknown; unknown (Prometheus failed or timed out, a stale
//! value, an empty result under policy `error`, NaN, ±Inf) never counts as
//! idle, so no workload reaches zero on missing data.

use crate::provider::{ProviderError, Reading};

/// What a read says about waking or idling a workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Activity {
    /// The value is above the activation threshold.
    Active,
    /// The value is at or below the threshold.
    Inactive,
    /// No trustworthy value; the reason says why.
    Unknown(String),
}

/// The value the HPA acts on: the sum of the items.
pub fn total(reading: &Reading) -> Result<f64, String> {
    if reading.items.is_empty() {
        return Err(format!("metric {}: no value", reading.metric));
    }
    let sum: f64 = reading.items.iter().map(|i| i.value).sum();
    if sum.is_finite() {
        Ok(sum)
    } else {
        Err(format!(
            "metric {}: the value is not finite",
            reading.metric
        ))
    }
}

/// Classify a provider answer against `threshold`. Requests that can never
/// be served (unknown metric, bad selector) stay errors.
pub fn classify(
    read: Result<Reading, ProviderError>,
    threshold: f64,
) -> Result<Activity, ProviderError> {
    match read {
        Ok(r) => Ok(match total(&r) {
            Ok(v) if v > threshold => Activity::Active,
            Ok(_) => Activity::Inactive,
            Err(why) => Activity::Unknown(why),
        }),
        Err(ProviderError::Unavailable(why)) => Ok(Activity::Unknown(why)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::MetricValue;

    fn reading(values: &[f64]) -> Result<Reading, ProviderError> {
        Ok(Reading {
            metric: "m".into(),
            items: values
                .iter()
                .map(|&value| MetricValue {
                    labels: Default::default(),
                    value,
                    timestamp: 0,
                })
                .collect(),
            window_secs: 60,
        })
    }

    #[test]
    fn above_the_threshold_is_active_at_or_below_inactive() {
        assert_eq!(classify(reading(&[0.5]), 0.0), Ok(Activity::Active));
        assert_eq!(classify(reading(&[0.0]), 0.0), Ok(Activity::Inactive));
        assert_eq!(classify(reading(&[2.0, 1.0]), 3.0), Ok(Activity::Inactive));
        assert_eq!(classify(reading(&[2.0, 1.5]), 3.0), Ok(Activity::Active));
    }

    #[test]
    fn missing_or_broken_values_are_unknown_never_inactive() {
        for r in [
            reading(&[]),
            reading(&[f64::NAN]),
            reading(&[f64::INFINITY]),
            reading(&[f64::NEG_INFINITY]),
            Err(ProviderError::Unavailable("prometheus unreachable".into())),
        ] {
            assert!(
                matches!(classify(r.clone(), 0.0), Ok(Activity::Unknown(_))),
                "{r:?}"
            );
        }
        assert_eq!(
            classify(Err(ProviderError::BadRequest("x".into())), 0.0),
            Err(ProviderError::BadRequest("x".into()))
        );
    }
}
