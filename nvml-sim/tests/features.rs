//! The simulator through the real nvml-wrapper, against a small test scenario.
//! Tests share one loaded library (global state): each holds `common::Session`.
#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::time::Duration;

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, ClockId, EccCounter, MemoryError, MemoryLocation, PcieUtilCounter, PerformancePolicy,
    PerformanceState, RetirementCause, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::device::{SampleValue, UsedGpuMemory};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::NvmlLib;

const SCENARIO: &str = r#"
node: test-node
driver_version: "550.54.15"
cuda_version: 12040
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    serial: "1234567890"
    memory_mib: 81559
    reserved_mib: 500
    nvlinks: 4
    unsupported: [fan_speed]
    energy_offset_joules: 1000
    load:
      utilization: 75
      memory_utilization: 40
      memory_used_mib: 10000
      power_watts: 500
      temperature_celsius: 60
      memory_temperature_celsius: 70
      sm_clock_mhz: 1500
      pstate: 2
      encoder_utilization: 5
      sm_active: 80
      sm_occupancy: 40
      tensor_active: 60
      dram_active: 30
      pcie_tx_bytes_per_second: 1048576000
      pcie_rx_bytes_per_second: 2097152000
      nvlink_tx_bytes_per_second: 1048576
      nvlink_rx_bytes_per_second: 2097152
    throttle:
      - { reasons: [sw_thermal, hw_thermal], from_s: 0, to_s: 100 }
      - { reasons: [sw_power_cap], from_s: 500, to_s: null }
    xids:
      - { at_s: 0, xid: 79 }
      - { at_s: 1, xid: 13 }
      - { at_s: 100000, xid: 31 }
    ecc_errors:
      - { at_s: 0, type: corrected, count: 3 }
      - { at_s: 100000, type: uncorrected, count: 1 }
    nvlink_errors:
      - { at_s: 0, link: 1, type: crc_flit, count: 2 }
    pcie_replays: 7
    remapped_rows: { correctable: 2, uncorrectable: 0, pending: true }
    retired_pages: { single_bit: 2 }
    processes:
      - { pid: 100, name: trainer, memory_mib: 6000, sm_utilization: 70, memory_utilization: 30 }
      - { pid: 101, name: helper, memory_mib: 2000, sm_utilization: 5 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-000000000001
    pci_bus_id: "00000000:2A:00.0"
    memory_mib: 81559
    lost_at_s: 0
  - model: Tesla V100-SXM2-16GB
    uuid: GPU-00000000-0000-4000-8000-000000000002
    pci_bus_id: "00000000:3B:00.0"
    architecture: volta
    memory_mib: 16160
    unsupported: [power, temperature, encoder]
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-000000000003
    pci_bus_id: "00000000:4C:00.0"
    memory_mib: 81559
    unsupported: [utilization]
    load: { sm_active: 50 }
    mig:
      - { uuid: MIG-00000000-0000-4000-8000-00000000000a, profile: 3g.40gb, gpu_instance_id: 1, compute_instance_id: 0, memory_mib: 40192, load: { memory_used_mib: 1000, sm_active: 33, dram_active: 12 } }
      - { uuid: MIG-00000000-0000-4000-8000-00000000000b, profile: 1g.10gb, gpu_instance_id: 9, memory_mib: 9856 }
    processes:
      - { pid: 200, name: a, memory_mib: 900, mig: MIG-00000000-0000-4000-8000-00000000000a }
      - { pid: 201, name: b, memory_mib: 500, mig: MIG-00000000-0000-4000-8000-00000000000b }
      - { pid: 202, name: c, memory_mib: 400, mig: MIG-00000000-0000-4000-8000-00000000000b }
"#;

/// Scenario time at the start of each test (the epoch is this long ago).
const T: f64 = 1000.0;
const MIB: u64 = 1024 * 1024;

fn session() -> crate::common::Session {
    crate::common::Session::new(Some(SCENARIO), Some(T))
}

fn near(v: f64, want: f64, tol: f64) -> bool {
    (v - want).abs() <= tol
}

#[test]
fn identity_memory_power_clocks() {
    let s = session();
    let nvml = s.nvml();
    system_identity(&nvml);
    let d = nvml.device_by_index(0).unwrap();
    memory_power_and_energy(&d);
    temperatures_clocks_and_codecs(&d);
    pcie_fans_and_pci(&d);
    lookups_by_uuid_and_bus_id(&nvml);
    unsupported_fields_of_a_volta(&nvml.device_by_index(2).unwrap());
}

fn system_identity(nvml: &Nvml) {
    assert_eq!(nvml.sys_driver_version().unwrap(), "550.54.15");
    assert_eq!(nvml.sys_nvml_version().unwrap(), "12.550.54.15");
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 12040);
    assert_eq!(nvml.device_count().unwrap(), 4);
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.serial().unwrap(), "1234567890");
    assert_eq!(d.index().unwrap(), 0);
}

