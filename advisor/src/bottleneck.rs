//! What limits a workload, from its p95 activity and peak memory.

use serde::Serialize;

use crate::thresholds as t;

/// The limit, first match wins in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// Utilization p95 under the idle threshold.
    Idle,
    /// Peak VRAM near the device or slice size.
    MemoryCapacity,
    /// DRAM active high, tensor moderate: LLM decode.
    MemoryBandwidth,
    /// Tensor or SM active high: prefill, training.
    Compute,
    /// Busy by `utilization`, SM active low: the host or the input pipeline.
    HostInput,
    /// Working, nothing saturated.
    Balanced,
    /// Working, but no GPM (pre-Hopper, or GPM off): SM, tensor and DRAM
    /// activity are unknown, so the advisor does not guess.
    NoGpm,
    /// NVML proxies where there is neither GPM nor DCGM (the class names
    /// the signal it used): memory-controller duty cycle high.
    MemoryBandwidthProxy,
    /// Utilization and power near the enforced limit, memory quiet.
    ComputeProxy,
    /// Busy, low power, memory quiet, PCIe streaming.
    HostInputProxy,
    /// The proxies see nothing saturated.
    BalancedProxy,
    /// No utilization series at all.
    Unknown,
}

impl Bottleneck {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::MemoryCapacity => "memory_capacity",
            Self::MemoryBandwidth => "memory_bandwidth",
            Self::Compute => "compute",
            Self::HostInput => "host_input",
            Self::Balanced => "balanced",
            Self::NoGpm => "unknown_no_gpm",
            Self::MemoryBandwidthProxy => "memory_bandwidth_proxy",
            Self::ComputeProxy => "compute_proxy",
            Self::HostInputProxy => "host_input_proxy",
            Self::BalancedProxy => "balanced_proxy",
            Self::Unknown => "unknown",
        }
    }
}

/// The inputs of [`classify`]: p95 activities (0-1), peak memory share.
#[derive(Debug, Clone, Copy, Default)]
pub struct Activity {
    pub utilization: Option<f64>,
    pub sm: Option<f64>,
    pub tensor: Option<f64>,
    pub dram: Option<f64>,
    /// Peak VRAM over the device's (or slice's) memory.
    pub memory_used: Option<f64>,
    /// NVML proxies: memory-controller duty cycle, power over the
    /// enforced limit (0-1), PCIe bytes per second both ways.
    pub memory_duty: Option<f64>,
    pub power_of_limit: Option<f64>,
    pub pcie_bytes_per_second: Option<f64>,
}

/// The bottleneck and why.
pub fn classify(a: &Activity) -> (Bottleneck, String) {
    let Some(util) = a.utilization.or(a.sm) else {
        return (Bottleneck::Unknown, "no utilization series".into());
    };
    if util < t::IDLE {
        return (
            Bottleneck::Idle,
            format!(
                "utilization p95 {:.0} % < {:.0} %",
                util * 100.0,
                t::IDLE * 100.0
            ),
        );
    }
    if let Some(m) = a.memory_used.filter(|m| *m >= t::MEMORY_CAPACITY) {
        return (
            Bottleneck::MemoryCapacity,
            format!(
                "peak VRAM {:.0} % of the device ≥ {:.0} %",
                m * 100.0,
                t::MEMORY_CAPACITY * 100.0
            ),
        );
    }
    let (Some(sm), Some(tensor), Some(dram)) = (a.sm, a.tensor, a.dram) else {
        return proxy(a, util);
    };
    if dram >= t::DRAM_ACTIVE && tensor < t::TENSOR_ACTIVE {
        return (
            Bottleneck::MemoryBandwidth,
            format!(
                "DRAM active p95 {:.0} % ≥ {:.0} %, tensor {:.0} %",
                dram * 100.0,
                t::DRAM_ACTIVE * 100.0,
                tensor * 100.0
            ),
        );
    }
    if tensor >= t::TENSOR_ACTIVE || sm >= t::SM_ACTIVE {
        return (
            Bottleneck::Compute,
            format!(
                "tensor active p95 {:.0} %, SM active p95 {:.0} %",
                tensor * 100.0,
                sm * 100.0
            ),
        );
    }
    if a.utilization.is_some_and(|u| u >= t::BUSY_UTILIZATION) && sm < t::SM_LOW {
        return (
            Bottleneck::HostInput,
            format!(
                "utilization p95 {:.0} % but SM active p95 {:.0} % < {:.0} %",
                util * 100.0,
                sm * 100.0,
                t::SM_LOW * 100.0
            ),
        );
    }
    (Bottleneck::Balanced, "nothing saturated".into())
}

