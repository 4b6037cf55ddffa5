//! The built-in default scenario through the real nvml-wrapper.
#![allow(clippy::unwrap_used)]

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::error::NvmlError;

#[test]
fn default_scenario_basics() {
    let s = crate::common::Session::new(None, None);
    let nvml = s.nvml();
    assert_eq!(nvml.sys_driver_version().unwrap(), "570.172.08");
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 12080);
    assert_eq!(nvml.device_count().unwrap(), 8);
    let d0 = nvml.device_by_index(0).unwrap();
    assert_eq!(d0.name().unwrap(), "NVIDIA H100 80GB HBM3");
    assert_eq!(
        d0.uuid().unwrap(),
        "GPU-8f3c2a61-4d7e-4b1a-9c52-3e1f0a7b6d01"
    );
    let mem = d0.memory_info().unwrap();
    assert_eq!(mem.total, 81559 * 1024 * 1024);
    assert_eq!(mem.used, 72340 * 1024 * 1024);
    assert_eq!(mem.reserved, 512 * 1024 * 1024);
    let u = d0.utilization_rates().unwrap();
    assert!((92..=98).contains(&u.gpu), "{u:?}");
    let p = d0.power_usage().unwrap();
    assert!((610_000..=670_000).contains(&p), "{p}");
    let t = d0.temperature(TemperatureSensor::Gpu).unwrap();
    assert!((68..=72).contains(&t));
    assert_eq!(d0.clock_info(Clock::SM).unwrap(), 1980);
    assert_eq!(d0.max_clock_info(Clock::Graphics).unwrap(), 1980);
    assert!(matches!(
        d0.fan_speed(0),
        Err(NvmlError::NotSupported) | Err(NvmlError::InvalidArg)
    ));
    let e1 = d0.total_energy_consumption().unwrap();
    assert!(e1 >= 41_250_000_000);
    assert_eq!(d0.pci_info().unwrap().bus_id, "00000000:18:00.0");
    let by_uuid = nvml
        .device_by_uuid("GPU-3e5f9a12-0b4c-4d8e-a6f3-1c7d5b9e2a08")
        .unwrap();
    assert_eq!(by_uuid.index().unwrap(), 7);
    let by_pci = nvml.device_by_pci_bus_id("00000000:DB:00.0").unwrap();
    assert_eq!(by_pci.index().unwrap(), 7);
}

#[test]
fn default_scenario_stories() {
    let s = crate::common::Session::new(None, None);
    let nvml = s.nvml();
    // GPU 2: allocated but idle
    let d2 = nvml.device_by_index(2).unwrap();
    assert_eq!(d2.utilization_rates().unwrap().gpu, 0);
    assert_eq!(d2.running_compute_processes().unwrap().len(), 1);
    assert!(
        d2.current_throttle_reasons()
            .unwrap()
            .contains(ThrottleReasons::GPU_IDLE)
    );
    // GPU 3: memory-bound
    let d3 = nvml.device_by_index(3).unwrap();
    assert!(d3.memory_info().unwrap().used > 76 * 1024 * 1024 * 1024);
    assert!(d3.utilization_rates().unwrap().gpu <= 18);
    // GPU 4: thermally throttled
    let d4 = nvml.device_by_index(4).unwrap();
    let r = d4.current_throttle_reasons().unwrap();
    assert!(
        r.contains(ThrottleReasons::SW_THERMAL_SLOWDOWN | ThrottleReasons::HW_THERMAL_SLOWDOWN)
    );
    assert!(d4.temperature(TemperatureSensor::Gpu).unwrap() >= 87);
    assert!(d4.clock_info(Clock::SM).unwrap() < 1500);
    // GPU 5: MIG, two instances in use, one free
    let d5 = nvml.device_by_index(5).unwrap();
    assert_eq!(d5.mig_mode().unwrap().current, 1);
    let migs: Vec<_> = (0..d5.mig_device_count().unwrap())
        .filter_map(|i| d5.mig_device_by_index(i).ok())
        .collect();
    assert_eq!(migs.len(), 3);
    let busy: Vec<usize> = migs
        .iter()
        .map(|m| m.running_compute_processes().unwrap().len())
        .collect();
    assert_eq!(busy, vec![1, 1, 0]);
    assert!(matches!(
        d5.utilization_rates(),
        Err(NvmlError::NotSupported)
    ));
    // GPU 6: time-sliced, two processes with different utilization
    let d6 = nvml.device_by_index(6).unwrap();
    let us = d6.process_utilization_stats(None).unwrap();
    assert_eq!(us.len(), 2);
    assert_ne!(us[0].sm_util, us[1].sm_util);
    // GPU 7: unused
    let d7 = nvml.device_by_index(7).unwrap();
    assert!(d7.running_compute_processes().unwrap().is_empty());
    assert_eq!(d7.memory_info().unwrap().used, 0);
    // corrected ECC errors on GPU 1, nothing uncorrected anywhere
    let d1 = nvml.device_by_index(1).unwrap();
    assert_eq!(
        d1.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
            .unwrap(),
        3
    );
    for i in 0..8 {
        let d = nvml.device_by_index(i).unwrap();
        assert_eq!(
            d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
                .unwrap(),
            0
        );
        assert!(d.gpm_support().unwrap());
    }
}

