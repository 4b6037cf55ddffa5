//! The one door to NVML: loading the library and reading through it with
//! error accounting. Collectors call NVML only through a [`Reader`].

pub mod library;
pub mod raw;

use std::collections::{BTreeMap, HashSet};

use nvml_wrapper::error::NvmlError;
use tracing::{info, warn};

/// Short, stable name of an NVML error for the `error` label.
pub fn error_kind(e: &NvmlError) -> &'static str {
    match e {
        NvmlError::Uninitialized => "uninitialized",
        NvmlError::InvalidArg => "invalid_argument",
        NvmlError::NotSupported => "not_supported",
        NvmlError::NoPermission => "no_permission",
        NvmlError::NotFound => "not_found",
        NvmlError::InsufficientSize(_) => "insufficient_size",
        NvmlError::InsufficientPower => "insufficient_power",
        NvmlError::DriverNotLoaded => "driver_not_loaded",
        NvmlError::Timeout => "timeout",
        NvmlError::IrqIssue => "irq_issue",
        NvmlError::LibraryNotFound => "library_not_found",
        NvmlError::FunctionNotFound => "function_not_found",
        NvmlError::FailedToLoadSymbol(_) => "symbol_missing",
        NvmlError::CorruptedInfoROM => "corrupted_inforom",
        NvmlError::GpuLost => "gpu_lost",
        NvmlError::ResetRequired => "reset_required",
        NvmlError::OperatingSystem => "operating_system",
        NvmlError::LibRmVersionMismatch => "lib_rm_version_mismatch",
        NvmlError::InUse => "in_use",
        NvmlError::Utf8Error(_) => "utf8",
        NvmlError::UnexpectedVariant(_) => "unexpected_variant",
        NvmlError::LibloadingError(_) => "library_load",
        _ => "unknown",
    }
}

/// Whether an error means "this GPU lacks the field" rather than a failure.
fn is_unsupported(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound
    )
}

/// A read of a value that never changes (see [`Reader::read_fixed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedRead<T> {
    pub value: Option<T>,
    /// False when the call failed in a way worth retrying, so the caller
    /// must not cache what it has.
    pub settled: bool,
}

/// Error accounting across collections. `read` turns NVML results into
/// `Option`s: unsupported fields are left out (logged once), failures are
/// counted by function and kind, and a lost GPU is remembered.
#[derive(Default)]
pub struct Reader {
    errors: BTreeMap<(&'static str, &'static str), u64>,
    unsupported_seen: HashSet<(u32, &'static str)>,
    /// GPU indexes that reported GPU_IS_LOST during the current cycle.
    pub lost: HashSet<u32>,
    failures_in_run: u64,
}

impl Reader {
    pub fn read<T>(
        &mut self,
        gpu: u32,
        function: &'static str,
        r: Result<T, NvmlError>,
    ) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(gpu, function, &e);
                None
            }
        }
    }

    /// Like [`Reader::read`], for a value that never changes and is cached.
    pub fn read_fixed<T>(
        &mut self,
        gpu: u32,
        function: &'static str,
        r: Result<T, NvmlError>,
    ) -> FixedRead<T> {
        // Unsupported is final; any other failure is worth another try.
        let settled = r.as_ref().err().is_none_or(is_unsupported);
        FixedRead {
            value: self.read(gpu, function, r),
            settled,
        }
    }

    /// Accounts for one failed call.
    pub fn fail(&mut self, gpu: u32, function: &'static str, e: &NvmlError) {
        if is_unsupported(e) {
            if self.unsupported_seen.insert((gpu, function)) {
                info!(gpu, function, "not supported by this GPU; series left out");
            }
            return;
        }
        if matches!(e, NvmlError::GpuLost) {
            if self.lost.insert(gpu) {
                warn!(gpu, function, "GPU has fallen off the bus");
            }
        } else {
            warn!(gpu, function, error = %e, "NVML call failed");
            self.failures_in_run += 1;
        }
        *self.errors.entry((function, error_kind(e))).or_default() += 1;
    }

    /// Marks the start of a collector's run; [`Reader::run_ok`] then says whether it failed.
    pub fn begin_run(&mut self) {
        self.failures_in_run = 0;
    }

    pub fn run_ok(&self) -> bool {
        self.failures_in_run == 0
    }

    pub fn errors(&self) -> &BTreeMap<(&'static str, &'static str), u64> {
        &self.errors
    }
}
