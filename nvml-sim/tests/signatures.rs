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
fn exported_signatures_match_bindings() {
    sig!(nvmlDeviceGetArchitecture, device);
    sig!(nvmlDeviceGetBrand, device);
    sig!(nvmlDeviceGetClock, telemetry);
    sig!(nvmlDeviceGetClockInfo, telemetry);
    sig!(nvmlDeviceGetComputeInstanceId, mig);
    sig!(nvmlDeviceGetComputeMode, device);
    sig!(nvmlDeviceGetComputeRunningProcesses_v3, processes);
    sig!(nvmlDeviceGetCount_v2, device);
    sig!(nvmlDeviceGetCudaComputeCapability, device);
    sig!(nvmlDeviceGetCurrPcieLinkGeneration, links);
    sig!(nvmlDeviceGetCurrPcieLinkWidth, links);
    sig!(nvmlDeviceGetCurrentClocksEventReasons, telemetry);
    sig!(nvmlDeviceGetCurrentClocksThrottleReasons, telemetry);
    sig!(nvmlDeviceGetDecoderUtilization, telemetry);
    sig!(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, mig);
    sig!(nvmlDeviceGetEccMode, errors);
    sig!(nvmlDeviceGetEncoderUtilization, telemetry);
    sig!(nvmlDeviceGetEnforcedPowerLimit, telemetry);
    sig!(nvmlDeviceGetFanSpeed, telemetry);
    sig!(nvmlDeviceGetFanSpeed_v2, telemetry);
    sig!(nvmlDeviceGetFieldValues, links);
    sig!(nvmlDeviceGetGpuInstanceId, mig);
    sig!(nvmlDeviceGetGraphicsRunningProcesses_v3, processes);
    sig!(nvmlDeviceGetHandleByIndex_v2, device);
    sig!(nvmlDeviceGetHandleByPciBusId_v2, device);
    sig!(nvmlDeviceGetHandleBySerial, device);
    sig!(nvmlDeviceGetHandleByUUID, device);
    sig!(nvmlDeviceGetIndex, device);
    sig!(nvmlDeviceGetMPSComputeRunningProcesses_v3, processes);
    sig!(nvmlDeviceGetMaxClockInfo, telemetry);
    sig!(nvmlDeviceGetMaxCustomerBoostClock, telemetry);
    sig!(nvmlDeviceGetMaxMigDeviceCount, mig);
    sig!(nvmlDeviceGetMaxPcieLinkGeneration, links);
    sig!(nvmlDeviceGetMaxPcieLinkWidth, links);
    sig!(nvmlDeviceGetMemoryErrorCounter, errors);
    sig!(nvmlDeviceGetMemoryInfo, telemetry);
    sig!(nvmlDeviceGetMemoryInfo_v2, telemetry);
    sig!(nvmlDeviceGetMigDeviceHandleByIndex, mig);
    sig!(nvmlDeviceGetMigMode, mig);
    sig!(nvmlDeviceGetMinorNumber, device);
    sig!(nvmlDeviceGetName, device);
    sig!(nvmlDeviceGetNumFans, telemetry);
    sig!(nvmlDeviceGetNvLinkErrorCounter, links);
    sig!(nvmlDeviceGetNvLinkState, links);
    sig!(nvmlDeviceGetNvLinkVersion, links);
    sig!(nvmlDeviceGetPciInfo_v3, device);
    sig!(nvmlDeviceGetPcieReplayCounter, links);
    sig!(nvmlDeviceGetPcieThroughput, links);
    sig!(nvmlDeviceGetPerformanceState, telemetry);
    sig!(nvmlDeviceGetPersistenceMode, device);
    sig!(nvmlDeviceGetPowerManagementDefaultLimit, telemetry);
    sig!(nvmlDeviceGetPowerManagementLimit, telemetry);
    sig!(nvmlDeviceGetPowerManagementLimitConstraints, telemetry);
    sig!(nvmlDeviceGetPowerState, telemetry);
    sig!(nvmlDeviceGetPowerUsage, telemetry);
    sig!(nvmlDeviceGetProcessUtilization, processes);
    sig!(nvmlDeviceGetRemappedRows, errors);
    sig!(nvmlDeviceGetRetiredPages, errors);
    sig!(nvmlDeviceGetRetiredPagesPendingStatus, errors);
    sig!(nvmlDeviceGetRetiredPages_v2, errors);
    sig!(nvmlDeviceGetSerial, device);
    sig!(nvmlDeviceGetSupportedClocksEventReasons, telemetry);
    sig!(nvmlDeviceGetSupportedClocksThrottleReasons, telemetry);
    sig!(nvmlDeviceGetSupportedEventTypes, events);
    sig!(nvmlDeviceGetTemperature, telemetry);
    sig!(nvmlDeviceGetTemperatureThreshold, telemetry);
    sig!(nvmlDeviceGetTotalEccErrors, errors);
    sig!(nvmlDeviceGetTotalEnergyConsumption, telemetry);
    sig!(nvmlDeviceGetUUID, device);
    sig!(nvmlDeviceGetUtilizationRates, telemetry);
    sig!(nvmlDeviceGetVbiosVersion, device);
    sig!(nvmlDeviceGetViolationStatus, telemetry);
    sig!(nvmlDeviceIsMigDeviceHandle, mig);
    sig!(nvmlDeviceRegisterEvents, events);
    sig!(nvmlErrorString, init);
    sig!(nvmlEventSetCreate, events);
    sig!(nvmlEventSetFree, events);
    sig!(nvmlEventSetWait_v2, events);
    sig!(nvmlGpmMetricsGet, gpm);
    sig!(nvmlGpmMigSampleGet, gpm);
    sig!(nvmlGpmQueryDeviceSupport, gpm);
    sig!(nvmlGpmQueryIfStreamingEnabled, gpm);
    sig!(nvmlGpmSampleAlloc, gpm);
    sig!(nvmlGpmSampleFree, gpm);
    sig!(nvmlGpmSampleGet, gpm);
    sig!(nvmlInitWithFlags, init);
    sig!(nvmlInit_v2, init);
    sig!(nvmlShutdown, init);
    sig!(nvmlSystemGetCudaDriverVersion, init);
    sig!(nvmlSystemGetCudaDriverVersion_v2, init);
    sig!(nvmlSystemGetDriverVersion, init);
    sig!(nvmlSystemGetNVMLVersion, init);
    sig!(nvmlSystemGetProcessName, init);
}
