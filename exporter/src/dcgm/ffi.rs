//! DCGM's C API as the reader calls it: `libdcgm.so.4` loaded at run time
//! (libloading), its functions resolved once, and the structures of DCGM 4's
//! `dcgm_structs.h` with their version words. Sizes are asserted against the
//! header's layout.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{CStr, c_char};
use std::path::Path;

use libloading::Library;

pub type Return = i32;
pub type Handle = usize;

pub const ST_OK: Return = 0;
pub const ST_CONNECTION_NOT_VALID: Return = -21;
pub const ST_NOT_WATCHED: Return = -16;
pub const FE_GPU: u32 = 1;
pub const FE_GPU_I: u32 = 4;
pub const GROUP_EMPTY: u32 = 1;
pub const FT_DOUBLE: u16 = b'd' as u16;
pub const FT_INT64: u16 = b'i' as u16;
pub const FT_STRING: u16 = b's' as u16;
pub const FV_FLAG_LIVE_DATA: u32 = 1;
pub const FI_DEV_UUID: u16 = 54;
pub const MAX_NUM_DEVICES: usize = 32;

/// `DCGM_FP64_IS_BLANK`: this and everything above it is no value.
pub const FP64_BLANK: f64 = 140737488355328.0;
/// `DCGM_INT64_IS_BLANK`.
pub const INT64_BLANK: i64 = 0x7ffffffffffffff0;

const fn version(size: usize, ver: u32) -> u32 {
    size as u32 | (ver << 24)
}

#[repr(C)]
pub struct ConnectV2Params {
    pub version: u32,
    pub persistAfterDisconnect: u32,
    pub timeoutMs: u32,
    pub addressIsUnixSocket: u32,
}
pub const CONNECT_V2_PARAMS_VERSION2: u32 = version(size_of::<ConnectV2Params>(), 2);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityPair {
    pub group: u32,
    pub id: u32,
}

#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct ValueUnion(pub [u8; 4096]);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct FieldValueV2 {
    pub version: u32,
    pub entityGroupId: u32,
    pub entityId: u32,
    pub fieldId: u16,
    pub fieldType: u16,
    pub status: i32,
    pub unused: u32,
    pub ts: i64,
    pub value: ValueUnion,
}

impl FieldValueV2 {
    pub const ZERO: FieldValueV2 = FieldValueV2 {
        version: 0,
        entityGroupId: 0,
        entityId: 0,
        fieldId: 0,
        fieldType: 0,
        status: 0,
        unused: 0,
        ts: 0,
        value: ValueUnion([0; 4096]),
    };