fn memory_power_and_energy(d: &Device) {
    let m = d.memory_info().unwrap();
    assert_eq!(
        (m.total, m.reserved, m.used),
        (81559 * MIB, 500 * MIB, 10000 * MIB)
    );
    assert_eq!(m.free, (81559 - 500 - 10000) * MIB);
    let u = d.utilization_rates().unwrap();
    assert_eq!((u.gpu, u.memory), (75, 40));
    assert_eq!(d.power_usage().unwrap(), 500_000);
    assert_eq!(d.enforced_power_limit().unwrap(), 700_000);
    assert_eq!(d.power_management_limit().unwrap(), 700_000);
    assert_eq!(d.power_management_limit_default().unwrap(), 700_000);
    let e = d.total_energy_consumption().unwrap() as f64;
    assert!(
        near(e, (1000.0 + 500.0 * T) * 1000.0, 500.0 * 1000.0 * 5.0),
        "{e}"
    );
    let e2 = d.total_energy_consumption().unwrap() as f64;
    assert!(e2 >= e);
}

fn temperatures_clocks_and_codecs(d: &Device) {
    assert_eq!(d.temperature(TemperatureSensor::Gpu).unwrap(), 60);
    assert_eq!(
        d.temperature_threshold(TemperatureThreshold::Slowdown)
            .unwrap(),
        87
    );
    assert_eq!(
        d.temperature_threshold(TemperatureThreshold::Shutdown)
            .unwrap(),
        92
    );
    assert_eq!(d.clock_info(Clock::SM).unwrap(), 1500);
    assert_eq!(
        d.clock_info(Clock::Graphics).unwrap(),
        1980,
        "default = max clock"
    );
    assert_eq!(d.max_clock_info(Clock::Memory).unwrap(), 2619);
    assert_eq!(d.clock(Clock::SM, ClockId::Current).unwrap(), 1500);
    assert_eq!(d.performance_state().unwrap(), PerformanceState::Two);
    assert_eq!(d.encoder_utilization().unwrap().utilization, 5);
    assert_eq!(d.decoder_utilization().unwrap().utilization, 0);
}

fn pcie_fans_and_pci(d: &Device) {
    assert_eq!(d.pcie_throughput(PcieUtilCounter::Send).unwrap(), 1_024_000);
    assert_eq!(
        d.pcie_throughput(PcieUtilCounter::Receive).unwrap(),
        2_048_000
    );
    assert_eq!(d.pcie_replay_counter().unwrap(), 7);
    assert_eq!(d.current_pcie_link_gen().unwrap(), 5);
    assert_eq!(d.current_pcie_link_width().unwrap(), 16);
    assert_eq!(d.num_fans().unwrap(), 0);
    // As a real fanless H200 answers: fan 0 is out of range.
    assert!(matches!(d.fan_speed(0), Err(NvmlError::InvalidArg)));
    let pci = d.pci_info().unwrap();
    assert_eq!((pci.domain, pci.bus, pci.device), (0, 0x18, 0));
}

