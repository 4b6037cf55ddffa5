//! Memory errors: ECC mode and counters, row remapping and page retirement.

use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};

use super::{Collector, Ctx, Gpu, Spec};
use crate::metrics::{Collected, Desc, Family, flag};
use crate::nvml::raw;

pub struct Ecc;

pub const SPEC: Spec = Spec {
    name: "ecc",
    families: &[
        &ECC_ERRORS,
        &ROWS,
        &ROWS_PENDING,
        &ROWS_FAILURE,
        &PAGES,
        &PAGES_PENDING,
        &ECC_ENABLED,
    ],
    build: |_, _| Box::new(Ecc),
};

const ECC_ERRORS: Desc = Desc::counter(
    "gpu_ecc_errors_total",
    "ECC memory errors; volatile counts since the driver loaded, aggregate over the GPU's life.",
    "",
    &["type", "scope"],
);
const ECC_ENABLED: Desc = Desc::gauge(
    "gpu_ecc_enabled",
    "1 while ECC is on (mode current) or will be on after the next reset (mode pending).",
    "",
    &["mode"],
);
const ROWS: Desc = Desc::gauge(
    "gpu_remapped_rows",
    "Memory rows remapped, by the error that caused it.",
    "",
    &["cause"],
);
const ROWS_PENDING: Desc = Desc::gauge(
    "gpu_remapped_rows_pending",
    "1 while a row remap waits for a GPU reset, else 0.",
    "",
    &[],
);
const ROWS_FAILURE: Desc = Desc::gauge(
    "gpu_remapped_rows_failure",
    "1 after a row remap failed, else 0.",
    "",
    &[],
);
const PAGES: Desc = Desc::gauge(
    "gpu_retired_pages",
    "Memory pages retired, by cause.",
    "",
    &["cause"],
);
const PAGES_PENDING: Desc = Desc::gauge(
    "gpu_retired_pages_pending",
    "1 while pages wait to be retired at the next reset, else 0.",
    "",
    &[],
);

const ECC: [(MemoryError, &str, EccCounter, &str); 4] = [
    (
        MemoryError::Corrected,
        "corrected",
        EccCounter::Volatile,
        "volatile",
    ),
    (
        MemoryError::Corrected,
        "corrected",
        EccCounter::Aggregate,
        "aggregate",
    ),
    (
        MemoryError::Uncorrected,
        "uncorrected",
        EccCounter::Volatile,
        "volatile",
    ),
    (
        MemoryError::Uncorrected,
        "uncorrected",
        EccCounter::Aggregate,
        "aggregate",
    ),
];

impl<'n> Collector<'n> for Ecc {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut ecc = Family::of(&ECC_ERRORS);
        let mut rows = Family::of(&ROWS);
        let mut rows_pending = Family::of(&ROWS_PENDING);
        let mut rows_failure = Family::of(&ROWS_FAILURE);
        let mut pages = Family::of(&PAGES);
        let mut pages_pending = Family::of(&PAGES_PENDING);
        let mut enabled = Family::of(&ECC_ENABLED);
        for gpu in cx.gpus {
            let (i, d) = (gpu.id.index, &gpu.device);
            ecc_mode(cx, gpu, &mut enabled);
            for (kind, kind_label, counter, scope) in ECC {
                if let Some(n) = cx.reader.read(
                    i,
                    "nvmlDeviceGetTotalEccErrors",
                    d.total_ecc_errors(kind, counter),
                ) {
                    ecc.push(
                        gpu.subject(),
                        vec![
                            ("type", kind_label.to_string()),
                            ("scope", scope.to_string()),
                        ],
                        n as f64,
                    );
                }
            }
            if let Some(r) = cx.reader.read(
                i,
                "nvmlDeviceGetRemappedRows",
                raw::remapped_rows(cx.nvml, d),
            ) {
                rows.push(
                    gpu.subject(),
                    vec![("cause", "correctable".into())],
                    f64::from(r.correctable),
                );
                rows.push(
                    gpu.subject(),
                    vec![("cause", "uncorrectable".into())],
                    f64::from(r.uncorrectable),
                );
                rows_pending.push(gpu.subject(), vec![], flag(r.pending));
                rows_failure.push(gpu.subject(), vec![], flag(r.failure));
            }
            for (cause, label) in [
                (
                    RetirementCause::MultipleSingleBitEccErrors,
                    "single_bit_ecc",
                ),
                (RetirementCause::DoubleBitEccError, "double_bit_ecc"),
            ] {
                if let Some(p) =
                    cx.reader
                        .read(i, "nvmlDeviceGetRetiredPages_v2", d.retired_pages(cause))
                {
                    pages.push(
                        gpu.subject(),
                        vec![("cause", label.to_string())],
                        p.len() as f64,
                    );
                }
            }
            if let Some(p) = cx.reader.read(
                i,
                "nvmlDeviceGetRetiredPagesPendingStatus",
                d.are_pages_pending_retired(),
            ) {
                pages_pending.push(gpu.subject(), vec![], flag(p));
            }
        }
        out.families.extend([
            ecc,
            rows,
            rows_pending,
            rows_failure,
            pages,
            pages_pending,
            enabled,
        ]);
    }
}

/// `gpu_ecc_enabled`: ECC on now, and after the next reset while that
/// differs (a mode change waiting for a reset; otherwise the same series twice).
fn ecc_mode(cx: &mut Ctx<'_, '_>, gpu: &Gpu<'_>, family: &mut Family) {
    let read = gpu.device.is_ecc_enabled();
    let Some(m) = cx.reader.read(gpu.id.index, "nvmlDeviceGetEccMode", read) else {
        return;
    };
    let current = flag(m.currently_enabled);
    family.push(gpu.subject(), vec![("mode", "current".into())], current);
    if m.pending_enabled != m.currently_enabled {
        let pending = flag(m.pending_enabled);
        family.push(gpu.subject(), vec![("mode", "pending".into())], pending);
    }
}