    /// The value as a number; None for a blank, a failed status or a string.
    pub fn number(&self) -> Option<f64> {
        if self.status != ST_OK {
            return None;
        }
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.value.0[..8]);
        match self.fieldType {
            FT_DOUBLE => {
                Some(f64::from_ne_bytes(word)).filter(|v| v.is_finite() && *v < FP64_BLANK)
            }
            FT_INT64 => {
                let v = i64::from_ne_bytes(word);
                (v < INT64_BLANK).then_some(v as f64)
            }
            _ => None,
        }
    }

    /// The value as a string; None for a blank (`<<<...>>>`) or another type.
    pub fn text(&self) -> Option<String> {
        if self.status != ST_OK || self.fieldType != FT_STRING {
            return None;
        }
        let s = CStr::from_bytes_until_nul(&self.value.0[..256]).ok()?;
        let s = s.to_str().ok()?;
        (!s.starts_with("<<<")).then(|| s.to_string())
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct MigEntityInfo {
    pub gpuUuid: [c_char; 128],
    pub nvmlGpuIndex: u32,
    pub nvmlInstanceId: u32,
    pub nvmlComputeInstanceId: u32,
    pub nvmlMigProfileId: u32,
    pub nvmlProfileSlices: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct MigHierarchyInfoV2 {
    pub entity: EntityPair,
    pub parent: EntityPair,
    pub info: MigEntityInfo,
}

#[repr(C)]
pub struct MigHierarchyV2 {
    pub version: u32,
    pub count: u32,
    pub entityList: [MigHierarchyInfoV2; 32 * 14],
}
pub const MIG_HIERARCHY_VERSION2: u32 = version(size_of::<MigHierarchyV2>(), 2);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProfMetricGroupInfoV2 {
    pub majorId: u16,
    pub minorId: u16,
    pub numFieldIds: u32,
    pub fieldIds: [u16; 64],
}

#[repr(C)]
pub struct ProfGetMetricGroupsV3 {
    pub version: u32,
    pub unused: u32,
    pub gpuId: u32,
    pub numMetricGroups: u32,
    pub metricGroups: [ProfMetricGroupInfoV2; 10],
}
pub const PROF_GET_METRIC_GROUPS_VERSION3: u32 = version(size_of::<ProfGetMetricGroupsV3>(), 3);

const _: () = assert!(size_of::<ConnectV2Params>() == 16);
const _: () = assert!(size_of::<FieldValueV2>() == 4128);
const _: () = assert!(std::mem::offset_of!(FieldValueV2, ts) == 24);
const _: () = assert!(size_of::<MigHierarchyInfoV2>() == 164);
const _: () = assert!(size_of::<MigHierarchyV2>() == 8 + 164 * 448);
const _: () = assert!(size_of::<ProfGetMetricGroupsV3>() == 16 + 136 * 10);

type FnVoid = unsafe extern "C" fn() -> Return;
type FnConnect = unsafe extern "C" fn(*const c_char, *mut ConnectV2Params, *mut Handle) -> Return;
type FnHandle = unsafe extern "C" fn(Handle) -> Return;
type FnDevices = unsafe extern "C" fn(Handle, *mut u32, *mut i32) -> Return;
type FnHierarchy = unsafe extern "C" fn(Handle, *mut MigHierarchyV2) -> Return;
type FnGroupCreate = unsafe extern "C" fn(Handle, u32, *const c_char, *mut usize) -> Return;
type FnGroupAdd = unsafe extern "C" fn(Handle, usize, u32, u32) -> Return;
type FnDestroy = unsafe extern "C" fn(Handle, usize) -> Return;
type FnFieldGroupCreate =
    unsafe extern "C" fn(Handle, i32, *const u16, *const c_char, *mut usize) -> Return;
type FnWatch = unsafe extern "C" fn(Handle, usize, usize, i64, f64, i32) -> Return;
type FnLatest = unsafe extern "C" fn(
    Handle,
    *const EntityPair,
    u32,
    *const u16,
    u32,
    u32,
    *mut FieldValueV2,
) -> Return;
type FnProfGroups = unsafe extern "C" fn(Handle, *mut ProfGetMetricGroupsV3) -> Return;
type FnErrorString = unsafe extern "C" fn(Return) -> *const c_char;

/// The loaded library and the functions the reader calls.
pub struct Dcgm {
    pub(super) init: FnVoid,
    pub(super) shutdown: FnVoid,
    pub(super) connect: FnConnect,
    pub(super) disconnect: FnHandle,
    pub(super) devices: FnDevices,
    pub(super) hierarchy: FnHierarchy,
    pub(super) group_create: FnGroupCreate,
    pub(super) group_add: FnGroupAdd,
    pub(super) group_destroy: FnDestroy,
    pub(super) field_group_create: FnFieldGroupCreate,
    pub(super) field_group_destroy: FnDestroy,
    pub(super) watch: FnWatch,
    pub(super) latest: FnLatest,
    pub(super) prof_groups: FnProfGroups,
    error_string: FnErrorString,
    // Last: the function pointers above point into it.
    _lib: Library,
}

/// A failed call: the function and DCGM's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub function: &'static str,
    pub code: Return,
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} ({})", self.function, self.message, self.code)
    }
}