fn lookups_by_uuid_and_bus_id(nvml: &Nvml) {
    assert_eq!(
        nvml.device_by_uuid("GPU-00000000-0000-4000-8000-000000000003")
            .unwrap()
            .index()
            .unwrap(),
        3
    );
    assert!(matches!(
        nvml.device_by_uuid("GPU-nope"),
        Err(NvmlError::NotFound)
    ));
    assert_eq!(
        nvml.device_by_pci_bus_id("0000:4C:00.0")
            .unwrap()
            .index()
            .unwrap(),
        3
    );
}

/// A Volta with unsupported fields.
fn unsupported_fields_of_a_volta(v: &Device) {
    assert_eq!(v.name().unwrap(), "Tesla V100-SXM2-16GB");
    assert!(matches!(v.power_usage(), Err(NvmlError::NotSupported)));
    assert!(matches!(
        v.temperature(TemperatureSensor::Gpu),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        v.encoder_utilization(),
        Err(NvmlError::NotSupported)
    ));
    assert!(v.running_compute_processes().unwrap().is_empty());
    assert!(
        matches!(v.serial(), Err(NvmlError::NotSupported)),
        "no serial in the scenario"
    );
    assert!(matches!(v.gpm_support(), Ok(false)));
    assert!(matches!(v.gpm_sample(), Err(NvmlError::NotSupported)));
    assert!(matches!(v.mig_mode(), Err(NvmlError::NotSupported)));
    assert_eq!(v.utilization_rates().unwrap().gpu, 0);
}

#[test]
fn throttle_and_violations() {
    let s = session();
    let nvml = s.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let r = d.current_throttle_reasons().unwrap();
    assert_eq!(
        r,
        ThrottleReasons::SW_POWER_CAP,
        "thermal ended at 100 s, power cap since 500 s"
    );
    let th = d.violation_status(PerformancePolicy::Thermal).unwrap();
    assert_eq!(th.violation_time, 100_000_000_000);
    let pw = d.violation_status(PerformancePolicy::Power).unwrap();
    assert!(
        near(pw.violation_time as f64, (T - 500.0) * 1e9, 5e9),
        "{pw:?}"
    );
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as f64;
    assert!(near(th.reference_time as f64, now_us, 5e6));
    assert_eq!(
        d.violation_status(PerformancePolicy::SyncBoost)
            .unwrap()
            .violation_time,
        0
    );
}

#[test]
fn processes_and_process_utilization() {
    let s = session();
    let nvml = s.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.running_compute_processes_count().unwrap(), 2);
    let ps = d.running_compute_processes().unwrap();
    assert_eq!(ps.len(), 2);
    assert_eq!(ps[0].pid, 100);
    assert_eq!(ps[0].used_gpu_memory, UsedGpuMemory::Used(6000 * MIB));
    assert_eq!(ps[0].gpu_instance_id, None);
    assert!(d.running_graphics_processes().unwrap().is_empty());
    let us = d.process_utilization_stats(None).unwrap();
    assert_eq!(us.len(), 2);
    assert_eq!((us[0].pid, us[0].sm_util, us[0].mem_util), (100, 70, 30));
    let again = d.process_utilization_stats(us[0].timestamp - 1).unwrap();
    assert_eq!(again.len(), 2);
    assert_eq!(nvml.sys_process_name(100, 64).unwrap(), "trainer");

    // no processes: NOT_FOUND
    let empty = nvml.device_by_index(2).unwrap();
    assert!(matches!(
        empty.process_utilization_stats(None),
        Err(NvmlError::NotFound)
    ));

    // MIG GPU: parent lists all, each instance its own
    let g = nvml.device_by_index(3).unwrap();
    let all = g.running_compute_processes().unwrap();
    assert_eq!(all.len(), 3);
    let m1 = g.mig_device_by_index(1).unwrap();
    let ps = m1.running_compute_processes().unwrap();
    assert_eq!(ps.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![201, 202]);
    assert_eq!(ps[0].gpu_instance_id, Some(9));
    assert_eq!(ps[0].compute_instance_id, Some(0));
    assert!(matches!(
        m1.process_utilization_stats(None),
        Err(NvmlError::NotSupported)
    ));
}

