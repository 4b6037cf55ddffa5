//! Safe wrappers over the DCGM functions the reader calls.

use std::ffi::CString;

use gpuscale_dcgm_abi::*;

use super::ffi::{Dcgm, Error, Handle};

/// A GPU instance (MIG) as DCGM lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub entity: dcgmGroupEntityPair_t,
    pub gpu_uuid: String,
    /// NVML's GPU instance id within the GPU.
    pub gpu_instance_id: u32,
}

/// A profiling metric group: fields of one `minor` of a `major` group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricGroup {
    pub major: u16,
    pub minor: u16,
    pub fields: Vec<u16>,
}

fn cstring(function: &'static str, s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error {
        function,
        code: -1,
        message: format!("{s:?} holds a NUL byte"),
    })
}

impl Dcgm {
    pub fn init(&self) -> Result<(), Error> {
        // SAFETY: no arguments.
        self.check("dcgmInit", unsafe { (self.init)() })
    }

    pub fn shutdown(&self) -> Result<(), Error> {
        // SAFETY: no arguments.
        self.check("dcgmShutdown", unsafe { (self.shutdown)() })
    }

    /// Standalone mode: a TCP connection to `address` (`host:port`).
    pub fn connect(&self, address: &str, timeout_ms: u32) -> Result<Handle, Error> {
        let addr = cstring("dcgmConnect_v2", address)?;
        let mut params = dcgmConnectV2Params_v2 {
            version: dcgmConnectV2Params_version2,
            persistAfterDisconnect: 0,
            timeoutMs: timeout_ms,
            addressIsUnixSocket: 0,
        };
        let mut handle: Handle = 0;
        // SAFETY: a NUL-terminated address, a versioned params struct and an
        // out-pointer, all live for the call.
        let rc = unsafe { (self.connect)(addr.as_ptr(), &mut params, &mut handle) };
        self.check("dcgmConnect_v2", rc).map(|()| handle)
    }

    pub fn disconnect(&self, h: Handle) -> Result<(), Error> {
        // SAFETY: a handle from connect.
        self.check("dcgmDisconnect", unsafe { (self.disconnect)(h) })
    }

    pub fn devices(&self, h: Handle) -> Result<Vec<u32>, Error> {
        let mut ids = [0u32; DCGM_MAX_NUM_DEVICES];
        let mut count = 0i32;
        // SAFETY: an array of DCGM_MAX_NUM_DEVICES entries and an out-pointer.
        let rc = unsafe { (self.devices)(h, ids.as_mut_ptr(), &mut count) };
        self.check("dcgmGetAllSupportedDevices", rc)?;
        let n = usize::try_from(count)
            .unwrap_or(0)
            .min(DCGM_MAX_NUM_DEVICES);
        Ok(ids[..n].to_vec())
    }

    /// The GPU instances (MIG) DCGM knows, with their GPU's UUID.
    pub fn instances(&self, h: Handle) -> Result<Vec<Instance>, Error> {
        // SAFETY: all-zero bytes are a valid dcgmMigHierarchy_v2 (integers and
        // byte arrays only).
        let mut hier: Box<dcgmMigHierarchy_v2> = unsafe { Box::new_zeroed().assume_init() };
        hier.version = dcgmMigHierarchy_version2;
        // SAFETY: a versioned struct, live and writable for the call.
        let rc = unsafe { (self.hierarchy)(h, &mut *hier) };
        self.check("dcgmGetGpuInstanceHierarchy", rc)?;
        let n = (hier.count as usize).min(hier.entityList.len());
        Ok(hier.entityList[..n]
            .iter()
            .filter(|e| e.entity.entityGroupId == DCGM_FE_GPU_I)
            .map(|e| {
                let bytes: Vec<u8> = e.info.gpuUuid.iter().map(|&c| c as u8).collect();
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                Instance {
                    entity: e.entity,
                    gpu_uuid: String::from_utf8_lossy(&bytes[..end]).into_owned(),
                    gpu_instance_id: e.info.nvmlInstanceId,
                }
            })
            .collect())
    }

