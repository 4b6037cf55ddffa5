//! The exported NVML C functions.
//!
//! Every function runs inside [`guard`]: a panic becomes NVML_ERROR_UNKNOWN
//! instead of aborting the process. Pointers are checked for null; device
//! handles are opaque integers (see `sim::decode`) and never dereferenced.
//!
//! Safety: every exported function has the contract of the NVML function it
//! implements: each pointer argument is null or valid for what NVML does with
//! it (a write of the out type, `len` bytes of a buffer, `*count` entries of an
//! array, a NUL-terminated string). The `// SAFETY:` comments lean on that
//! contract; out-pointers are written through the `put!` and `put_str!`
//! macros, which carry the one comment they all share.
#![allow(non_snake_case, non_upper_case_globals, clippy::missing_safety_doc)]

use std::ffi::{CStr, c_char, c_uint};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use nvml_wrapper_sys::bindings::*;

use crate::scenario::{Feature, Gpu, MigInstance};
use crate::sim::{self, Dev, World};

/// `put(p, v)` where `p` is an out-pointer parameter of the function the
/// macro is used in: an exported NVML function, or an unsafe helper with the
/// same contract. `v` is evaluated outside the unsafe block. One macro instead
/// of sixty unsafe blocks that would all say the same thing.
macro_rules! put {
    ($p:ident, $v:expr) => {{
        let v = $v;
        // SAFETY: `$p` is an out-pointer parameter of the enclosing function,
        // which the NVML API (or the helper's `# Safety` contract) has the
        // caller pass as null (refused by `put`) or valid for a write of its
        // type.
        unsafe { $crate::ffi::put($p, v) }
    }};
}

/// `put_str(buf, len, s)` where `buf` and `len` are the out-buffer parameters
/// of the exported NVML function the macro is used in.
macro_rules! put_str {
    ($buf:ident, $len:ident, $s:expr) => {{
        let s = $s;
        // SAFETY: `$buf` and `$len` are parameters of the enclosing exported
        // function, which the NVML API has the caller pass as null (refused
        // by `put_str`) or a buffer valid for `$len` bytes.
        unsafe { $crate::ffi::put_str($buf, $len, s) }
    }};
}

pub mod device;
pub mod errors;
pub mod events;
pub mod gpm;
pub mod init;
pub mod links;
pub mod mig;
pub mod processes;
pub mod telemetry;

pub(crate) type R = Result<(), nvmlReturn_t>;

pub(crate) const SUCCESS: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
pub(crate) const INVALID_ARGUMENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
pub(crate) const NOT_SUPPORTED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
pub(crate) const NOT_FOUND: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
pub(crate) const INSUFFICIENT_SIZE: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
pub(crate) const GPU_IS_LOST: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
pub(crate) const UNKNOWN: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNKNOWN;

/// Run `f`, mapping `Ok` to NVML_SUCCESS and a panic to NVML_ERROR_UNKNOWN.
pub(crate) fn guard(f: impl FnOnce() -> R) -> nvmlReturn_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => UNKNOWN,
    }
}

/// Write `v` through `p`; NVML_ERROR_INVALID_ARGUMENT when null.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> R {
    if p.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null and valid per the caller's contract (the NVML API).
    unsafe { p.write_unaligned(v) };
    Ok(())
}

pub(crate) fn nonnull<T>(p: *const T) -> R {
    if p.is_null() {
        Err(INVALID_ARGUMENT)
    } else {
        Ok(())
    }
}

/// Copy `s` NUL-terminated into `buf` of `len` bytes.
///
/// # Safety
/// `buf` is null or valid for `len` bytes.
pub(crate) unsafe fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> R {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    let bytes = s.as_bytes();
    if bytes.len() + 1 > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: `buf` is non-null (checked above) and valid for `len` bytes
    // (this function's contract), and len >= bytes.len() + 1.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        buf.add(bytes.len()).write(0);
    }
    Ok(())
}

/// Read a C string argument.
///
/// # Safety
/// `p` is null or a valid NUL-terminated string.
pub(crate) unsafe fn get_str<'a>(p: *const c_char) -> Result<&'a str, nvmlReturn_t> {
    if p.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: `p` is non-null (checked above) and NUL-terminated (this
    // function's contract); the string outlives the call that passed it.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| INVALID_ARGUMENT)
}

/// The state of one call: the world and "now".
pub(crate) struct Ctx {
    pub w: Arc<World>,
    pub t: f64,
}

/// A resolved device handle.
pub(crate) struct DevRef<'a> {
    pub idx: usize,
    pub gpu: &'a Gpu,
    /// `Some((mig index, instance))` for a MIG handle.
    pub mig: Option<(usize, &'a MigInstance)>,
}

impl Ctx {
    pub fn new() -> Result<Ctx, nvmlReturn_t> {
        let w = sim::world()?;
        let t = w.now();
        Ok(Ctx { w, t })
    }

    /// Resolve any handle (GPU or MIG); GPU_IS_LOST after the GPU's `lost_at_s`.
    pub fn dev(&self, h: nvmlDevice_t) -> Result<DevRef<'_>, nvmlReturn_t> {
        let gpus = &self.w.scenario.gpus;
        let (idx, mig) = match sim::decode(h).ok_or(INVALID_ARGUMENT)? {
            Dev::Gpu(i) => (i, None),
            Dev::Mig(i, j) => (i, Some(j)),
        };
        let gpu = gpus.get(idx).ok_or(INVALID_ARGUMENT)?;
        let mig = match mig {
            Some(j) => Some((j, gpu.mig.get(j).ok_or(INVALID_ARGUMENT)?)),
            None => None,
        };
        if gpu.is_lost(self.t) {
            return Err(GPU_IS_LOST);
        }
        Ok(DevRef { idx, gpu, mig })
    }

    /// Resolve a physical GPU handle; MIG handles and features listed in
    /// `unsupported` give NVML_ERROR_NOT_SUPPORTED.
    pub fn gpu(
        &self,
        h: nvmlDevice_t,
        feature: Option<Feature>,
    ) -> Result<(usize, &Gpu), nvmlReturn_t> {
        let d = self.dev(h)?;
        if d.mig.is_some() {
            return Err(NOT_SUPPORTED);
        }
        if let Some(f) = feature
            && d.gpu.unsupported(f)
        {
            return Err(NOT_SUPPORTED);
        }
        Ok((d.idx, d.gpu))
    }
}

/// Round a non-negative float to an unsigned integer, saturating.
pub(crate) fn to_u32(v: f64) -> c_uint {
    if v.is_nan() || v <= 0.0 {
        0
    } else if v >= u32::MAX as f64 {
        u32::MAX
    } else {
        v.round() as u32
    }
}

pub(crate) fn to_u64(v: f64) -> u64 {
    if v.is_nan() || v <= 0.0 {
        0
    } else if v >= u64::MAX as f64 {
        u64::MAX
    } else {
        v.round() as u64
    }
}

pub(crate) const MIB: u64 = 1024 * 1024;
