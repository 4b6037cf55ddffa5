//! What each NVML call the collectors make costs on this machine, and
//! whether one batched `nvmlDeviceGetFieldValues` would be cheaper than the
//! single calls it could replace. Prints a markdown table per GPU.
//!
//! `cargo run --release -p gpuscale-exporter --example nvml_cost -- [--nvml-lib PATH] [--reps N]`

use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, PerformancePolicy, TemperatureSensor,
    TemperatureThreshold,
};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::*;
use nvml_wrapper::{Device, Nvml};

type Call<'a> = (&'static str, Box<dyn Fn() -> Result<(), String> + 'a>);

fn ok<T>(r: Result<T, NvmlError>) -> Result<(), String> {
    r.map(|_| ()).map_err(|e| e.to_string())
}

fn fields<'a>(d: &'a Device<'a>, ids: &'static [u32]) -> Box<dyn Fn() -> Result<(), String> + 'a> {
    Box::new(move || {
        let ids: Vec<FieldId> = ids.iter().map(|&i| FieldId(i)).collect();
        for s in ok_vec(d.field_values_for(&ids))? {
            s.map_err(|e| e.to_string())?
                .value
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

fn ok_vec<T>(r: Result<Vec<T>, NvmlError>) -> Result<Vec<T>, String> {
    r.map_err(|e| e.to_string())
}

fn calls<'a>(d: &'a Device<'a>) -> Vec<Call<'a>> {
    let mut all = utilization_and_power(d);
    all.extend(thermal_and_clocks(d));
    all.extend(pcie_errors_and_processes(d));
    all
}

/// Utilization, memory, power and energy.
fn utilization_and_power<'a>(d: &'a Device<'a>) -> Vec<Call<'a>> {
    vec![
        (
            "nvmlDeviceGetUtilizationRates",
            Box::new(|| ok(d.utilization_rates())),
        ),
        (
            "nvmlDeviceGetEncoderUtilization",
            Box::new(|| ok(d.encoder_utilization())),
        ),
        (
            "nvmlDeviceGetMemoryInfo_v2",
            Box::new(|| ok(d.memory_info())),
        ),
        ("nvmlDeviceGetPowerUsage", Box::new(|| ok(d.power_usage()))),
        (
            "nvmlDeviceGetEnforcedPowerLimit",
            Box::new(|| ok(d.enforced_power_limit())),
        ),
        (
            "nvmlDeviceGetTotalEnergyConsumption",
            Box::new(|| ok(d.total_energy_consumption())),
        ),
        (
            "FieldValues(power: instant, limit, energy)",
            fields(
                d,
                &[
                    NVML_FI_DEV_POWER_INSTANT,
                    NVML_FI_DEV_POWER_CURRENT_LIMIT,
                    NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
                ],
            ),
        ),
    ]
}

/// Temperatures, fans, clocks and throttling.
fn thermal_and_clocks<'a>(d: &'a Device<'a>) -> Vec<Call<'a>> {
    vec![
        (
            "nvmlDeviceGetTemperature",
            Box::new(|| ok(d.temperature(TemperatureSensor::Gpu))),
        ),
        (
            "FieldValues(MEMORY_TEMP)",
            fields(d, &[NVML_FI_DEV_MEMORY_TEMP]),
        ),
        (
            "nvmlDeviceGetTemperatureThreshold(slowdown)",
            Box::new(|| ok(d.temperature_threshold(TemperatureThreshold::Slowdown))),
        ),
        ("nvmlDeviceGetNumFans", Box::new(|| ok(d.num_fans()))),
        (
            "nvmlDeviceGetFanSpeed_v2(0)",
            Box::new(|| ok(d.fan_speed(0))),
        ),
        (
            "nvmlDeviceGetClockInfo(sm)",
            Box::new(|| ok(d.clock_info(Clock::SM))),
        ),
        (
            "nvmlDeviceGetMaxClockInfo(sm)",
            Box::new(|| ok(d.max_clock_info(Clock::SM))),
        ),
        (
            "nvmlDeviceGetCurrentClocksEventReasons",
            Box::new(|| ok(d.current_throttle_reasons())),
        ),
        (
            "nvmlDeviceGetViolationStatus(power)",
            Box::new(|| ok(d.violation_status(PerformancePolicy::Power))),
        ),
        (
            "FieldValues(6 perf policies)",
            fields(
                d,
                &[
                    NVML_FI_DEV_PERF_POLICY_POWER,
                    NVML_FI_DEV_PERF_POLICY_THERMAL,
                    NVML_FI_DEV_PERF_POLICY_SYNC_BOOST,
                    NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT,
                    NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION,
                    NVML_FI_DEV_PERF_POLICY_RELIABILITY,
                ],
            ),
        ),
    ]
}

/// Performance state, PCIe, ECC, processes, MIG and GPM.
fn pcie_errors_and_processes<'a>(d: &'a Device<'a>) -> Vec<Call<'a>> {
    vec![
        (
            "nvmlDeviceGetPerformanceState",
            Box::new(|| ok(d.performance_state())),
        ),
        (
            "nvmlDeviceGetPcieThroughput(tx)",
            Box::new(|| ok(d.pcie_throughput(PcieUtilCounter::Send))),
        ),
        (
            "nvmlDeviceGetPcieReplayCounter",
            Box::new(|| ok(d.pcie_replay_counter())),
        ),
        (
            "nvmlDeviceGetTotalEccErrors(corrected, volatile)",
            Box::new(|| ok(d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile))),
        ),
        (
            "nvmlDeviceGetComputeRunningProcesses",
            Box::new(|| ok(d.running_compute_processes())),
        ),
        ("nvmlDeviceGetMigMode", Box::new(|| ok(d.mig_mode()))),
        ("nvmlGpmSampleGet", Box::new(|| ok(d.gpm_sample()))),
    ]
}

fn main() {
    let mut lib = None;
    let mut reps = 50usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--nvml-lib", Some(p)) => lib = Some(p),
            ("--reps", Some(n)) => match n.parse() {
                Ok(n) if n > 0 => reps = n,
                _ => fail(&format!("--reps: not a positive number: {n:?}")),
            },
            _ => fail(&format!("unknown or incomplete argument {a:?}")),
        }
    }
    let mut b = Nvml::builder();
    if let Some(p) = &lib {
        b.lib_path(p.as_ref());
    }
    let before = rss_kib();
    let nvml = b
        .init()
        .unwrap_or_else(|e| fail(&format!("NVML init: {e}")));
    println!("RSS before NVML init {before} KiB, after {} KiB", rss_kib());
    let n = nvml
        .device_count()
        .unwrap_or_else(|e| fail(&format!("device count: {e}")));
    for i in 0..n {
        let d = nvml
            .device_by_index(i)
            .unwrap_or_else(|e| fail(&format!("GPU {i}: {e}")));
        println!("\n### GPU {i}: {}\n", d.name().unwrap_or_default());
        println!("| call | median µs | p90 µs | result |\n|---|---|---|---|");
        for (name, f) in calls(&d) {
            let mut t: Vec<Duration> = Vec::with_capacity(reps);
            let mut res = String::from("ok");
            for _ in 0..reps {
                let s = Instant::now();
                let r = f();
                t.push(s.elapsed());
                if let Err(e) = r {
                    res = e;
                }
            }
            t.sort();
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            let (p50, p90) = (us(t[reps / 2]), us(t[reps * 9 / 10]));
            println!("| {name} | {p50:.1} | {p90:.1} | {res} |");
        }
        // The batched perf-policy fields must be the same counters (ns).
        let single = d.violation_status(PerformancePolicy::LowUtilization);
        let field = d.field_values_for(&[FieldId(NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION)]);
        println!(
            "\nlow_utilization violation: GetViolationStatus {:?} ns; FieldValues {:?}",
            single.map(|v| v.violation_time),
            field.map(|v| v
                .into_iter()
                .map(|s| s.map(|s| s.value))
                .collect::<Vec<_>>())
        );
    }
    println!("\nRSS after every call {} KiB", rss_kib());
}

fn rss_kib() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| {
                l.trim_start_matches("VmRSS:")
                    .trim()
                    .trim_end_matches(" kB")
                    .to_string()
            })
        })
        .unwrap_or_default()
}

fn fail(msg: &str) -> ! {
    eprintln!("nvml_cost: {msg}");
    std::process::exit(2)
}
