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

/// `sig!` for each function `$module` exports.
macro_rules! sigs {
    ($module:ident: $($name:ident)*) => {{
        $(sig!($name, $module);)*
    }};
}

#[test]
fn exported_signatures_match_bindings() {
    sigs! { init:
        nvmlErrorString nvmlInitWithFlags nvmlInit_v2 nvmlShutdown nvmlSystemGetCudaDriverVersion
        nvmlSystemGetCudaDriverVersion_v2 nvmlSystemGetDriverVersion nvmlSystemGetNVMLVersion
        nvmlSystemGetProcessName
    }
    sigs! { device:
        nvmlDeviceGetArchitecture nvmlDeviceGetBrand nvmlDeviceGetComputeMode nvmlDeviceGetCount_v2
        nvmlDeviceGetCudaComputeCapability nvmlDeviceGetHandleByIndex_v2
        nvmlDeviceGetHandleByPciBusId_v2 nvmlDeviceGetHandleBySerial nvmlDeviceGetHandleByUUID
        nvmlDeviceGetIndex nvmlDeviceGetMinorNumber nvmlDeviceGetName nvmlDeviceGetPciInfo_v3
        nvmlDeviceGetPersistenceMode nvmlDeviceGetSerial nvmlDeviceGetUUID
        nvmlDeviceGetVbiosVersion
    }
    sigs! { telemetry:
        nvmlDeviceGetClock nvmlDeviceGetClockInfo nvmlDeviceGetCurrentClocksEventReasons
        nvmlDeviceGetCurrentClocksThrottleReasons nvmlDeviceGetDecoderUtilization
        nvmlDeviceGetEncoderUtilization nvmlDeviceGetEnforcedPowerLimit nvmlDeviceGetFanSpeed
        nvmlDeviceGetFanSpeed_v2 nvmlDeviceGetMaxClockInfo nvmlDeviceGetMaxCustomerBoostClock
        nvmlDeviceGetMemoryInfo nvmlDeviceGetMemoryInfo_v2 nvmlDeviceGetNumFans
        nvmlDeviceGetPerformanceState nvmlDeviceGetPowerManagementDefaultLimit
        nvmlDeviceGetPowerManagementLimit nvmlDeviceGetPowerManagementLimitConstraints
        nvmlDeviceGetPowerState nvmlDeviceGetPowerUsage nvmlDeviceGetSupportedClocksEventReasons
        nvmlDeviceGetSupportedClocksThrottleReasons nvmlDeviceGetTemperature
        nvmlDeviceGetTemperatureThreshold nvmlDeviceGetTotalEnergyConsumption
        nvmlDeviceGetUtilizationRates nvmlDeviceGetViolationStatus
    }
    sigs! { links:
        nvmlDeviceGetCurrPcieLinkGeneration nvmlDeviceGetCurrPcieLinkWidth nvmlDeviceGetFieldValues
        nvmlDeviceGetMaxPcieLinkGeneration nvmlDeviceGetMaxPcieLinkWidth
        nvmlDeviceGetNvLinkErrorCounter nvmlDeviceGetNvLinkState nvmlDeviceGetNvLinkVersion
        nvmlDeviceGetPcieReplayCounter nvmlDeviceGetPcieThroughput
    }
    sigs! { errors:
        nvmlDeviceGetEccMode nvmlDeviceGetMemoryErrorCounter nvmlDeviceGetRemappedRows
        nvmlDeviceGetRetiredPages nvmlDeviceGetRetiredPagesPendingStatus
        nvmlDeviceGetRetiredPages_v2 nvmlDeviceGetTotalEccErrors
    }
    sigs! { processes:
        nvmlDeviceGetComputeRunningProcesses_v3 nvmlDeviceGetGraphicsRunningProcesses_v3
        nvmlDeviceGetMPSComputeRunningProcesses_v3 nvmlDeviceGetProcessUtilization
    }
    sigs! { mig:
        nvmlDeviceGetComputeInstanceId nvmlDeviceGetDeviceHandleFromMigDeviceHandle
        nvmlDeviceGetGpuInstanceId nvmlDeviceGetMaxMigDeviceCount
        nvmlDeviceGetMigDeviceHandleByIndex nvmlDeviceGetMigMode nvmlDeviceIsMigDeviceHandle
    }
    sigs! { events:
        nvmlDeviceGetSupportedEventTypes nvmlDeviceRegisterEvents nvmlEventSetCreate
        nvmlEventSetFree nvmlEventSetWait_v2
    }
    sigs! { gpm:
        nvmlGpmMetricsGet nvmlGpmMigSampleGet nvmlGpmQueryDeviceSupport
        nvmlGpmQueryIfStreamingEnabled nvmlGpmSampleAlloc nvmlGpmSampleFree nvmlGpmSampleGet
    }
}