#[test]
fn mig_handles() {
    let s = session();
    let nvml = s.nvml();
    let g = nvml.device_by_index(3).unwrap();
    let mode = g.mig_mode().unwrap();
    assert_eq!((mode.current, mode.pending), (1, 1));
    assert_eq!(g.mig_device_count().unwrap(), 7);
    assert!(!g.mig_is_mig_device_handle().unwrap());
    let m0 = g.mig_device_by_index(0).unwrap();
    assert!(m0.mig_is_mig_device_handle().unwrap());
    assert_eq!(
        m0.uuid().unwrap(),
        "MIG-00000000-0000-4000-8000-00000000000a"
    );
    assert_eq!(m0.name().unwrap(), "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
    let mem = m0.memory_info().unwrap();
    assert_eq!((mem.total, mem.used), (40192 * MIB, 1000 * MIB));
    let m1 = g.mig_device_by_index(1).unwrap();
    assert_eq!(
        m1.memory_info().unwrap().used,
        900 * MIB,
        "default: the instance's processes"
    );
    assert!(matches!(g.mig_device_by_index(2), Err(NvmlError::NotFound)));
    assert_eq!(
        m0.mig_parent_device().unwrap().uuid().unwrap(),
        g.uuid().unwrap()
    );
    assert!(matches!(
        m0.utilization_rates(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        g.utilization_rates(),
        Err(NvmlError::NotSupported)
    ));
    assert_eq!(
        nvml.device_by_uuid("MIG-00000000-0000-4000-8000-00000000000b")
            .unwrap()
            .uuid()
            .unwrap(),
        m1.uuid().unwrap()
    );
    // instance ids through the raw API (no safe wrapper)
    // SAFETY: the raw NVML functions of a loaded library, given a live
    // handle and pointers to locals.
    unsafe {
        let lib = nvml.lib();
        let mut id = 0u32;
        assert_eq!(lib.nvmlDeviceGetGpuInstanceId(m1.handle(), &mut id), 0);
        assert_eq!(id, 9);
        assert_eq!(lib.nvmlDeviceGetComputeInstanceId(m1.handle(), &mut id), 0);
        assert_eq!(id, 0);
        assert_eq!(
            lib.nvmlDeviceGetGpuInstanceId(g.handle(), &mut id),
            3,
            "not a MIG handle"
        );
    }
    // non-MIG hopper: mode disabled, count 0
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.mig_mode().unwrap().current, 0);
    assert_eq!(d.mig_device_count().unwrap(), 0);
}

#[test]
fn gpm_metrics() {
    let s = session();
    let nvml = s.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert!(d.gpm_support().unwrap());
    let ids = [
        GpmMetricId::SmUtil,
        GpmMetricId::SmOccupancy,
        GpmMetricId::AnyTensorUtil,
        GpmMetricId::DramBwUtil,
        GpmMetricId::PcieTxPerSec,
        GpmMetricId::PcieRxPerSec,
        GpmMetricId::NvlinkTotalTxPerSec,
        GpmMetricId::NvlinkTotalRxPerSec,
        GpmMetricId::Fp64Util,
    ];
    let s1 = d.gpm_sample().unwrap();
    std::thread::sleep(Duration::from_millis(120));
    let s2 = d.gpm_sample().unwrap();
    let r = nvml_wrapper::gpm::gpm_metrics_get(&nvml, &s1, &s2, &ids).unwrap();
    let v: Vec<f64> = r
        .iter()
        .take(8)
        .map(|m| m.as_ref().unwrap().value)
        .collect();
    assert_eq!(v, vec![80.0, 40.0, 60.0, 30.0, 1000.0, 2000.0, 4.0, 8.0]);
    assert_eq!(r[0].as_ref().unwrap().metric_info.unit, "%");
    assert!(matches!(r[8], Err(NvmlError::NotSupported)));

    // MIG instance sample on the parent by GPU instance id
    let g = nvml.device_by_index(3).unwrap();
    let a = g.gpm_mig_sample(1).unwrap();
    std::thread::sleep(Duration::from_millis(120));
    let b = g.gpm_mig_sample(1).unwrap();
    let r = nvml_wrapper::gpm::gpm_metrics_get(
        &nvml,
        &a,
        &b,
        &[
            GpmMetricId::SmUtil,
            GpmMetricId::DramBwUtil,
            GpmMetricId::PcieTxPerSec,
        ],
    )
    .unwrap();
    assert_eq!(r[0].as_ref().unwrap().value, 33.0);
    assert_eq!(r[1].as_ref().unwrap().value, 12.0);
    assert!(r[2].is_err());
    assert!(matches!(g.gpm_mig_sample(4), Err(NvmlError::InvalidArg)));
}

#[test]
fn xid_events() {
    let s = session();
    let nvml = s.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert!(
        d.supported_event_types()
            .unwrap()
            .contains(EventTypes::CRITICAL_XID_ERROR)
    );
    let set = nvml.create_event_set().unwrap();
    let set = d
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .unwrap();
    let e = set.wait(100).unwrap();
    assert_eq!(e.event_type, EventTypes::CRITICAL_XID_ERROR);
    assert_eq!(e.event_data, Some(XidError::Value(79)));
    assert_eq!(e.device.index().unwrap(), 0);
    let e = set.wait(100).unwrap();
    assert_eq!(e.event_data, Some(XidError::Value(13)));
    let t0 = std::time::Instant::now();
    assert!(
        matches!(set.wait(60), Err(NvmlError::Timeout)),
        "xid 31 is far in the future"
    );
    assert!(t0.elapsed() >= Duration::from_millis(50));
    // ECC events on a separate set
    let set2 = nvml.create_event_set().unwrap();
    let set2 = d
        .register_events(EventTypes::SINGLE_BIT_ECC_ERROR, set2)
        .unwrap();
    let e = set2.wait(10).unwrap();
    assert_eq!(e.event_type, EventTypes::SINGLE_BIT_ECC_ERROR);
}

#[test]
fn lost_gpu() {
    let s = session();
    let nvml = s.nvml();
    assert_eq!(nvml.device_count().unwrap(), 4, "the count does not change");
    assert!(matches!(nvml.device_by_index(1), Err(NvmlError::GpuLost)));
    assert!(matches!(
        nvml.device_by_uuid("GPU-00000000-0000-4000-8000-000000000001"),
        Err(NvmlError::GpuLost)
    ));
    // a handle obtained some other way (raw) also fails every call
    // SAFETY: raw NVML calls with made-up handles (the simulator decodes
    // handles, never dereferences them), pointers to locals with their true
    // sizes, and one deliberate null it must refuse; the static error string
    // is NUL-terminated.
    unsafe {
        let lib = nvml.lib();
        let mut t = 0u32;
        let fake = 2usize as nvml_wrapper_sys::bindings::nvmlDevice_t;
        assert_eq!(lib.nvmlDeviceGetTemperature(fake, 0, &mut t), 15);
        let mut buf = [0 as std::ffi::c_char; 96];
        assert_eq!(lib.nvmlDeviceGetName(fake, buf.as_mut_ptr(), 96), 15);
        // invalid handles
        let bad = 77usize as nvml_wrapper_sys::bindings::nvmlDevice_t;
        assert_eq!(lib.nvmlDeviceGetTemperature(bad, 0, &mut t), 2);
        assert_eq!(
            lib.nvmlDeviceGetTemperature(std::ptr::null_mut(), 0, &mut t),
            2
        );
        // null output pointer
        let ok = 1usize as nvml_wrapper_sys::bindings::nvmlDevice_t;
        assert_eq!(lib.nvmlDeviceGetTemperature(ok, 0, std::ptr::null_mut()), 2);
        // too-small buffer
        assert_eq!(lib.nvmlDeviceGetName(ok, buf.as_mut_ptr(), 4), 7);
    }
}

#[test]
fn field_values_ecc_remap_nvlink() {
    let s = session();
    let nvml = s.nvml();
    let d = nvml.device_by_index(0).unwrap();
    field_values(&d);
    nvlink_throughput_by_link_and_remapped_rows(&nvml, &d);
    ecc_counts_and_retired_pages(&d);
    nvlink_state_and_errors(&d, &nvml.device_by_index(2).unwrap());
}

fn field_values(d: &Device) {
    let ids = [
        FieldId(82),
        FieldId(142),
        FieldId(143),
        FieldId(144),
        FieldId(75),
        FieldId(251),
        FieldId(9999),
    ];
    let r = d.field_values_for(&ids).unwrap();
    let val = |i: usize| r[i].as_ref().unwrap().value.as_ref().unwrap().clone();
    assert!(matches!(val(0), SampleValue::U32(70)));
    assert!(matches!(val(1), SampleValue::U32(2)));
    assert!(matches!(val(2), SampleValue::U32(0)));
    assert!(matches!(val(3), SampleValue::U32(1)));
    assert!(matches!(val(4), SampleValue::U64(100_000_000_000)));
    assert!(matches!(val(5), SampleValue::U64(100_000_000_000)));
    assert!(matches!(
        r[6].as_ref().unwrap().value,
        Err(NvmlError::NotSupported)
    ));
}

/// The wrapper cannot set `scopeId`: raw calls with scopeId = link.
fn nvlink_throughput_by_link_and_remapped_rows(nvml: &Nvml, d: &Device) {
    // SAFETY: an all-zero nvmlFieldValue_t is valid plain data; the raw
    // calls get a live handle and pointers to locals with their true counts.
    unsafe {
        let mut vals: [nvml_wrapper_sys::bindings::nvmlFieldValue_t; 3] = std::mem::zeroed();
        vals[0].fieldId = 138;
        vals[0].scopeId = 0;
        vals[1].fieldId = 139;
        vals[1].scopeId = 3;
        vals[2].fieldId = 138;
        vals[2].scopeId = 4;
        assert_eq!(
            nvml.lib()
                .nvmlDeviceGetFieldValues(d.handle(), 3, vals.as_mut_ptr()),
            0
        );
        assert_eq!(vals[0].nvmlReturn, 0);
        assert!(
            near(vals[0].value.ullVal as f64, 1024.0 * T, 1024.0 * 5.0),
            "{}",
            vals[0].value.ullVal
        );
        assert!(near(vals[1].value.ullVal as f64, 2048.0 * T, 2048.0 * 5.0));
        assert_eq!(vals[2].nvmlReturn, 2, "link 4 does not exist");
        let (mut c, mut u, mut p, mut f) = (9u32, 9u32, 9u32, 9u32);
        assert_eq!(
            nvml.lib()
                .nvmlDeviceGetRemappedRows(d.handle(), &mut c, &mut u, &mut p, &mut f),
            0
        );
        assert_eq!((c, u, p, f), (2, 0, 1, 0));
    }
}

fn ecc_counts_and_retired_pages(d: &Device) {
    assert_eq!(
        d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
            .unwrap(),
        3
    );
    assert_eq!(
        d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
            .unwrap(),
        0
    );
    assert_eq!(
        d.memory_error_counter(
            MemoryError::Corrected,
            EccCounter::Aggregate,
            MemoryLocation::Device
        )
        .unwrap(),
        3
    );
    assert!(d.is_ecc_enabled().unwrap().currently_enabled);
    let pages = d
        .retired_pages(RetirementCause::MultipleSingleBitEccErrors)
        .unwrap();
    assert_eq!(pages.len(), 2);
    assert!(
        d.retired_pages(RetirementCause::DoubleBitEccError)
            .unwrap()
            .is_empty()
    );
    assert!(!d.are_pages_pending_retired().unwrap());
}

/// GPU 0's NVLinks; `volta` has no row remapping and no NVLink.
fn nvlink_state_and_errors(d: &Device, volta: &Device) {
    let l1 = d.link_wrapper_for(1);
    assert!(l1.is_active().unwrap());
    assert_eq!(l1.error_counter(ErrorCounter::DlCrcFlit).unwrap(), 2);
    assert_eq!(l1.error_counter(ErrorCounter::DlReplay).unwrap(), 0);
    assert!(d.link_wrapper_for(4).is_active().is_err());
    assert!(matches!(
        volta.link_wrapper_for(0).is_active(),
        Err(NvmlError::NotSupported)
    ));
}

#[test]
fn init_shutdown_reference_counting() {
    let s = session();
    let path = crate::common::lib_path();
    let a = s.nvml();
    let b = Nvml::builder()
        .lib_path(&OsString::from(&path))
        .init()
        .unwrap();
    drop(a);
    assert_eq!(
        b.device_count().unwrap(),
        4,
        "still initialised after one shutdown"
    );
    drop(b);
    // SAFETY: loading the simulator library and calling its raw entry points
    // with a pointer to a local.
    unsafe {
        let lib = NvmlLib::new(&path).unwrap();
        let mut n = 0u32;
        assert_eq!(lib.nvmlDeviceGetCount_v2(&mut n), 1, "uninitialised");
        assert_eq!(lib.nvmlShutdown(), 1);
        assert_eq!(lib.nvmlInit_v2(), 0);
        assert_eq!(lib.nvmlInitWithFlags(0), 0);
        assert_eq!(lib.nvmlDeviceGetCount_v2(&mut n), 0);
        assert_eq!(n, 4);
        assert_eq!(lib.nvmlShutdown(), 0);
        assert_eq!(lib.nvmlDeviceGetCount_v2(&mut n), 0);
        assert_eq!(lib.nvmlShutdown(), 0);
        assert_eq!(lib.nvmlDeviceGetCount_v2(&mut n), 1);
        assert_eq!(lib.nvmlShutdown(), 1);
        let msg = std::ffi::CStr::from_ptr(lib.nvmlErrorString(15))
            .to_str()
            .unwrap();
        assert_eq!(msg, "GPU is lost");
    }
}

#[test]
fn invalid_scenario_fails_init() {
    let s = crate::common::Session::new(Some("gpus: [ { model: x } ]\n"), None);
    let path = crate::common::lib_path();
    // SAFETY: dlopen/dlsym of the simulator library with NUL-terminated
    // names; the symbol is `gpuscale_sim_last_error`, whose C signature the
    // transmute states; the buffer is 1024 bytes as passed, and NUL-terminated
    // by the call; the handle is closed once.
    unsafe {
        // keep the library loaded across the failed init
        let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let h = libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null());
        let r = Nvml::builder().lib_path(&OsString::from(&path)).init();
        assert!(matches!(r, Err(NvmlError::Unknown)), "{r:?}");
        let sym = libc::dlsym(h, c"gpuscale_sim_last_error".as_ptr());
        assert!(!sym.is_null());
        let f: unsafe extern "C" fn(*mut std::ffi::c_char, u32) -> u32 = std::mem::transmute(sym);
        let mut buf = vec![0 as std::ffi::c_char; 1024];
        assert_eq!(f(buf.as_mut_ptr(), 1024), 0);
        let msg = std::ffi::CStr::from_ptr(buf.as_ptr())
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            msg.contains("scenario.yaml:1:9: gpus[0]: missing field `uuid`"),
            "{msg}"
        );
        libc::dlclose(h);
    }
    drop(s);
    // a valid scenario afterwards initialises again
    let s = session();
    assert_eq!(s.nvml().device_count().unwrap(), 4);
}
