//! Compile-time check: every exported NVML function has exactly the C
//! signature nvml-wrapper-sys declares for it (argument and return types).
//! Regenerate the list when adding exports. Legacy names that nvml-wrapper-sys
//! only declares behind its `legacy-functions` feature (nvmlInit,
//! nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex, ...) are thin aliases of
//! the checked functions.
#![allow(clippy::missing_safety_doc)]

use gpuscale_nvml_sim::ffi::*;
use nvml_wrapper_sys::bindings::NvmlLib;

use std::marker::PhantomData;

/// The function-pointer type of the `NvmlLib` field selected by `field`.
fn field_type<T, E>(_field: for<'a> fn(&'a NvmlLib) -> &'a Result<T, E>) -> PhantomData<T> {
    PhantomData
}

/// Compiles only when `f` coerces to `T`.
fn same<T>(_: PhantomData<T>, _f: T) {}

macro_rules! sig {
    ($name:ident, $module:ident) => {{
        let t = field_type(|l| &l.$name);
        same(t, $module::$name);
    }};
}

#[test]
fn init_signatures_match_bindings() {
    sig!(nvmlErrorString, init);
    sig!(nvmlInitWithFlags, init);
    sig!(nvmlInit_v2, init);
    sig!(nvmlShutdown, init);
    sig!(nvmlSystemGetCudaDriverVersion, init);
    sig!(nvmlSystemGetCudaDriverVersion_v2, init);
    sig!(nvmlSystemGetDriverVersion, init);
    sig!(nvmlSystemGetNVMLVersion, init);
    sig!(nvmlSystemGetProcessName, init);
}

#[test]
fn device_signatures_match_bindings() {
    sig!(nvmlDeviceGetArchitecture, device);
    sig!(nvmlDeviceGetBrand, device);
    sig!(nvmlDeviceGetComputeMode, device);
    sig!(nvmlDeviceGetCount_v2, device);
    sig!(nvmlDeviceGetCudaComputeCapability, device);
    sig!(nvmlDeviceGetHandleByIndex_v2, device);
    sig!(nvmlDeviceGetHandleByPciBusId_v2, device);
    sig!(nvmlDeviceGetHandleBySerial, device);
    sig!(nvmlDeviceGetHandleByUUID, device);
    sig!(nvmlDeviceGetIndex, device);
    sig!(nvmlDeviceGetMinorNumber, device);
    sig!(nvmlDeviceGetName, device);
    sig!(nvmlDeviceGetPciInfo_v3, device);
    sig!(nvmlDeviceGetPersistenceMode, device);
    sig!(nvmlDeviceGetSerial, device);
    sig!(nvmlDeviceGetUUID, device);
    sig!(nvmlDeviceGetVbiosVersion, device);
}

#[test]
fn telemetry_signatures_match_bindings() {
    sig!(nvmlDeviceGetClock, telemetry);
    sig!(nvmlDeviceGetClockInfo, telemetry);
    sig!(nvmlDeviceGetCurrentClocksEventReasons, telemetry);
    sig!(nvmlDeviceGetCurrentClocksThrottleReasons, telemetry);
    sig!(nvmlDeviceGetDecoderUtilization, telemetry);
    sig!(nvmlDeviceGetEncoderUtilization, telemetry);
    sig!(nvmlDeviceGetEnforcedPowerLimit, telemetry);
    sig!(nvmlDeviceGetFanSpeed, telemetry);
    sig!(nvmlDeviceGetFanSpeed_v2, telemetry);
    sig!(nvmlDeviceGetMaxClockInfo, telemetry);
    sig!(nvmlDeviceGetMaxCustomerBoostClock, telemetry);
    sig!(nvmlDeviceGetMemoryInfo, telemetry);
    sig!(nvmlDeviceGetMemoryInfo_v2, telemetry);
    sig!(nvmlDeviceGetNumFans, telemetry);
    sig!(nvmlDeviceGetPerformanceState, telemetry);
    sig!(nvmlDeviceGetPowerManagementDefaultLimit, telemetry);
    sig!(nvmlDeviceGetPowerManagementLimit, telemetry);
    sig!(nvmlDeviceGetPowerManagementLimitConstraints, telemetry);
    sig!(nvmlDeviceGetPowerState, telemetry);
    sig!(nvmlDeviceGetPowerUsage, telemetry);
    sig!(nvmlDeviceGetSupportedClocksEventReasons, telemetry);
    sig!(nvmlDeviceGetSupportedClocksThrottleReasons, telemetry);
    sig!(nvmlDeviceGetTemperature, telemetry);
    sig!(nvmlDeviceGetTemperatureThreshold, telemetry);
    sig!(nvmlDeviceGetTotalEnergyConsumption, telemetry);
    sig!(nvmlDeviceGetUtilizationRates, telemetry);
    sig!(nvmlDeviceGetViolationStatus, telemetry);
}

