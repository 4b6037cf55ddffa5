//! Reading a `dcgmFieldValue_v2` as the header's `DCGM_*_IS_BLANK` macros
//! read it: a blank, a failed status or another type is no value, never 0.

use std::ffi::CStr;

use crate::*;

impl dcgmFieldValue_v2 {
    /// An all-zero value, to be filled by DCGM.
    pub const ZERO: dcgmFieldValue_v2 = dcgmFieldValue_v2 {
        version: 0,
        entityGroupId: 0,
        entityId: 0,
        fieldId: 0,
        fieldType: 0,
        status: 0,
        unused: 0,
        ts: 0,
        value: Value([0; DCGM_MAX_BLOB_LENGTH]),
    };

    /// The value as a number; None for a blank, a failed status or a string.
    pub fn number(&self) -> Option<f64> {
        if self.status != DCGM_ST_OK {
            return None;
        }
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.value.0[..8]);
        match self.fieldType {
            DCGM_FT_DOUBLE => {
                Some(f64::from_ne_bytes(word)).filter(|v| v.is_finite() && *v < DCGM_FP64_BLANK)
            }
            DCGM_FT_INT64 => {
                let v = i64::from_ne_bytes(word);
                (v < DCGM_INT64_BLANK).then_some(v as f64)
            }
            _ => None,
        }
    }

    /// The value as a string; None for a blank (`<<<...>>>`) or another type.
    pub fn text(&self) -> Option<String> {
        if self.status != DCGM_ST_OK || self.fieldType != DCGM_FT_STRING {
            return None;
        }
        let s = CStr::from_bytes_until_nul(&self.value.0[..DCGM_MAX_STR_LENGTH]).ok()?;
        let s = s.to_str().ok()?;
        (!s.starts_with("<<<")).then(|| s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(field_type: u16, status: dcgmReturn_t, bytes: [u8; 8]) -> dcgmFieldValue_v2 {
        let mut v = dcgmFieldValue_v2::ZERO;
        v.fieldType = field_type;
        v.status = status;
        v.value.0[..8].copy_from_slice(&bytes);
        v
    }

    /// Blank values (DCGM_FP64_BLANK and above, DCGM_INT64_BLANK and above)
    /// and failed statuses are no value, never 0.
    #[test]
    fn blanks_and_failed_reads_are_no_value() {
        let d = |x: f64| value(DCGM_FT_DOUBLE, DCGM_ST_OK, x.to_ne_bytes());
        let i = |x: i64| value(DCGM_FT_INT64, DCGM_ST_OK, x.to_ne_bytes());
        assert_eq!(d(0.25).number(), Some(0.25));
        assert_eq!(d(0.0).number(), Some(0.0));
        assert_eq!(d(DCGM_FP64_BLANK).number(), None);
        assert_eq!(d(DCGM_FP64_BLANK + 2.0).number(), None);
        assert_eq!(d(f64::NAN).number(), None);
        assert_eq!(i(2_000_000_000).number(), Some(2e9));
        assert_eq!(i(DCGM_INT64_BLANK).number(), None);
        assert_eq!(i(DCGM_INT64_BLANK + 1).number(), None);
        let watched_not = value(DCGM_FT_DOUBLE, DCGM_ST_NOT_WATCHED, 0.5f64.to_ne_bytes());
        assert_eq!(watched_not.number(), None);
        let mut s = value(DCGM_FT_STRING, DCGM_ST_OK, *b"GPU-1\0\0\0");
        assert_eq!(s.text().as_deref(), Some("GPU-1"));
        s.value.0[..11].copy_from_slice(b"<<<NULL>>>\0");
        assert_eq!(s.text(), None);
    }
}