macro_rules! sym {
    ($lib:ident, $name:literal) => {{
        // SAFETY: the symbol is DCGM's function of that name, whose C
        // signature (dcgm_agent.h) the field's type spells out.
        let s = unsafe { $lib.get::<_>(concat!($name, "\0").as_bytes()) }
            .map_err(|e| format!("the library has no {}: {e}", $name))?;
        *s
    }};
}

impl Dcgm {
    /// Loads the library at `path` and resolves every function it needs.
    pub fn load(path: &Path) -> Result<Dcgm, String> {
        // SAFETY: loading runs the library's initialisers; a DCGM library
        // (or the simulator) has no initialiser with preconditions.
        let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
        Ok(Dcgm {
            init: sym!(lib, "dcgmInit"),
            shutdown: sym!(lib, "dcgmShutdown"),
            connect: sym!(lib, "dcgmConnect_v2"),
            disconnect: sym!(lib, "dcgmDisconnect"),
            devices: sym!(lib, "dcgmGetAllSupportedDevices"),
            hierarchy: sym!(lib, "dcgmGetGpuInstanceHierarchy"),
            group_create: sym!(lib, "dcgmGroupCreate"),
            group_add: sym!(lib, "dcgmGroupAddEntity"),
            group_destroy: sym!(lib, "dcgmGroupDestroy"),
            field_group_create: sym!(lib, "dcgmFieldGroupCreate"),
            field_group_destroy: sym!(lib, "dcgmFieldGroupDestroy"),
            watch: sym!(lib, "dcgmWatchFields"),
            latest: sym!(lib, "dcgmEntitiesGetLatestValues"),
            prof_groups: sym!(lib, "dcgmProfGetSupportedMetricGroups"),
            error_string: sym!(lib, "errorString"),
            _lib: lib,
        })
    }

    pub(super) fn check(&self, function: &'static str, code: Return) -> Result<(), Error> {
        if code == ST_OK {
            return Ok(());
        }
        // SAFETY: errorString takes any code and returns a static string.
        let p = unsafe { (self.error_string)(code) };
        let message = if p.is_null() {
            "unknown error".to_string()
        } else {
            // SAFETY: non-null, NUL-terminated and static (DCGM's contract).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        Err(Error {
            function,
            code,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(field_type: u16, status: Return, bytes: [u8; 8]) -> FieldValueV2 {
        let mut v = FieldValueV2::ZERO;
        v.fieldType = field_type;
        v.status = status;
        v.value.0[..8].copy_from_slice(&bytes);
        v
    }

    /// Blank values (DCGM_FP64_BLANK and above, DCGM_INT64_BLANK and above)
    /// and failed statuses are no value, never 0.
    #[test]
    fn blanks_and_failed_reads_are_no_value() {
        let d = |x: f64| value(FT_DOUBLE, ST_OK, x.to_ne_bytes());
        let i = |x: i64| value(FT_INT64, ST_OK, x.to_ne_bytes());
        assert_eq!(d(0.25).number(), Some(0.25));
        assert_eq!(d(0.0).number(), Some(0.0));
        assert_eq!(d(FP64_BLANK).number(), None);
        assert_eq!(d(FP64_BLANK + 2.0).number(), None);
        assert_eq!(d(f64::NAN).number(), None);
        assert_eq!(i(2_000_000_000).number(), Some(2e9));
        assert_eq!(i(INT64_BLANK).number(), None);
        assert_eq!(i(INT64_BLANK + 1).number(), None);
        let watched_not = value(FT_DOUBLE, ST_NOT_WATCHED, 0.5f64.to_ne_bytes());
        assert_eq!(watched_not.number(), None);
        let mut s = value(FT_STRING, ST_OK, *b"GPU-1\0\0\0");
        assert_eq!(s.text().as_deref(), Some("GPU-1"));
        s.value.0[..11].copy_from_slice(b"<<<NULL>>>\0");
        assert_eq!(s.text(), None);
    }
}
