//! What is watched on one connection: the wanted GPUs and MIG instances as
//! DCGM numbers them, one entity group per set of GPUs that share a plan,
//! and one field group per profiling metric group DCGM allows together.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::calls::MetricGroup;
use gpuscale_dcgm_abi::{
    DCGM_FE_GPU, DCGM_FI_DEV_UUID, DCGM_FV_FLAG_LIVE_DATA, DCGM_ST_CONNECTION_NOT_VALID,
    dcgmGroupEntityPair_t as EntityPair,
};

use super::ffi::{Error, Handle};
use super::link::Link;
use super::{Activity, FIELDS, Key, Wanted};

pub(super) struct Watches {
    pub wanted: Wanted,
    entities: Vec<EntityPair>,
    keys: HashMap<EntityPair, Key>,
    fields: Vec<u16>,
    groups: Vec<usize>,
    field_groups: Vec<usize>,
}

/// Per GPU: the field lists to watch (one per metric group) and the fields
/// left out with why.
type Plan = (Vec<Vec<u16>>, Vec<(u16, &'static str)>);

/// For each major metric group, the minor that holds the most of our
/// fields; fields only in other minors need another pass (left out), fields
/// in no group are not supported.
fn plan(groups: &[MetricGroup]) -> Plan {
    let ours = |g: &MetricGroup| -> Vec<u16> {
        let mut f: Vec<u16> = FIELDS
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| g.fields.contains(id))
            .collect();
        f.sort_unstable();
        f
    };
    let mut best: BTreeMap<u16, (u16, Vec<u16>)> = BTreeMap::new();
    for g in groups {
        let f = ours(g);
        let better = best.get(&g.major).is_none_or(|(_, b)| f.len() > b.len());
        if !f.is_empty() && better {
            best.insert(g.major, (g.minor, f));
        }
    }
    let lists: Vec<Vec<u16>> = best.into_values().map(|(_, f)| f).collect();
    let left_out = FIELDS
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !lists.iter().any(|l| l.contains(id)))
        .map(|id| {
            let somewhere = groups.iter().any(|g| g.fields.contains(&id));
            (
                id,
                if somewhere {
                    "multi_pass"
                } else {
                    "not_supported"
                },
            )
        })
        .collect();
    (lists, left_out)
}

/// Fields left out: (field, reason) -> GPUs.
type LeftOut = BTreeMap<(&'static str, &'static str), usize>;

/// The GPUs grouped by their plan (the field lists to watch). A GPU DCGM
/// has no profiling metric groups for (module not loaded, not supported)
/// gets an empty plan: its fields are left out, the others still watched.
fn plans(
    link: &Link<'_>,
    h: Handle,
    gpus: &[(u32, Arc<str>)],
    left_out: &mut LeftOut,
) -> Result<BTreeMap<Vec<Vec<u16>>, Vec<u32>>, Error> {
    let mut plans: BTreeMap<Vec<Vec<u16>>, Vec<u32>> = BTreeMap::new();
    for (gpu, _) in gpus {
        let groups = match link.call(|l| l.metric_groups(h, *gpu)) {
            Ok(g) => g,
            Err(e) if e.code == DCGM_ST_CONNECTION_NOT_VALID => return Err(e),
            Err(e) => {
                warn!(error = %e, gpu, "DCGM has no profiling metric groups for this GPU");
                Vec::new()
            }
        };
        let (lists, out) = plan(&groups);
        for (id, why) in out {
            *left_out.entry((name_of(id), why)).or_default() += 1;
        }
        plans.entry(lists).or_default().push(*gpu);
    }
    Ok(plans)
}

fn name_of(id: u16) -> &'static str {
    FIELDS
        .iter()
        .find(|(f, _)| *f == id)
        .map_or("unknown", |(_, n)| n)
}

