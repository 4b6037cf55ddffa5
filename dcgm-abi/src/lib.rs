//! The parts of DCGM 4's C ABI (`dcgm_structs.h`, `dcgm_fields.h`,
//! `dcgm_agent.h`) that the exporter's DCGM reader calls and the DCGM
//! simulator implements, declared once for both: return codes, entity
//! groups, blank values, the structures with their version words
//! ([`functions`]: the functions' C signatures). The sizes are asserted
//! below against the header's layout, so a field out of place fails the
//! build of both sides.

#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use std::ffi::c_char;

pub mod functions;
mod value;

pub type dcgmReturn_t = i32;
pub type dcgmHandle_t = usize;
pub type dcgmGpuGrp_t = usize;
pub type dcgmFieldGrp_t = usize;

pub const DCGM_ST_OK: dcgmReturn_t = 0;
pub const DCGM_ST_BADPARAM: dcgmReturn_t = -1;
pub const DCGM_ST_GENERIC_ERROR: dcgmReturn_t = -3;
pub const DCGM_ST_NOT_SUPPORTED: dcgmReturn_t = -6;
pub const DCGM_ST_INIT_ERROR: dcgmReturn_t = -7;
pub const DCGM_ST_UNINITIALIZED: dcgmReturn_t = -10;
pub const DCGM_ST_TIMEOUT: dcgmReturn_t = -11;
pub const DCGM_ST_VER_MISMATCH: dcgmReturn_t = -12;
pub const DCGM_ST_UNKNOWN_FIELD: dcgmReturn_t = -13;
pub const DCGM_ST_NO_DATA: dcgmReturn_t = -14;
pub const DCGM_ST_NOT_WATCHED: dcgmReturn_t = -16;
pub const DCGM_ST_CONNECTION_NOT_VALID: dcgmReturn_t = -21;
pub const DCGM_ST_MAX_LIMIT: dcgmReturn_t = -24;
pub const DCGM_ST_INSUFFICIENT_SIZE: dcgmReturn_t = -31;
pub const DCGM_ST_PROFILING_NOT_SUPPORTED: dcgmReturn_t = -36;
pub const DCGM_ST_PROFILING_MULTI_PASS: dcgmReturn_t = -38;

/// `dcgm_field_entity_group_t`.
pub const DCGM_FE_GPU: u32 = 1;
pub const DCGM_FE_GPU_I: u32 = 4;
pub const DCGM_FE_GPU_CI: u32 = 5;

pub const DCGM_GROUP_EMPTY: u32 = 1;
pub const DCGM_MAX_NUM_DEVICES: usize = 32;
pub const DCGM_MAX_NUM_GROUPS: usize = 64;
pub const DCGM_GROUP_MAX_ENTITIES: usize = 64;
pub const DCGM_MAX_FIELD_IDS_PER_FIELD_GROUP: usize = 128;
pub const DCGM_MAX_STR_LENGTH: usize = 256;
pub const DCGM_MAX_BLOB_LENGTH: usize = 4096;
pub const DCGM_MAX_HIERARCHY_INFO: usize = DCGM_MAX_NUM_DEVICES * 14;
pub const DCGM_PROF_MAX_NUM_GROUPS_V2: usize = 10;
pub const DCGM_PROF_MAX_FIELD_IDS_PER_GROUP_V2: usize = 64;

pub const DCGM_FT_DOUBLE: u16 = b'd' as u16;
pub const DCGM_FT_INT64: u16 = b'i' as u16;
pub const DCGM_FT_STRING: u16 = b's' as u16;

/// `DCGM_FP64_BLANK`: this and every value above it is no value
/// (`DCGM_FP64_IS_BLANK`); likewise for the integer blanks.
pub const DCGM_FP64_BLANK: f64 = 140737488355328.0;
pub const DCGM_INT64_BLANK: i64 = 0x7ffffffffffffff0;
pub const DCGM_INT32_BLANK: i64 = 0x7ffffff0;

/// `DCGM_FV_FLAG_LIVE_DATA`: read the value now, watched or not.
pub const DCGM_FV_FLAG_LIVE_DATA: u32 = 1;

