//! Entities, groups, field groups and watches.

use std::ffi::c_char;

use gpuscale_nvml_sim::scenario::DcgmField;

use super::{R, get_str, guard, put};
use crate::state::{self, lock};
use crate::values::{self, PER_GPU};
use gpuscale_dcgm_abi::*;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dcgmGetAllSupportedDevices(
    handle: dcgmHandle_t,
    gpu_ids: *mut u32,
    count: *mut i32,
) -> dcgmReturn_t {
    guard(|| {
        let (s, w) = (state::session(handle)?, state::world()?);
        s.request("dcgmGetAllSupportedDevices")?;
        if gpu_ids.is_null() {
            return Err(DCGM_ST_BADPARAM);
        }
        let t = w.now();
        let ids: Vec<u32> = (0..w.scenario.gpus.len() as u32)
            .filter(|&i| !w.scenario.gpus[i as usize].is_lost(t))
            .take(DCGM_MAX_NUM_DEVICES)
            .collect();
        for (k, id) in ids.iter().enumerate() {
            // SAFETY: `gpu_ids` is an array of DCGM_MAX_NUM_DEVICES entries
            // (the DCGM API) and k < DCGM_MAX_NUM_DEVICES.
            unsafe { put(gpu_ids.add(k), *id) }?;
        }
        // SAFETY: an out-pointer parameter of this function.
        unsafe { put(count, ids.len() as i32) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dcgmGetGpuInstanceHierarchy(
    handle: dcgmHandle_t,
    hierarchy: *mut dcgmMigHierarchy_v2,
) -> dcgmReturn_t {
    guard(|| {
        let (s, w) = (state::session(handle)?, state::world()?);
        s.request("dcgmGetGpuInstanceHierarchy")?;
        if hierarchy.is_null() {
            return Err(DCGM_ST_BADPARAM);
        }
        // SAFETY: non-null (checked above), valid for the struct per the API.
        let h = unsafe { &mut *hierarchy };
        if h.version != dcgmMigHierarchy_version2 {
            return Err(DCGM_ST_VER_MISMATCH);
        }
        h.count = 0;
        let t = w.now();
        for (i, gpu) in w.scenario.gpus.iter().enumerate() {
            if gpu.is_lost(t) {
                continue;
            }
            for (j, mig) in gpu.mig.iter().enumerate().take(PER_GPU as usize) {
                let id = i as u32 * PER_GPU + j as u32;
                let gpu_pair = pair(DCGM_FE_GPU, i as u32);
                let gi = pair(DCGM_FE_GPU_I, id);
                let info = mig_info(&gpu.uuid, i as u32, mig, None);
                push(h, gi, gpu_pair, info)?;
                let ci_info = mig_info(&gpu.uuid, i as u32, mig, Some(mig.compute_instance_id));
                push(h, pair(DCGM_FE_GPU_CI, id), gi, ci_info)?;
            }
        }
        Ok(())
    })
}

fn pair(group: u32, id: u32) -> dcgmGroupEntityPair_t {
    dcgmGroupEntityPair_t {
        entityGroupId: group,
        entityId: id,
    }
}

fn push(
    h: &mut dcgmMigHierarchy_v2,
    entity: dcgmGroupEntityPair_t,
    parent: dcgmGroupEntityPair_t,
    info: dcgmMigEntityInfo_t,
) -> R {
    let slot = h
        .entityList
        .get_mut(h.count as usize)
        .ok_or(DCGM_ST_INSUFFICIENT_SIZE)?;
    *slot = dcgmMigHierarchyInfo_v2 {
        entity,
        parent,
        info,
    };
    h.count += 1;
    Ok(())
}

fn mig_info(
    uuid: &str,
    index: u32,
    mig: &gpuscale_nvml_sim::scenario::MigInstance,
    ci: Option<u32>,
) -> dcgmMigEntityInfo_t {
    let mut gpu_uuid = [0 as c_char; 128];
    for (d, b) in gpu_uuid.iter_mut().zip(uuid.bytes().take(127)) {
        *d = b as c_char;
    }
    let slices = mig
        .profile
        .split_once('g')
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(1);
    dcgmMigEntityInfo_t {
        gpuUuid: gpu_uuid,
        nvmlGpuIndex: index,
        nvmlInstanceId: mig.gpu_instance_id,
        nvmlComputeInstanceId: ci.unwrap_or(u32::MAX),
        nvmlMigProfileId: slices,
        nvmlProfileSlices: slices,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dcgmGroupCreate(
    handle: dcgmHandle_t,
    kind: u32,
    name: *const c_char,
    group: *mut dcgmGpuGrp_t,
) -> dcgmReturn_t {
    guard(|| {
        let (s, w) = (state::session(handle)?, state::world()?);
        // SAFETY: a parameter of this function (see the module's contract).
        let name = unsafe { get_str(name) }?;
        s.request(&format!("dcgmGroupCreate {kind} {name}"))?;
        let members = match kind {
            DCGM_GROUP_EMPTY => Vec::new(),
            0 => (0..w.scenario.gpus.len() as u32)
                .map(|i| pair(DCGM_FE_GPU, i))
                .collect(),
            _ => return Err(DCGM_ST_NOT_SUPPORTED),
        };
        let mut book = lock(&s.book);
        if book.groups.len() >= DCGM_MAX_NUM_GROUPS {
            return Err(DCGM_ST_MAX_LIMIT);
        }
        book.next_id += 1;
        let id = book.next_id;
        book.groups.insert(id, members);
        // SAFETY: an out-pointer parameter of this function.
        unsafe { put(group, id) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcgmGroupAddEntity(
    handle: dcgmHandle_t,
    group: dcgmGpuGrp_t,
    entity_group: u32,
    entity_id: u32,
) -> dcgmReturn_t {
    guard(|| {
        let (s, w) = (state::session(handle)?, state::world()?);
        s.request(&format!(
            "dcgmGroupAddEntity {group} {entity_group} {entity_id}"
        ))?;
        let e = pair(entity_group, entity_id);
        values::resolve(&w.scenario, e, w.now()).ok_or(DCGM_ST_BADPARAM)?;
        let mut book = lock(&s.book);
        let members = book.groups.get_mut(&group).ok_or(DCGM_ST_BADPARAM)?;
        if members.len() >= DCGM_GROUP_MAX_ENTITIES {
            return Err(DCGM_ST_MAX_LIMIT);
        }
        if !members.contains(&e) {
            members.push(e);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcgmGroupDestroy(handle: dcgmHandle_t, group: dcgmGpuGrp_t) -> dcgmReturn_t {
    guard(|| {
        let s = state::session(handle)?;
        s.request(&format!("dcgmGroupDestroy {group}"))?;
        lock(&s.book)
            .groups
            .remove(&group)
            .map(drop)
            .ok_or(DCGM_ST_BADPARAM)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dcgmFieldGroupCreate(
    handle: dcgmHandle_t,
    count: i32,
    field_ids: *const u16,
    name: *const c_char,
    field_group: *mut dcgmFieldGrp_t,
) -> dcgmReturn_t {
    guard(|| {
        let s = state::session(handle)?;
        let n = usize::try_from(count).map_err(|_| DCGM_ST_BADPARAM)?;
        if n == 0 || n > DCGM_MAX_FIELD_IDS_PER_FIELD_GROUP || field_ids.is_null() {
            return Err(DCGM_ST_BADPARAM);
        }
        // SAFETY: `field_ids` holds `count` entries (the DCGM API), non-null.
        let ids = unsafe { std::slice::from_raw_parts(field_ids, n) }.to_vec();
        // SAFETY: a parameter of this function (see the module's contract).
        let name = unsafe { get_str(name) }?;
        let list: Vec<String> = ids.iter().map(u16::to_string).collect();
        s.request(&format!("dcgmFieldGroupCreate {name} {}", list.join(",")))?;
        let mut book = lock(&s.book);
        book.next_id += 1;
        let id = book.next_id;
        book.field_groups.insert(id, ids);
        // SAFETY: an out-pointer parameter of this function.
        unsafe { put(field_group, id) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn dcgmFieldGroupDestroy(handle: dcgmHandle_t, fg: dcgmFieldGrp_t) -> dcgmReturn_t {
    guard(|| {
        let s = state::session(handle)?;
        s.request(&format!("dcgmFieldGroupDestroy {fg}"))?;
        lock(&s.book)
            .field_groups
            .remove(&fg)
            .map(drop)
            .ok_or(DCGM_ST_BADPARAM)
    })
}

/// Watches every field of `fg` on every entity of `group`. A field group
/// with a field the scenario refuses is refused whole; one that would need
/// a second pass of a profiling major group already watched (or watched
/// together in it) is DCGM_ST_PROFILING_MULTI_PASS.
#[unsafe(no_mangle)]
pub extern "C" fn dcgmWatchFields(
    handle: dcgmHandle_t,
    group: dcgmGpuGrp_t,
    fg: dcgmFieldGrp_t,
    update_freq_us: i64,
    _max_keep_age_s: f64,
    _max_keep_samples: i32,
) -> dcgmReturn_t {
    guard(|| {
        let (s, w) = (state::session(handle)?, state::world()?);
        s.request(&format!("dcgmWatchFields {group} {fg} {update_freq_us}"))?;
        let mut book = lock(&s.book);
        let members = book.groups.get(&group).ok_or(DCGM_ST_BADPARAM)?.clone();
        let fields = book.field_groups.get(&fg).ok_or(DCGM_ST_BADPARAM)?.clone();
        let dcgm = w.scenario.dcgm();
        if fields
            .iter()
            .any(|&f| DcgmField::from_id(f).is_some_and(|f| dcgm.refuse.contains(&f)))
        {
            return Err(DCGM_ST_PROFILING_NOT_SUPPORTED);
        }
        let groups = values::metric_groups(&w.scenario);
        let pass = |f: u16| groups.iter().find(|g| g.2.contains(&f)).map(|g| (g.0, g.1));
        let mut passes = book.passes.clone();
        for e in &members {
            let gpu = match e.entityGroupId {
                DCGM_FE_GPU => e.entityId,
                _ => e.entityId / PER_GPU,
            };
            for (major, minor) in fields.iter().filter_map(|&f| pass(f)) {
                match passes.insert((gpu, major), minor) {
                    Some(m) if m != minor => return Err(DCGM_ST_PROFILING_MULTI_PASS),
                    _ => {}
                }
            }
        }
        book.passes = passes;
        for e in members {
            for &f in &fields {
                book.watched.insert((e, f));
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dcgmProfGetSupportedMetricGroups(
    handle: dcgmHandle_t,
    groups: *mut dcgmProfGetMetricGroups_v3,
) -> dcgmReturn_t {
    guard(|| {
        let (s, w) = (state::session(handle)?, state::world()?);
        if groups.is_null() {
            return Err(DCGM_ST_BADPARAM);
        }
        // SAFETY: non-null (checked above), valid for the struct per the API.
        let g = unsafe { &mut *groups };
        s.request(&format!("dcgmProfGetSupportedMetricGroups {}", g.gpuId))?;
        if g.version != dcgmProfGetMetricGroups_version3 {
            return Err(DCGM_ST_VER_MISMATCH);
        }
        let t = w.now();
        match w.scenario.gpus.get(g.gpuId as usize) {
            Some(gpu) if w.scenario.dcgm().no_profiling.contains(&gpu.uuid) => {
                return Err(DCGM_ST_PROFILING_NOT_SUPPORTED);
            }
            Some(gpu) if !gpu.is_lost(t) => {}
            _ => return Err(DCGM_ST_BADPARAM),
        }
        let found = values::metric_groups(&w.scenario);
        g.numMetricGroups = 0;
        for (slot, (major, minor, ids)) in g.metricGroups.iter_mut().zip(found) {
            slot.majorId = major;
            slot.minorId = minor;
            slot.numFieldIds = ids.len() as u32;
            slot.fieldIds = [0; DCGM_PROF_MAX_FIELD_IDS_PER_GROUP_V2];
            slot.fieldIds[..ids.len()].copy_from_slice(&ids);
            g.numMetricGroups += 1;
        }
        Ok(())
    })
}