impl Watches {
    /// Finds the wanted entities and watches their fields. A field group
    /// DCGM refuses is left out (logged, counted); the others are watched.
    pub fn set(
        link: &Link<'_>,
        h: Handle,
        wanted: Wanted,
        every: Duration,
    ) -> Result<Watches, Error> {
        let mut w = Watches {
            wanted,
            entities: Vec::new(),
            keys: HashMap::new(),
            fields: Vec::new(),
            groups: Vec::new(),
            field_groups: Vec::new(),
        };
        if w.wanted.0.is_empty() {
            // Every GPU has GPM (or none is there): DCGM is asked nothing.
            link.state().left_out.clear();
            return Ok(w);
        }
        let gpus = w.find_gpus(link, h)?;
        w.find_instances(link, h)?;
        let mut left_out = LeftOut::new();
        let plans = plans(link, h, &gpus, &mut left_out)?;
        let mut field_groups: BTreeMap<Vec<u16>, usize> = BTreeMap::new();
        let every_us = i64::try_from(every.as_micros()).unwrap_or(i64::MAX);
        for (n, (lists, members)) in plans.iter().enumerate() {
            if lists.is_empty() {
                continue;
            }
            let group = link.call(|l| l.group_create(h, &format!("gpuscale-{n}")))?;
            w.groups.push(group);
            for e in w.members(members) {
                link.call(|l| l.group_add(h, group, e))?;
            }
            for list in lists {
                let fg = w.field_group(link, h, list, &mut field_groups)?;
                let target = (group, fg, members.len());
                w.watch(link, h, target, list, every_us, &mut left_out)?;
            }
        }
        link.state().left_out = left_out;
        Ok(w)
    }

    /// The field group of `list`, made once per connection.
    fn field_group(
        &mut self,
        link: &Link<'_>,
        h: Handle,
        list: &[u16],
        made: &mut BTreeMap<Vec<u16>, usize>,
    ) -> Result<usize, Error> {
        if let Some(fg) = made.get(list) {
            return Ok(*fg);
        }
        let name = format!("gpuscale-{}", made.len());
        let fg = link.call(|l| l.field_group_create(h, list, &name))?;
        self.field_groups.push(fg);
        made.insert(list.to_vec(), fg);
        Ok(fg)
    }

    /// Watches field group `fg` on entity group `group` (of `gpus` GPUs); a
    /// refusal leaves its fields out for those GPUs (logged, counted).
    fn watch(
        &mut self,
        link: &Link<'_>,
        h: Handle,
        (group, fg, gpus): (usize, usize, usize),
        list: &[u16],
        every_us: i64,
        left_out: &mut LeftOut,
    ) -> Result<(), Error> {
        match link.call(|l| l.watch(h, group, fg, every_us)) {
            Ok(()) => {
                for f in list {
                    if !self.fields.contains(f) {
                        self.fields.push(*f);
                    }
                }
                Ok(())
            }
            Err(e) if e.code == DCGM_ST_CONNECTION_NOT_VALID => Err(e),
            Err(e) => {
                let names: Vec<&str> = list.iter().map(|&f| name_of(f)).collect();
                warn!(error = %e, fields = ?names, "DCGM refused to watch these fields; they are left out");
                for &f in list {
                    *left_out.entry((name_of(f), "refused")).or_default() += gpus;
                }
                Ok(())
            }
        }
    }

    /// The wanted GPUs DCGM lists: (DCGM gpu id, UUID).
    fn find_gpus(&mut self, link: &Link<'_>, h: Handle) -> Result<Vec<(u32, Arc<str>)>, Error> {
        let ids = link.call(|l| l.devices(h))?;
        let pairs: Vec<EntityPair> = ids
            .iter()
            .map(|&id| EntityPair {
                entityGroupId: DCGM_FE_GPU,
                entityId: id,
            })
            .collect();
        let uuids =
            link.call(|l| l.latest(h, &pairs, &[DCGM_FI_DEV_UUID], DCGM_FV_FLAG_LIVE_DATA))?;
        let mut found = Vec::new();
        for (pair, v) in pairs.iter().zip(uuids) {
            let Some(uuid) = v.text() else { continue };
            let key = Key::Gpu(Arc::from(uuid.as_str()));
            if let (true, Key::Gpu(u)) = (self.wanted.0.contains(&key), &key) {
                found.push((pair.entityId, u.clone()));
                self.keys.insert(*pair, key);
                self.entities.push(*pair);
            }
        }
        Ok(found)
    }

