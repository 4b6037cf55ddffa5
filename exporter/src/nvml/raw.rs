//! NVML functions that `nvml-wrapper` 0.13 has no safe method for, called
//! through its loaded symbol table (so they go to the same library).

use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper::{Device, Nvml};

/// `nvmlDeviceGetRemappedRows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    pub pending: bool,
    pub failure: bool,
}

pub fn remapped_rows(nvml: &Nvml, device: &Device<'_>) -> Result<RemappedRows, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let (mut corr, mut unc, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: the handle comes from this `Nvml`; the out-pointers are valid locals.
    unsafe {
        nvml_try(sym(
            device.handle(),
            &mut corr,
            &mut unc,
            &mut pending,
            &mut failure,
        ))?
    };
    Ok(RemappedRows {
        correctable: corr,
        uncorrectable: unc,
        pending: pending != 0,
        failure: failure != 0,
    })
}

/// `nvmlDeviceGetGpuFabricInfo`: the GPU's registration with the NVSwitch
/// fabric (Fabric Manager).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricInfo {
    /// `NVML_GPU_FABRIC_STATE_*`.
    pub state: u32,
    /// The registration's result, meaningful once completed.
    pub status_ok: bool,
}

impl FabricInfo {
    /// The `state` label; `None` where the GPU has no fabric.
    pub fn state_label(self) -> Option<&'static str> {
        use nvml_wrapper_sys::bindings as b;
        match self.state {
            b::NVML_GPU_FABRIC_STATE_NOT_STARTED => Some("not_started"),
            b::NVML_GPU_FABRIC_STATE_IN_PROGRESS => Some("in_progress"),
            b::NVML_GPU_FABRIC_STATE_COMPLETED if self.status_ok => Some("completed"),
            b::NVML_GPU_FABRIC_STATE_COMPLETED => Some("failed"),
            _ => None,
        }
    }
}

pub fn fabric_info(nvml: &Nvml, device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuFabricInfo.as_ref())?;
    let mut info = nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_t {
        clusterUuid: [0; 16],
        status: 0,
        cliqueId: 0,
        state: 0,
    };
    // SAFETY: the handle comes from this `Nvml`; the out-pointer is a valid local.
    unsafe { nvml_try(sym(device.handle(), &mut info))? };
    Ok(FabricInfo {
        state: u32::from(info.state),
        status_ok: info.status == 0,
    })
}

/// `nvmlDeviceGetGpuInstanceId` on a MIG device handle.
pub fn gpu_instance_id(nvml: &Nvml, device: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref())?;
    let mut id = 0u32;
    // SAFETY: as above.
    unsafe { nvml_try(sym(device.handle(), &mut id))? };
    Ok(id)
}

/// `nvmlDeviceGetComputeInstanceId` on a MIG device handle.
pub fn compute_instance_id(nvml: &Nvml, device: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetComputeInstanceId.as_ref())?;
    let mut id = 0u32;
    // SAFETY: as above.
    unsafe { nvml_try(sym(device.handle(), &mut id))? };
    Ok(id)
}

/// `nvmlDeviceGetFieldValues` with a scope (the safe wrapper always sends
/// scope 0, but NVLink fields are per link). Returns one result per request.
pub fn scoped_field_values(
    nvml: &Nvml,
    device: &Device<'_>,
    requests: &[(u32, u32)],
) -> Result<Vec<Result<f64, NvmlError>>, NvmlError> {
    use nvml_wrapper_sys::bindings::*;
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetFieldValues.as_ref())?;
    let mut values: Vec<nvmlFieldValue_t> = requests
        .iter()
        .map(|&(field, scope)| {
            // SAFETY: plain C struct, all-zero is a valid value.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = field;
            v.scopeId = scope;
            v
        })
        .collect();
    let count = i32::try_from(values.len()).map_err(|_| NvmlError::InvalidArg)?;
    // SAFETY: `values` holds `count` initialised structs that NVML fills in place.
    unsafe { nvml_try(sym(device.handle(), count, values.as_mut_ptr()))? };
    Ok(values
        .iter()
        .map(|v| {
            nvml_try(v.nvmlReturn)?;
            // SAFETY: the union member read is the one `valueType` names.
            #[allow(non_upper_case_globals)]
            let x = unsafe {
                match v.valueType {
                    nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE => v.value.dVal,
                    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => f64::from(v.value.uiVal),
                    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG => v.value.ulVal as f64,
                    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => v.value.ullVal as f64,
                    nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG => v.value.sllVal as f64,
                    nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT => f64::from(v.value.siVal),
                    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_SHORT => f64::from(v.value.usVal),
                    other => return Err(NvmlError::UnexpectedVariant(other)),
                }
            };
            Ok(x)
        })
        .collect())
}
