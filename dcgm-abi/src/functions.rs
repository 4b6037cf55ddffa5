//! The C signatures (`dcgm_agent.h`) of the functions the reader resolves
//! from the library and the simulator exports, one type each, named after
//! the function. The simulator checks its functions against them, so the
//! two sides cannot disagree on an argument.

#![allow(non_camel_case_types)]

use std::ffi::c_char;

use crate::*;

pub type dcgmInit = unsafe extern "C" fn() -> dcgmReturn_t;
pub type dcgmShutdown = unsafe extern "C" fn() -> dcgmReturn_t;
pub type dcgmConnect_v2 = unsafe extern "C" fn(
    ipAddress: *const c_char,
    connectParams: *mut dcgmConnectV2Params_v2,
    pDcgmHandle: *mut dcgmHandle_t,
) -> dcgmReturn_t;
pub type dcgmDisconnect = unsafe extern "C" fn(pDcgmHandle: dcgmHandle_t) -> dcgmReturn_t;
pub type dcgmGetAllSupportedDevices = unsafe extern "C" fn(
    pDcgmHandle: dcgmHandle_t,
    gpuIdList: *mut u32,
    count: *mut i32,
) -> dcgmReturn_t;
pub type dcgmGetGpuInstanceHierarchy = unsafe extern "C" fn(
    dcgmHandle: dcgmHandle_t,
    hierarchy: *mut dcgmMigHierarchy_v2,
) -> dcgmReturn_t;
pub type dcgmGroupCreate = unsafe extern "C" fn(
    pDcgmHandle: dcgmHandle_t,
    type_: u32,
    groupName: *const c_char,
    pDcgmGrpId: *mut dcgmGpuGrp_t,
) -> dcgmReturn_t;
pub type dcgmGroupAddEntity = unsafe extern "C" fn(
    pDcgmHandle: dcgmHandle_t,
    groupId: dcgmGpuGrp_t,
    entityGroupId: u32,
    entityId: u32,
) -> dcgmReturn_t;
pub type dcgmGroupDestroy =
    unsafe extern "C" fn(pDcgmHandle: dcgmHandle_t, groupId: dcgmGpuGrp_t) -> dcgmReturn_t;
pub type dcgmFieldGroupCreate = unsafe extern "C" fn(
    dcgmHandle: dcgmHandle_t,
    numFieldIds: i32,
    fieldIds: *const u16,
    fieldGroupName: *const c_char,
    dcgmFieldGroupId: *mut dcgmFieldGrp_t,
) -> dcgmReturn_t;
pub type dcgmFieldGroupDestroy = unsafe extern "C" fn(
    dcgmHandle: dcgmHandle_t,
    dcgmFieldGroupId: dcgmFieldGrp_t,
) -> dcgmReturn_t;
pub type dcgmWatchFields = unsafe extern "C" fn(
    pDcgmHandle: dcgmHandle_t,
    groupId: dcgmGpuGrp_t,
    fieldGroupId: dcgmFieldGrp_t,
    updateFreq: i64,
    maxKeepAge: f64,
    maxKeepSamples: i32,
) -> dcgmReturn_t;
pub type dcgmEntitiesGetLatestValues = unsafe extern "C" fn(
    pDcgmHandle: dcgmHandle_t,
    entities: *const dcgmGroupEntityPair_t,
    entityCount: u32,
    fields: *const u16,
    fieldCount: u32,
    flags: u32,
    values: *mut dcgmFieldValue_v2,
) -> dcgmReturn_t;
pub type dcgmProfGetSupportedMetricGroups = unsafe extern "C" fn(
    dcgmHandle: dcgmHandle_t,
    metricGroups: *mut dcgmProfGetMetricGroups_v3,
) -> dcgmReturn_t;
pub type errorString = unsafe extern "C" fn(result: dcgmReturn_t) -> *const c_char;
