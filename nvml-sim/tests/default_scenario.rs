//! The built-in default scenario through the real nvml-wrapper.
#![allow(clippy::unwrap_used)]

mod common;

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::error::NvmlError;

#[test]
fn default_scenario_basics() {
    let s = common::Session::new(None, None);
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
