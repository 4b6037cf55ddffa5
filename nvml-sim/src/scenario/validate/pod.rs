//! Checks of the pods: identity, labels, containers, device allocations and
//! DRA claims.

use std::collections::HashSet;

use super::{Problems, root, shown};
use crate::scenario::error::FieldPath;
use crate::scenario::limits::{MAX_ID, MAX_LABEL, MAX_LABELS, MAX_NAME, MAX_QUALIFIED};
use crate::scenario::{ClaimAlloc, Container, DeviceAlloc, NVIDIA_DRA_DRIVER, Pod, Scenario};

/// Every pod; names and uids are unique on the node.
pub(super) fn check_all(s: &Scenario, out: &mut Problems) {
    let mut names = HashSet::new();
    let mut uids = HashSet::new();
    for (i, pod) in s.pods.iter().enumerate() {
        let p = root().key("pods").index(i);
        identity(pod, &p, out);
        if !names.insert((pod.namespace.as_str(), pod.name.as_str())) {
            out.add(
                p.clone().key("name"),
                format!(
                    "duplicate pod {}/{}",
                    shown(&pod.namespace),
                    shown(&pod.name)
                ),
            );
        }
        if !pod.uid.is_empty() && !uids.insert(pod.uid.as_str()) {
            out.add(
                p.clone().key("uid"),
                format!("duplicate uid {}", shown(&pod.uid)),
            );
        }
        let mut cnames = HashSet::new();
        for (j, c) in pod.containers.iter().enumerate() {
            let cp = p.clone().key("containers").index(j);
            if !c.name.is_empty() && !cnames.insert(c.name.as_str()) {
                out.add(
                    cp.clone().key("name"),
                    format!("duplicate container name {}", shown(&c.name)),
                );
            }
            container(s, c, &cp, out);
        }
    }
}

/// Names as Kubernetes bounds them, so pod labels stay a bounded size.
fn identity(pod: &Pod, p: &FieldPath, out: &mut Problems) {
    let at = |k: &str| p.clone().key(k);
    out.text(&pod.namespace, at("namespace"), MAX_LABEL);
    out.text(&pod.name, at("name"), MAX_NAME);
    out.text(&pod.uid, at("uid"), MAX_ID);
    if let Some(o) = &pod.owner {
        if o.kind.is_empty() || o.name.is_empty() {
            out.add(at("owner"), "kind and name must not be empty");
        } else {
            out.text(&o.kind, at("owner").key("kind"), MAX_LABEL);
            out.text(&o.name, at("owner").key("name"), MAX_NAME);
        }
    }
    if pod.labels.len() > MAX_LABELS {
        out.add(
            at("labels"),
            format!("{} labels, the limit is {MAX_LABELS}", pod.labels.len()),
        );
    }
    for (k, v) in &pod.labels {
        let lp = at("labels").key(k);
        out.text(k, lp.clone(), MAX_QUALIFIED);
        if v.len() > MAX_LABEL {
            out.add(
                lp,
                format!(
                    "the value is {} bytes long, the limit is {MAX_LABEL}",
                    v.len()
                ),
            );
        }
    }
}

fn container(s: &Scenario, c: &Container, cp: &FieldPath, out: &mut Problems) {
    out.text(&c.name, cp.clone().key("name"), MAX_LABEL);
    let hex =
        c.id.chars()
            .all(|ch| ch.is_ascii_digit() || ('a'..='f').contains(&ch));
    if c.id.len() != 64 || !hex {
        out.add(
            cp.clone().key("id"),
            "a container ID is 64 lowercase hex characters",
        );
    }
    for (k, d) in c.devices.iter().enumerate() {
        device_alloc(s, d, cp.clone().key("devices").index(k), out);
    }
    for (k, claim) in c.claims.iter().enumerate() {
        check_claim(s, claim, cp.clone().key("claims").index(k), out);
    }
    for (k, pid) in c.pids.iter().enumerate() {
        if *pid == 0 {
            out.add(cp.clone().key("pids").index(k), "must be > 0");
        }
    }
}

/// A device-plugin allocation: an extended resource and GPU or MIG UUIDs,
/// optionally with a time-slicing replica suffix.
fn device_alloc(s: &Scenario, d: &DeviceAlloc, dp: FieldPath, out: &mut Problems) {
    if !d.resource.contains('/') || d.resource.len() > MAX_QUALIFIED {
        out.add(
            dp.clone().key("resource"),
            format!(
                "expected an extended resource name like nvidia.com/gpu, got {}",
                shown(&d.resource)
            ),
        );
    }
    for (m, id) in d.ids.iter().enumerate() {
        let (uuid, replica) = match id.split_once("::") {
            Some((u, r)) => (u, Some(r)),
            None => (id.as_str(), None),
        };
        let at = dp.clone().key("ids").index(m);
        if replica.is_some_and(|r| r.parse::<u32>().is_err()) {
            out.add(
                at.clone(),
                format!(
                    "replica suffix of {} must be a number (<uuid>::<n>)",
                    shown(id)
                ),
            );
        }
        nvidia_device(s, uuid, at, "allocate", out);
    }
}

/// An NVIDIA device is a GPU not in MIG mode or a MIG instance of this node.
fn nvidia_device(s: &Scenario, uuid: &str, at: FieldPath, verb: &str, out: &mut Problems) {
    if s.gpu_by_uuid(uuid).is_none() && s.mig_by_uuid(uuid).is_none() {
        out.add(
            at,
            format!(
                "unknown device {}: no GPU or MIG instance has this UUID",
                shown(uuid)
            ),
        );
    } else if s.gpu_by_uuid(uuid).is_some_and(|(_, g)| g.mig_enabled()) {
        out.add(
            at,
            format!("GPU {uuid:?} is in MIG mode: {verb} its MIG instances"),
        );
    }
}

/// A DRA claim: a named claim of a driver; NVIDIA devices must be GPUs (not
/// in MIG mode) or MIG instances of this node.
fn check_claim(s: &Scenario, claim: &ClaimAlloc, at: FieldPath, out: &mut Problems) {
    let key = |k: &str| at.clone().key(k);
    out.text(&claim.name, key("name"), MAX_NAME);
    if !claim.driver.contains('.') || claim.driver.len() > MAX_LABEL {
        out.add(
            key("driver"),
            format!(
                "expected a DRA driver name like gpu.nvidia.com, got {}",
                shown(&claim.driver)
            ),
        );
    }
    if claim.devices.is_empty() {
        out.add(key("devices"), "a claim allocates at least one device");
    }
    if let Some(share) = &claim.share_id {
        out.text(share, key("share_id"), MAX_ID);
    }
    for (m, id) in claim.devices.iter().enumerate() {
        let dp = key("devices").index(m);
        if claim.driver == NVIDIA_DRA_DRIVER && !id.is_empty() {
            nvidia_device(s, id, dp, "claim", out);
        } else {
            out.text(id, dp, MAX_ID);
        }
    }
}
