//! Canonical Kubernetes quantities and RFC 3339 timestamps, without a
//! date or decimal crate.

/// Why a number cannot be reported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantityError {
    #[error("value is NaN")]
    NaN,
    #[error("value is infinite")]
    Infinite,
    #[error("value {0} is out of range for a quantity")]
    OutOfRange(f64),
}

/// The largest magnitude reported: a quantity's milli value and KEDA's
/// int64 metric value both stay within `i64` (about 9.2e18).
pub const MAX_ABS: f64 = 9.0e18;

/// `v` as a number a quantity and an int64 metric can carry, or why not
/// (never clamped: a clamped value would be a made-up number).
pub fn check(v: f64) -> Result<f64, QuantityError> {
    if v.is_nan() {
        return Err(QuantityError::NaN);
    }
    if v.is_infinite() {
        return Err(QuantityError::Infinite);
    }
    if v.abs() >= MAX_ABS {
        return Err(QuantityError::OutOfRange(v));
    }
    Ok(v)
}

/// Format `v` as a canonical decimal-SI quantity, as
/// `resource.Quantity.String()` would: `1500m`, `3`, `2k`; milli precision,
/// except that a non-zero value below 0.5m keeps nano precision (`250u`),
/// and one below 1n reads as `1n` (or `-1n`): a positive activation signal
/// must never read as zero.
pub fn format(v: f64) -> Result<String, QuantityError> {
    check(v)?;
    // Milli precision, as the HPA reads values (`NewMilliQuantity`); a
    // non-zero value that would round to 0m keeps nano precision instead.
    let (mut mantissa, mut idx) = ((v * 1e3).round() as i128, 2);
    if mantissa == 0 {
        (mantissa, idx) = ((v * 1e9).round() as i128, 0);
    }
    if mantissa == 0 && v != 0.0 {
        return Ok(if v > 0.0 { "1n" } else { "-1n" }.into());
    }
    if mantissa == 0 {
        return Ok("0".into());
    }
    const SUFFIX: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
    while idx + 1 < SUFFIX.len() && mantissa % 1000 == 0 {
        mantissa /= 1000;
        idx += 1;
    }
    Ok(format!("{mantissa}{}", SUFFIX[idx]))
}

/// Seconds since the Unix epoch → `2026-11-29T22:40:00Z`.
pub fn rfc3339(unix_secs: i64) -> String {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms() {
        assert_eq!(format(1.5).unwrap(), "1500m");
        assert_eq!(format(3.0).unwrap(), "3");
        assert_eq!(format(2000.0).unwrap(), "2k");
        assert_eq!(format(1500.0).unwrap(), "1500");
        assert_eq!(format(0.00025).unwrap(), "250u");
        assert_eq!(format(0.1 + 0.2).unwrap(), "300m");
        assert_eq!(format(-0.75).unwrap(), "-750m");
        assert_eq!(format(1e-12).unwrap(), "1n");
        assert_eq!(format(-1e-12).unwrap(), "-1n");
        assert_eq!(format(0.0).unwrap(), "0");
        assert_eq!(format(0.955014162).unwrap(), "955m");
        assert_eq!(format(0.0025).unwrap(), "3m");
        assert_eq!(format(1e-10).unwrap(), "1n");
        assert_eq!(format(1e6).unwrap(), "1M");
        assert_eq!(format(f64::NAN), Err(QuantityError::NaN));
        assert_eq!(format(f64::INFINITY), Err(QuantityError::Infinite));
        assert!(format(1e19).is_err());
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_078_400), "2026-11-30T22:40:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