    /// The wanted MIG instances (only asked for when some are wanted).
    fn find_instances(&mut self, link: &Link<'_>, h: Handle) -> Result<(), Error> {
        if !self.wanted.0.iter().any(|k| matches!(k, Key::Mig(..))) {
            return Ok(());
        }
        for inst in link.call(|l| l.instances(h))? {
            let key = Key::Mig(Arc::from(inst.gpu_uuid.as_str()), inst.gpu_instance_id);
            if self.wanted.0.contains(&key) {
                self.keys.insert(inst.entity, key);
                self.entities.push(inst.entity);
            }
        }
        Ok(())
    }

    /// The entities of a plan's GPUs: each GPU and its wanted instances.
    fn members(&self, gpus: &[u32]) -> Vec<EntityPair> {
        let uuids: Vec<&Arc<str>> = gpus
            .iter()
            .filter_map(|id| {
                match self.keys.get(&EntityPair {
                    entityGroupId: DCGM_FE_GPU,
                    entityId: *id,
                }) {
                    Some(Key::Gpu(u)) => Some(u),
                    _ => None,
                }
            })
            .collect();
        self.entities
            .iter()
            .filter(|e| match self.keys.get(e) {
                Some(Key::Gpu(u)) | Some(Key::Mig(u, _)) => uuids.contains(&u),
                None => false,
            })
            .copied()
            .collect()
    }

    /// The latest values of the watched fields; blanks and failed reads absent.
    pub fn read(&self, link: &Link<'_>, h: Handle) -> Result<HashMap<Key, Activity>, Error> {
        let mut out: HashMap<Key, Activity> = HashMap::new();
        if self.entities.is_empty() || self.fields.is_empty() {
            return Ok(out);
        }
        let values = link.call(|l| l.latest(h, &self.entities, &self.fields, 0))?;
        for v in values {
            let pair = EntityPair {
                entityGroupId: v.entityGroupId,
                entityId: v.entityId,
            };
            let (Some(key), Some(slot)) = (
                self.keys.get(&pair),
                FIELDS.iter().position(|(f, _)| *f == v.fieldId),
            ) else {
                continue;
            };
            let row = out.entry(key.clone()).or_default();
            row[slot] = v.number();
        }
        Ok(out)
    }

    /// Destroys the groups and field groups (best effort: the connection
    /// may be gone; DCGM drops them with it).
    pub fn remove(self, link: &Link<'_>, h: Handle) {
        for g in self.groups {
            let _ = link.call(|l| l.group_destroy(h, g));
        }
        for fg in self.field_groups {
            let _ = link.call(|l| l.field_group_destroy(h, fg));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(major: u16, minor: u16, fields: &[u16]) -> MetricGroup {
        MetricGroup {
            major,
            minor,
            fields: fields.to_vec(),
        }
    }

    /// Per major group the minor with most of our fields is watched; the
    /// fields only in another minor need a second pass, the ones in no
    /// group are not supported.
    #[test]
    fn the_plan_watches_the_largest_minor_of_each_major() {
        let groups = [
            group(0, 0, &[1001, 1002, 1004]),
            group(0, 1, &[1003]),
            group(1, 0, &[1009, 1010]),
            group(2, 0, &[1005]),
        ];
        let (lists, left_out) = plan(&groups);
        assert_eq!(lists, vec![vec![1001, 1002, 1004], vec![1005]]);
        assert_eq!(left_out, vec![(1003, "multi_pass")]);
        let (lists, left_out) = plan(&[group(0, 0, &[1002])]);
        assert_eq!(lists, vec![vec![1002]]);
        let reasons: Vec<&str> = left_out.iter().map(|(_, r)| *r).collect();
        assert_eq!(reasons, ["not_supported"; 4]);
        assert_eq!(plan(&[]).0, Vec::<Vec<u16>>::new());
    }
}
