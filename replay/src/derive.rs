//! The sparse long-tail trace: every k-th request of the input traces,
//! merged and stretched in time, the shape of a small model service.

use crate::trace::Arrival;

/// Keep rows `0, k, 2k, …` of each input (k = round(1 / keep)), merge them
/// by time, and stretch the time since the earliest arrival by `stretch`.
pub fn derive(inputs: &[Vec<Arrival>], keep: f64, stretch: f64) -> Vec<Arrival> {
    let k = (1.0 / keep).round().max(1.0) as usize;
    let mut out: Vec<Arrival> = inputs
        .iter()
        .flat_map(|v| v.iter().step_by(k).copied())
        .collect();
    out.sort_by(|a, b| a.t.total_cmp(&b.t));
    let t0 = out.first().map_or(0.0, |a| a.t);
    for a in &mut out {
        // Millisecond timestamps keep the derived CSV byte-for-byte stable.
        a.t = ((t0 + (a.t - t0) * stretch) * 1000.0).round() / 1000.0;
    }
    out
}