/// `DCGM_FI_DEV_UUID`.
pub const DCGM_FI_DEV_UUID: u16 = 54;

/// `MAKE_DCGM_VERSION(type, ver)`.
pub const fn version(size: usize, ver: u32) -> u32 {
    size as u32 | (ver << 24)
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dcgmConnectV2Params_v2 {
    pub version: u32,
    pub persistAfterDisconnect: u32,
    pub timeoutMs: u32,
    pub addressIsUnixSocket: u32,
}
pub const dcgmConnectV2Params_version2: u32 = version(size_of::<dcgmConnectV2Params_v2>(), 2);

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct dcgmGroupEntityPair_t {
    pub entityGroupId: u32,
    pub entityId: u32,
}

/// The value union: 8-byte aligned, as its `int64_t`/`double` members make it.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct Value(pub [u8; DCGM_MAX_BLOB_LENGTH]);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct dcgmFieldValue_v2 {
    pub version: u32,
    pub entityGroupId: u32,
    pub entityId: u32,
    pub fieldId: u16,
    pub fieldType: u16,
    pub status: i32,
    pub unused: u32,
    pub ts: i64,
    pub value: Value,
}
pub const dcgmFieldValue_version2: u32 = version(size_of::<dcgmFieldValue_v2>(), 2);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct dcgmMigEntityInfo_t {
    pub gpuUuid: [c_char; 128],
    pub nvmlGpuIndex: u32,
    pub nvmlInstanceId: u32,
    pub nvmlComputeInstanceId: u32,
    pub nvmlMigProfileId: u32,
    pub nvmlProfileSlices: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct dcgmMigHierarchyInfo_v2 {
    pub entity: dcgmGroupEntityPair_t,
    pub parent: dcgmGroupEntityPair_t,
    pub info: dcgmMigEntityInfo_t,
}

#[repr(C)]
pub struct dcgmMigHierarchy_v2 {
    pub version: u32,
    pub count: u32,
    pub entityList: [dcgmMigHierarchyInfo_v2; DCGM_MAX_HIERARCHY_INFO],
}
pub const dcgmMigHierarchy_version2: u32 = version(size_of::<dcgmMigHierarchy_v2>(), 2);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct dcgmProfMetricGroupInfo_v2 {
    pub majorId: u16,
    pub minorId: u16,
    pub numFieldIds: u32,
    pub fieldIds: [u16; DCGM_PROF_MAX_FIELD_IDS_PER_GROUP_V2],
}

#[repr(C)]
pub struct dcgmProfGetMetricGroups_v3 {
    pub version: u32,
    pub unused: u32,
    pub gpuId: u32,
    pub numMetricGroups: u32,
    pub metricGroups: [dcgmProfMetricGroupInfo_v2; DCGM_PROF_MAX_NUM_GROUPS_V2],
}
pub const dcgmProfGetMetricGroups_version3: u32 =
    version(size_of::<dcgmProfGetMetricGroups_v3>(), 3);

// The header's layouts (x86-64 and aarch64 Linux): 4 + 4 + 4 + 2 + 2 + 4 +
// 4 + 8 + 4096 for a field value; 128 + 5 * 4 for MIG entity info.
const _: () = assert!(size_of::<dcgmConnectV2Params_v2>() == 16);
const _: () = assert!(size_of::<dcgmFieldValue_v2>() == 4128);
const _: () = assert!(std::mem::offset_of!(dcgmFieldValue_v2, ts) == 24);
const _: () = assert!(size_of::<dcgmMigEntityInfo_t>() == 148);
const _: () = assert!(size_of::<dcgmMigHierarchyInfo_v2>() == 164);
const _: () = assert!(size_of::<dcgmMigHierarchy_v2>() == 8 + 164 * 448);
const _: () = assert!(size_of::<dcgmProfMetricGroupInfo_v2>() == 136);
const _: () = assert!(size_of::<dcgmProfGetMetricGroups_v3>() == 16 + 136 * 10);
