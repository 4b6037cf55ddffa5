//! DCGM's C API as the reader calls it: `libdcgm.so.4` loaded at run time
//! (libloading) and its functions resolved once, with the signatures,
//! structures and version words of `gpuscale-dcgm-abi` (DCGM 4's headers,
//! the simulator's too).

use std::ffi::CStr;
use std::path::Path;

use gpuscale_dcgm_abi::functions as c;
use gpuscale_dcgm_abi::{DCGM_ST_OK, dcgmHandle_t, dcgmReturn_t};
use libloading::Library;

pub type Return = dcgmReturn_t;
pub type Handle = dcgmHandle_t;

/// The loaded library and the functions the reader calls.
pub struct Dcgm {
    pub(super) init: c::dcgmInit,
    pub(super) shutdown: c::dcgmShutdown,
    pub(super) connect: c::dcgmConnect_v2,
    pub(super) disconnect: c::dcgmDisconnect,
    pub(super) devices: c::dcgmGetAllSupportedDevices,
    pub(super) hierarchy: c::dcgmGetGpuInstanceHierarchy,
    pub(super) group_create: c::dcgmGroupCreate,
    pub(super) group_add: c::dcgmGroupAddEntity,
    pub(super) group_destroy: c::dcgmGroupDestroy,
    pub(super) field_group_create: c::dcgmFieldGroupCreate,
    pub(super) field_group_destroy: c::dcgmFieldGroupDestroy,
    pub(super) watch: c::dcgmWatchFields,
    pub(super) latest: c::dcgmEntitiesGetLatestValues,
    pub(super) prof_groups: c::dcgmProfGetSupportedMetricGroups,
    error_string: c::errorString,
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
        // signature (dcgm_agent.h) the field's type spells out
        // (gpuscale_dcgm_abi::functions).
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
        if code == DCGM_ST_OK {
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
