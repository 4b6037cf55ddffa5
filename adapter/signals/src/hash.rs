//! A label-safe hash for shortened label values.

/// FNV-1a, 64 bits: stable across builds and restarts (std's hasher is not
/// promised to be), so a dashboard legend keeps its name.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
