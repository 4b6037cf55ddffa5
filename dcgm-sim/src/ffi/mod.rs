//! The exported DCGM C functions.
//!
//! Every function runs inside [`guard`]: a panic becomes
//! DCGM_ST_GENERIC_ERROR instead of aborting the process. Each call that a
//! real libdcgm sends to the host engine sends one request line to the
//! simulated one and waits for its answer, so a stopped host engine fails
//! the call (DCGM_ST_CONNECTION_NOT_VALID) and a hanging one blocks it.
//!
//! Safety: every exported function has the contract of the DCGM function it
//! implements: each pointer argument is null or valid for what DCGM does
//! with it (a write of the out type, `count` entries of an array, a
//! NUL-terminated string). The `// SAFETY:` comments lean on that contract.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::state;
use gpuscale_dcgm_abi::*;

pub mod groups;
pub mod values;

pub(crate) type R = Result<(), dcgmReturn_t>;

pub(crate) fn guard(f: impl FnOnce() -> R) -> dcgmReturn_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => DCGM_ST_OK,
        Ok(Err(e)) => e,
        Err(_) => DCGM_ST_GENERIC_ERROR,
    }
}

/// Writes `v` through `p`; DCGM_ST_BADPARAM when null.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> R {
    if p.is_null() {
        return Err(DCGM_ST_BADPARAM);
    }
    // SAFETY: non-null and valid per the caller's contract (the DCGM API).
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// Reads a C string argument.
///
/// # Safety
/// `p` is null or a valid NUL-terminated string.
pub(crate) unsafe fn get_str<'a>(p: *const c_char) -> Result<&'a str, dcgmReturn_t> {
    if p.is_null() {
        return Err(DCGM_ST_BADPARAM);
    }
    // SAFETY: non-null and NUL-terminated per this function's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| DCGM_ST_BADPARAM)
}

#[unsafe(no_mangle)]
pub extern "C" fn dcgmInit() -> dcgmReturn_t {
    guard(|| match state::init() {
        DCGM_ST_OK => Ok(()),
        e => Err(e),
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcgmShutdown() -> dcgmReturn_t {
    guard(|| match state::shutdown() {
        DCGM_ST_OK => Ok(()),
        e => Err(e),
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dcgmConnect_v2(
    ip_address: *const c_char,
    params: *mut dcgmConnectV2Params_v2,
    handle: *mut dcgmHandle_t,
) -> dcgmReturn_t {
    guard(|| {
        // SAFETY: a parameter of this function (see the module's contract).
        let address = unsafe { get_str(ip_address) }?;
        if params.is_null() || handle.is_null() {
            return Err(DCGM_ST_BADPARAM);
        }
        // SAFETY: non-null (checked above) and valid per the DCGM API.
        let p = unsafe { params.read_unaligned() };
        if p.version != dcgmConnectV2Params_version2 {
            return Err(DCGM_ST_VER_MISMATCH);
        }
        if p.addressIsUnixSocket != 0 {
            return Err(DCGM_ST_NOT_SUPPORTED);
        }
        let h = state::connect(address, p.timeoutMs)?;
        // SAFETY: an out-pointer parameter of this function.
        unsafe { put(handle, h) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcgmDisconnect(handle: dcgmHandle_t) -> dcgmReturn_t {
    guard(|| state::disconnect(handle))
}

#[unsafe(no_mangle)]
pub extern "C" fn errorString(result: dcgmReturn_t) -> *const c_char {
    let s: &'static CStr = match result {
        DCGM_ST_OK => c"Success",
        DCGM_ST_BADPARAM => c"Bad parameter passed to function",
        DCGM_ST_GENERIC_ERROR => c"Generic unspecified error",
        DCGM_ST_NOT_SUPPORTED => c"This request is not supported",
        DCGM_ST_INIT_ERROR => c"DCGM initialization error",
        DCGM_ST_UNINITIALIZED => c"Uninitialized",
        DCGM_ST_TIMEOUT => c"Timeout",
        DCGM_ST_VER_MISMATCH => c"API version mismatch",
        DCGM_ST_UNKNOWN_FIELD => c"Unknown field id",
        DCGM_ST_NO_DATA => c"No data is available",
        DCGM_ST_NOT_WATCHED => c"Field is not being updated",
        DCGM_ST_CONNECTION_NOT_VALID => {
            c"The connection to the host engine is not valid any longer"
        }
        DCGM_ST_MAX_LIMIT => c"Max limit reached for the object",
        DCGM_ST_INSUFFICIENT_SIZE => c"An input argument is not large enough",
        DCGM_ST_PROFILING_NOT_SUPPORTED => {
            c"Profiling is not supported for this group of GPUs or GPU"
        }
        DCGM_ST_PROFILING_MULTI_PASS => {
            c"The requested profiling metrics cannot be collected in a single pass"
        }
        _ => c"Unknown error",
    };
    s.as_ptr()
}

// Every exported function has the C signature the reader calls it through
// (`gpuscale_dcgm_abi::functions`): a mismatch fails the build.
const _: () = {
    use gpuscale_dcgm_abi::functions as c;
    let _: c::dcgmInit = dcgmInit;
    let _: c::dcgmShutdown = dcgmShutdown;
    let _: c::dcgmConnect_v2 = dcgmConnect_v2;
    let _: c::dcgmDisconnect = dcgmDisconnect;
    let _: c::errorString = errorString;
    let _: c::dcgmGetAllSupportedDevices = groups::dcgmGetAllSupportedDevices;
    let _: c::dcgmGetGpuInstanceHierarchy = groups::dcgmGetGpuInstanceHierarchy;
    let _: c::dcgmGroupCreate = groups::dcgmGroupCreate;
    let _: c::dcgmGroupAddEntity = groups::dcgmGroupAddEntity;
    let _: c::dcgmGroupDestroy = groups::dcgmGroupDestroy;
    let _: c::dcgmFieldGroupCreate = groups::dcgmFieldGroupCreate;
    let _: c::dcgmFieldGroupDestroy = groups::dcgmFieldGroupDestroy;
    let _: c::dcgmWatchFields = groups::dcgmWatchFields;
    let _: c::dcgmProfGetSupportedMetricGroups = groups::dcgmProfGetSupportedMetricGroups;
    let _: c::dcgmEntitiesGetLatestValues = values::dcgmEntitiesGetLatestValues;
};
