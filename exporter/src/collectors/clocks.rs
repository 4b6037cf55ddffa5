//! Clocks, their maxima, clock event (throttle) reasons, cumulative throttle
//! time and the performance state.

use std::collections::HashMap;

use nvml_wrapper::enum_wrappers::device::{Clock, PerformanceState};
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT, NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION,
    NVML_FI_DEV_PERF_POLICY_POWER, NVML_FI_DEV_PERF_POLICY_RELIABILITY,
    NVML_FI_DEV_PERF_POLICY_SYNC_BOOST, NVML_FI_DEV_PERF_POLICY_THERMAL,
};

use super::{Collector, Ctx, Spec, info};
use crate::metrics::{Collected, Desc, Family};
use crate::nvml::raw;

pub const SPEC: Spec = Spec {
    name: "clocks",
    families: &[&CLOCK, &CLOCK_MAX, &EVENT_ACTIVE, &EVENT_SECONDS, &PSTATE],
    build: |_, _| Box::new(Clocks::default()),
};

const CLOCK: Desc = Desc::gauge(
    "gpu_clock_hertz",
    "Current clock frequency.",
    "hertz",
    &["clock"],
);
const CLOCK_MAX: Desc = Desc::gauge(
    "gpu_clock_max_hertz",
    "Maximum SM clock frequency; every maximum clock is a gpu_info label.",
    "hertz",
    &["clock"],
);
const EVENT_ACTIVE: Desc = Desc::gauge(
    "gpu_clock_event_active",
    "1 while the reason holds the clocks down (clock event / throttle reason), else 0.",
    "",
    &["reason"],
);
const EVENT_SECONDS: Desc = Desc::counter(
    "gpu_clock_event_seconds_total",
    "Time the clocks were held below the requested clocks, by policy.",
    "seconds",
    &["policy"],
);
const PSTATE: Desc = Desc::gauge(
    "gpu_performance_state",
    "Performance state (0 = P0, the fastest).",
    "",
    &[],
);

/// Maximum clocks by GPU UUID: fixed by the board, so read once (on an H200
/// nvmlDeviceGetMaxClockInfo takes 1.2 ms a call).
#[derive(Default)]
pub struct Clocks {
    max: HashMap<String, Vec<(&'static str, f64)>>,
}

/// The `gpu_info` label of a clock's maximum.
fn max_label(clock: &str) -> &'static str {
    match clock {
        "graphics" => "max_graphics_hertz",
        "sm" => "max_sm_hertz",
        "memory" => "max_memory_hertz",
        _ => "max_video_hertz",
    }
}

const CLOCKS: [(Clock, &str); 4] = [
    (Clock::Graphics, "graphics"),
    (Clock::SM, "sm"),
    (Clock::Memory, "memory"),
    (Clock::Video, "video"),
];

/// Clock event reason bits (nvmlClocksEventReason*), one series each.
pub const REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display"),
];

/// Violation time (ns) per performance policy, as field ids: the same
/// counters nvmlDeviceGetViolationStatus returns.
const POLICIES: [(u32, &str); 6] = [
    (NVML_FI_DEV_PERF_POLICY_POWER, "power"),
    (NVML_FI_DEV_PERF_POLICY_THERMAL, "thermal"),
    (NVML_FI_DEV_PERF_POLICY_SYNC_BOOST, "sync_boost"),
    (NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT, "board_limit"),
    (NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION, "low_utilization"),
    (NVML_FI_DEV_PERF_POLICY_RELIABILITY, "reliability"),
];

fn pstate_number(p: PerformanceState) -> Option<f64> {
    use PerformanceState::*;
    Some(match p {
        Zero => 0.0,
        One => 1.0,
        Two => 2.0,
        Three => 3.0,
        Four => 4.0,
        Five => 5.0,
        Six => 6.0,
        Seven => 7.0,
        Eight => 8.0,
        Nine => 9.0,
        Ten => 10.0,
        Eleven => 11.0,
        Twelve => 12.0,
        Thirteen => 13.0,
        Fourteen => 14.0,
        Fifteen => 15.0,
        Unknown => return None,
    })
}

impl<'n> Collector<'n> for Clocks {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut cur = Family::of(&CLOCK);
        let mut max = Family::of(&CLOCK_MAX);
        let mut active = Family::of(&EVENT_ACTIVE);
        let mut violation = Family::of(&EVENT_SECONDS);
        let mut pstate = Family::of(&PSTATE);
        for gpu in cx.gpus {
            let (i, d) = (gpu.id.index, &gpu.device);
            for (clock, label) in CLOCKS {
                if let Some(mhz) = cx
                    .reader
                    .read(i, "nvmlDeviceGetClockInfo", d.clock_info(clock))
                {
                    cur.push(
                        gpu.subject(),
                        vec![("clock", label.to_string())],
                        f64::from(mhz) * 1e6,
                    );
                }
            }
            if !self.max.contains_key(&*gpu.id.uuid) {
                let mut complete = true;
                let mut all = Vec::new();
                for (clock, label) in CLOCKS {
                    let mhz = d.max_clock_info(clock);
                    let read = cx.reader.read_fixed(i, "nvmlDeviceGetMaxClockInfo", mhz);
                    complete &= read.settled;
                    if let Some(mhz) = read.value {
                        all.push((label, f64::from(mhz) * 1e6));
                    }
                }
                if complete {
                    self.max.insert(gpu.id.uuid.to_string(), all);
                }
            }
            let mut info = Vec::new();
            for (label, hz) in self.max.get(&*gpu.id.uuid).into_iter().flatten() {
                // The dashboards chart the SM clock against its maximum.
                if *label == "sm" {
                    max.push(gpu.subject(), vec![("clock", label.to_string())], *hz);
                }
                info.push((max_label(label), hz.to_string()));
            }
            info::annotate(out, gpu, &info);
            if let Some(r) = cx.reader.read(
                i,
                "nvmlDeviceGetCurrentClocksEventReasons",
                d.current_throttle_reasons(),
            ) {
                let bits = r.bits();
                for (bit, label) in REASONS {
                    let on = if bits & bit != 0 { 1.0 } else { 0.0 };
                    active.push(gpu.subject(), vec![("reason", label.to_string())], on);
                }
            }
            // One batched call: on a real H200 it costs about what a single
            // nvmlDeviceGetViolationStatus does (0.6 vs 0.7 ms), six times less.
            let requests = POLICIES.map(|(id, _)| (id, 0));
            let values = cx.reader.read(
                i,
                "nvmlDeviceGetFieldValues",
                raw::scoped_field_values(cx.nvml, d, &requests),
            );
            for (value, (_, label)) in values.into_iter().flatten().zip(POLICIES) {
                if let Some(ns) = cx
                    .reader
                    .read(i, "nvmlDeviceGetFieldValues(PERF_POLICY)", value)
                {
                    violation.push(gpu.subject(), vec![("policy", label.to_string())], ns / 1e9);
                }
            }
            let state = cx
                .reader
                .read(i, "nvmlDeviceGetPerformanceState", d.performance_state());
            if let Some(n) = state.and_then(pstate_number) {
                pstate.push(gpu.subject(), vec![], n);
            }
        }
        out.families.extend([cur, max, active, violation, pstate]);
    }
}