/// The schema example in docs/scenario.md is a scenario that loads.
#[test]
fn the_documented_example_loads() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenario.md");
    let doc = std::fs::read_to_string(path).expect("docs/scenario.md");
    let example = doc
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.starts_with("node:"))
        .expect("the schema example (a yaml block starting with node:)");
    let s = gpuscale_nvml_sim::scenario::parse(example, "docs/scenario.md")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.gpus.len(), 1);
    assert_eq!(s.pods.len(), 1);
}

/// The limits table of docs/scenario.md states the limits the code enforces.
#[test]
fn the_documented_limits_are_the_enforced_ones() {
    use gpuscale_nvml_sim::scenario::limits::*;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenario.md");
    let doc = std::fs::read_to_string(path).expect("docs/scenario.md");
    let section = doc
        .split("\n## Limits\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Limits section");
    let thousands = |n: usize| {
        let digits = n.to_string();
        let mut groups = Vec::new();
        let mut end = digits.len();
        while end > 3 {
            groups.push(&digits[end - 3..end]);
            end -= 3;
        }
        groups.push(&digits[..end]);
        groups.reverse();
        groups.join(",")
    };
    for (row, value) in [
        (
            "| file size ",
            format!("({} bytes", thousands(MAX_FILE_BYTES)),
        ),
        ("| nesting depth ", format!("{MAX_DEPTH} levels")),
        ("| `gpus` ", thousands(MAX_GPUS)),
        ("| `mig` per GPU ", thousands(MAX_MIG_PER_GPU)),
        ("| `pods` ", thousands(MAX_PODS)),
        ("| `labels` per pod ", thousands(MAX_LABELS)),
        ("| `node`, ", format!("{MAX_NAME} bytes")),
        ("| `namespace`, ", format!("{MAX_LABEL} bytes")),
        ("| label keys, ", format!("{MAX_QUALIFIED} bytes")),
        ("| pod `uid`, ", format!("{MAX_ID} bytes")),
        ("| process `name` ", format!("{MAX_TEXT} bytes")),
        ("| `driver_version` ", format!("{MAX_VERSION} bytes")),
    ] {
        let line = section
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row:?} in the Limits table"));
        let limit = line.split(" | ").nth(1).unwrap_or_default();
        assert!(
            limit.contains(&value),
            "{row}: the docs say {limit:?}, the code {value}"
        );
    }
    assert!(
        doc.contains(&format!("(the first {MAX_REPORTED}, then how many more)")),
        "MAX_REPORTED"
    );
}
