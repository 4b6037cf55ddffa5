//! Canonical Kubernetes quantities, without a decimal crate.

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
}