#[test]
fn links_signatures_match_bindings() {
    sig!(nvmlDeviceGetCurrPcieLinkGeneration, links);
    sig!(nvmlDeviceGetCurrPcieLinkWidth, links);
    sig!(nvmlDeviceGetFieldValues, links);
    sig!(nvmlDeviceGetMaxPcieLinkGeneration, links);
    sig!(nvmlDeviceGetMaxPcieLinkWidth, links);
    sig!(nvmlDeviceGetNvLinkErrorCounter, links);
    sig!(nvmlDeviceGetNvLinkState, links);
    sig!(nvmlDeviceGetNvLinkVersion, links);
    sig!(nvmlDeviceGetPcieReplayCounter, links);
    sig!(nvmlDeviceGetPcieThroughput, links);
}

#[test]
fn errors_signatures_match_bindings() {
    sig!(nvmlDeviceGetEccMode, errors);
    sig!(nvmlDeviceGetMemoryErrorCounter, errors);
    sig!(nvmlDeviceGetRemappedRows, errors);
    sig!(nvmlDeviceGetRetiredPages, errors);
    sig!(nvmlDeviceGetRetiredPagesPendingStatus, errors);
    sig!(nvmlDeviceGetRetiredPages_v2, errors);
    sig!(nvmlDeviceGetTotalEccErrors, errors);
}

#[test]
fn processes_signatures_match_bindings() {
    sig!(nvmlDeviceGetComputeRunningProcesses_v3, processes);
    sig!(nvmlDeviceGetGraphicsRunningProcesses_v3, processes);
    sig!(nvmlDeviceGetMPSComputeRunningProcesses_v3, processes);
    sig!(nvmlDeviceGetProcessUtilization, processes);
}

#[test]
fn mig_signatures_match_bindings() {
    sig!(nvmlDeviceGetComputeInstanceId, mig);
    sig!(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, mig);
    sig!(nvmlDeviceGetGpuInstanceId, mig);
    sig!(nvmlDeviceGetMaxMigDeviceCount, mig);
    sig!(nvmlDeviceGetMigDeviceHandleByIndex, mig);
    sig!(nvmlDeviceGetMigMode, mig);
    sig!(nvmlDeviceIsMigDeviceHandle, mig);
}

#[test]
fn events_signatures_match_bindings() {
    sig!(nvmlDeviceGetSupportedEventTypes, events);
    sig!(nvmlDeviceRegisterEvents, events);
    sig!(nvmlEventSetCreate, events);
    sig!(nvmlEventSetFree, events);
    sig!(nvmlEventSetWait_v2, events);
}

#[test]
fn gpm_signatures_match_bindings() {
    sig!(nvmlGpmMetricsGet, gpm);
    sig!(nvmlGpmMigSampleGet, gpm);
    sig!(nvmlGpmQueryDeviceSupport, gpm);
    sig!(nvmlGpmQueryIfStreamingEnabled, gpm);
    sig!(nvmlGpmSampleAlloc, gpm);
    sig!(nvmlGpmSampleFree, gpm);
    sig!(nvmlGpmSampleGet, gpm);
}