/// Without SM, tensor and DRAM activity (no GPM, no DCGM): NVML's
/// memory-controller duty cycle, power and PCIe, the class named a proxy;
/// without duty cycle or power, not guessed.
fn proxy(a: &Activity, util: f64) -> (Bottleneck, String) {
    let (Some(duty), Some(power)) = (a.memory_duty, a.power_of_limit) else {
        return (
            Bottleneck::NoGpm,
            "no GPM or DCGM activity series and no NVML memory duty cycle or power: limit unknown"
                .into(),
        );
    };
    let p = |x: f64| x * 100.0;
    let seen = format!(
        "NVML proxy: memory duty cycle p95 {:.0} %, power p95 {:.0} % of the limit, utilization p95 {:.0} %",
        p(duty),
        p(power),
        p(util)
    );
    let pcie = a.pcie_bytes_per_second.unwrap_or(0.0);
    let class = if duty >= t::MEMORY_DUTY {
        Bottleneck::MemoryBandwidthProxy
    } else if util >= t::COMPUTE_UTILIZATION && power >= t::COMPUTE_POWER {
        Bottleneck::ComputeProxy
    } else if util >= t::BUSY_UTILIZATION && power < t::HOST_POWER && pcie >= t::HOST_PCIE {
        Bottleneck::HostInputProxy
    } else {
        Bottleneck::BalancedProxy
    };
    (class, format!("{seen}, PCIe p95 {:.1} GB/s", pcie / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(u: f64, sm: f64, tensor: f64, dram: f64, mem: f64) -> Activity {
        Activity {
            utilization: Some(u),
            sm: Some(sm),
            tensor: Some(tensor),
            dram: Some(dram),
            memory_used: Some(mem),
            ..Activity::default()
        }
    }

    #[test]
    fn classes_in_order() {
        assert_eq!(classify(&a(0.01, 0.0, 0.0, 0.0, 0.95)).0, Bottleneck::Idle);
        assert_eq!(
            classify(&a(0.9, 0.5, 0.2, 0.3, 0.95)).0,
            Bottleneck::MemoryCapacity
        );
        assert_eq!(
            classify(&a(1.0, 0.6, 0.25, 0.65, 0.5)).0,
            Bottleneck::MemoryBandwidth
        );
        assert_eq!(classify(&a(1.0, 0.9, 0.7, 0.6, 0.5)).0, Bottleneck::Compute);
        assert_eq!(
            classify(&a(0.9, 0.2, 0.05, 0.1, 0.3)).0,
            Bottleneck::HostInput
        );
        assert_eq!(
            classify(&a(0.3, 0.2, 0.05, 0.1, 0.3)).0,
            Bottleneck::Balanced
        );
    }

    #[test]
    fn without_gpm_it_says_so() {
        let no_gpm = Activity {
            utilization: Some(0.6),
            memory_used: Some(0.3),
            ..Activity::default()
        };
        let (b, why) = classify(&no_gpm);
        assert_eq!(b, Bottleneck::NoGpm);
        assert!(why.contains("GPM"));
        assert_eq!(classify(&Activity::default()).0, Bottleneck::Unknown);
    }

    #[test]
    fn nvml_proxies_are_named_as_such() {
        let nvml = |u, duty, power, pcie| Activity {
            utilization: Some(u),
            memory_used: Some(0.3),
            memory_duty: Some(duty),
            power_of_limit: Some(power),
            pcie_bytes_per_second: Some(pcie),
            ..Activity::default()
        };
        let c = |a| classify(&a).0;
        assert_eq!(
            c(nvml(0.9, 0.7, 0.6, 0.0)),
            Bottleneck::MemoryBandwidthProxy
        );
        assert_eq!(c(nvml(0.9, 0.3, 0.85, 0.0)), Bottleneck::ComputeProxy);
        assert_eq!(c(nvml(0.6, 0.1, 0.3, 2e9)), Bottleneck::HostInputProxy);
        assert_eq!(c(nvml(0.3, 0.1, 0.3, 0.0)), Bottleneck::BalancedProxy);
        assert!(classify(&nvml(0.9, 0.7, 0.6, 0.0)).1.contains("NVML proxy"));
    }
}
