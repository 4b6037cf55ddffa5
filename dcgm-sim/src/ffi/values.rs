//! Reading field values.

use super::guard;
use crate::state::{self, lock};
use crate::values::{self, Reading};
use gpuscale_dcgm_abi::*;

/// Fills `values[e * fieldCount + f]` for every entity and field: the
/// value of a watched field (a blank where the scenario has none), status
/// DCGM_ST_NOT_WATCHED for one that is not watched (unless
/// DCGM_FV_FLAG_LIVE_DATA asks for live data), a bad entity DCGM_ST_BADPARAM.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dcgmEntitiesGetLatestValues(
    handle: dcgmHandle_t,
    entities: *const dcgmGroupEntityPair_t,
    entity_count: u32,
    fields: *const u16,
    field_count: u32,
    flags: u32,
    out: *mut dcgmFieldValue_v2,
) -> dcgmReturn_t {
    guard(|| {
        let (s, w) = (state::session(handle)?, state::world()?);
        s.request(&format!(
            "dcgmEntitiesGetLatestValues {entity_count} {field_count} {flags}"
        ))?;
        if entities.is_null() || fields.is_null() || out.is_null() {
            return Err(DCGM_ST_BADPARAM);
        }
        // SAFETY: the arrays hold `entity_count` and `field_count` entries
        // (the DCGM API) and are non-null (checked above).
        let (entities, fields) = unsafe {
            (
                std::slice::from_raw_parts(entities, entity_count as usize),
                std::slice::from_raw_parts(fields, field_count as usize),
            )
        };
        let live = flags & 1 != 0;
        let t = w.now();
        let ts = (state::unix_now() * 1e6) as i64;
        let book = lock(&s.book);
        let mut k = 0;
        for e in entities {
            let entity = values::resolve(&w.scenario, *e, t);
            for &f in fields {
                let reading = match &entity {
                    None => Reading::Status(DCGM_ST_BADPARAM),
                    Some(_) if !live && !book.watched.contains(&(*e, f)) => {
                        Reading::Status(DCGM_ST_NOT_WATCHED)
                    }
                    Some(ent) => values::read(&w.scenario, ent, f, t),
                };
                // SAFETY: `out` holds entity_count * field_count entries
                // (the DCGM API) and k is below that.
                let slot = unsafe { &mut *out.add(k) };
                fill(slot, *e, f, ts, reading);
                k += 1;
            }
        }
        Ok(())
    })
}

fn fill(slot: &mut dcgmFieldValue_v2, e: dcgmGroupEntityPair_t, field: u16, ts: i64, r: Reading) {
    slot.version = dcgmFieldValue_version2;
    slot.entityGroupId = e.entityGroupId;
    slot.entityId = e.entityId;
    slot.fieldId = field;
    slot.status = DCGM_ST_OK;
    slot.unused = 0;
    slot.ts = ts;
    slot.value = Value([0; DCGM_MAX_BLOB_LENGTH]);
    match r {
        Reading::Double(v) => {
            slot.fieldType = DCGM_FT_DOUBLE;
            slot.value.0[..8].copy_from_slice(&v.to_ne_bytes());
        }
        Reading::Int(v) => {
            slot.fieldType = DCGM_FT_INT64;
            slot.value.0[..8].copy_from_slice(&v.to_ne_bytes());
        }
        Reading::Str(s) => {
            slot.fieldType = DCGM_FT_STRING;
            let n = s.len().min(DCGM_MAX_STR_LENGTH - 1);
            slot.value.0[..n].copy_from_slice(&s.as_bytes()[..n]);
        }
        Reading::Status(st) => {
            slot.fieldType = DCGM_FT_DOUBLE;
            slot.status = st;
            slot.value.0[..8].copy_from_slice(&DCGM_FP64_BLANK.to_ne_bytes());
        }
    }
}