    pub fn group_create(&self, h: Handle, name: &str) -> Result<usize, Error> {
        let name = cstring("dcgmGroupCreate", name)?;
        let mut id = 0usize;
        // SAFETY: a NUL-terminated name and an out-pointer.
        let rc = unsafe { (self.group_create)(h, DCGM_GROUP_EMPTY, name.as_ptr(), &mut id) };
        self.check("dcgmGroupCreate", rc).map(|()| id)
    }

    pub fn group_add(
        &self,
        h: Handle,
        group: usize,
        e: dcgmGroupEntityPair_t,
    ) -> Result<(), Error> {
        // SAFETY: plain values.
        let rc = unsafe { (self.group_add)(h, group, e.entityGroupId, e.entityId) };
        self.check("dcgmGroupAddEntity", rc)
    }

    pub fn group_destroy(&self, h: Handle, group: usize) -> Result<(), Error> {
        // SAFETY: plain values.
        self.check("dcgmGroupDestroy", unsafe {
            (self.group_destroy)(h, group)
        })
    }

    pub fn field_group_create(&self, h: Handle, ids: &[u16], name: &str) -> Result<usize, Error> {
        let name = cstring("dcgmFieldGroupCreate", name)?;
        let mut id = 0usize;
        let n = i32::try_from(ids.len()).unwrap_or(i32::MAX);
        // SAFETY: `ids` holds `n` entries; a NUL-terminated name; an out-pointer.
        let rc = unsafe { (self.field_group_create)(h, n, ids.as_ptr(), name.as_ptr(), &mut id) };
        self.check("dcgmFieldGroupCreate", rc).map(|()| id)
    }

    pub fn field_group_destroy(&self, h: Handle, fg: usize) -> Result<(), Error> {
        // SAFETY: plain values.
        let rc = unsafe { (self.field_group_destroy)(h, fg) };
        self.check("dcgmFieldGroupDestroy", rc)
    }

    /// Watches `fg` on `group`, sampled every `every_us`, two samples kept.
    pub fn watch(&self, h: Handle, group: usize, fg: usize, every_us: i64) -> Result<(), Error> {
        let keep_s = (every_us as f64 / 1e6 * 2.0).max(1.0);
        // SAFETY: plain values.
        let rc = unsafe { (self.watch)(h, group, fg, every_us, keep_s, 2) };
        self.check("dcgmWatchFields", rc)
    }

    /// The latest value of every field for every entity, entity-major.
    pub fn latest(
        &self,
        h: Handle,
        entities: &[dcgmGroupEntityPair_t],
        fields: &[u16],
        flags: u32,
    ) -> Result<Vec<dcgmFieldValue_v2>, Error> {
        let mut out = vec![dcgmFieldValue_v2::ZERO; entities.len() * fields.len()];
        if out.is_empty() {
            return Ok(out);
        }
        // SAFETY: the arrays hold the counts passed, and `out` their product.
        let rc = unsafe {
            (self.latest)(
                h,
                entities.as_ptr(),
                entities.len() as u32,
                fields.as_ptr(),
                fields.len() as u32,
                flags,
                out.as_mut_ptr(),
            )
        };
        self.check("dcgmEntitiesGetLatestValues", rc).map(|()| out)
    }

    /// The profiling metric groups of GPU `gpu`.
    pub fn metric_groups(&self, h: Handle, gpu: u32) -> Result<Vec<MetricGroup>, Error> {
        // SAFETY: all-zero bytes are a valid dcgmProfGetMetricGroups_v3.
        let mut q: Box<dcgmProfGetMetricGroups_v3> = unsafe { Box::new_zeroed().assume_init() };
        q.version = dcgmProfGetMetricGroups_version3;
        q.gpuId = gpu;
        // SAFETY: a versioned struct, live and writable for the call.
        let rc = unsafe { (self.prof_groups)(h, &mut *q) };
        self.check("dcgmProfGetSupportedMetricGroups", rc)?;
        let n = (q.numMetricGroups as usize).min(q.metricGroups.len());
        Ok(q.metricGroups[..n]
            .iter()
            .map(|g| MetricGroup {
                major: g.majorId,
                minor: g.minorId,
                fields: g.fieldIds
                    [..(g.numFieldIds as usize).min(DCGM_PROF_MAX_FIELD_IDS_PER_GROUP_V2)]
                    .to_vec(),
            })
            .collect())
    }
}
