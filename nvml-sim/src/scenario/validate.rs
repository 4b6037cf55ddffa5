//! Semantic checks beyond the schema.

use std::collections::{HashMap, HashSet};

use super::error::FieldPath;
use super::{ClaimAlloc, Curve, NVIDIA_DRA_DRIVER, Scenario};

/// Maximum number of GPUs in a scenario (handle encoding limit).
pub const MAX_GPUS: usize = 256;
/// Maximum number of MIG instances per GPU (NVML's limit).
pub const MAX_MIG_PER_GPU: usize = 7;

pub(crate) struct Violation {
    pub path: FieldPath,
    pub message: String,
}

type Res = Result<(), Violation>;

fn fail(path: FieldPath, message: impl Into<String>) -> Res {
    Err(Violation {
        path,
        message: message.into(),
    })
}

fn root() -> FieldPath {
    FieldPath::default()
}

fn check_curve(c: &Curve, path: FieldPath, lo: f64, hi: f64, what: &str) -> Res {
    if let Some(msg) = c.check() {
        return fail(path, msg);
    }
    let (min, max) = c.range();
    if min < lo || max > hi {
        let range = if hi.is_infinite() {
            format!(">= {lo}")
        } else {
            format!("within {lo}..={hi}")
        };
        return fail(
            path,
            format!("{what} must be {range}, the curve ranges over {min}..={max}"),
        );
    }
    Ok(())
}

fn pct(c: &Curve, path: FieldPath) -> Res {
    check_curve(c, path, 0.0, 100.0, "a percentage")
}

fn nonneg(c: &Curve, path: FieldPath) -> Res {
    check_curve(c, path, 0.0, f64::INFINITY, "the value")
}

fn check_time(v: f64, path: FieldPath) -> Res {
    if !v.is_finite() || v < 0.0 {
        return fail(path, format!("time must be a finite number >= 0, got {v}"));
    }
    Ok(())
}

/// Parse `DDDDDDDD:BB:DD.F` (domain may have 4 or 8 hex digits).
pub fn parse_pci_bus_id(s: &str) -> Option<(u32, u32, u32, u32)> {
    let (domain, rest) = s.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (dev, func) = rest.split_once('.')?;
    let hex = |x: &str, max_len: usize| {
        if x.is_empty() || x.len() > max_len || !x.chars().all(|c| c.is_ascii_hexdigit()) {
            None
        } else {
            u32::from_str_radix(x, 16).ok()
        }
    };
    Some((hex(domain, 8)?, hex(bus, 2)?, hex(dev, 2)?, hex(func, 1)?))
}

fn is_uuid_body(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

pub(crate) fn validate(s: &Scenario) -> Res {
    if s.node.is_empty() {
        return fail(root().key("node"), "must not be empty");
    }
    let dv = &s.driver_version;
    let mut parts = dv.split('.');
    let ok = parts.next().is_some_and(|p| p.parse::<u32>().is_ok())
        && parts.next().is_some_and(|p| p.parse::<u32>().is_ok());
    if !ok || dv.len() >= 80 {
        return fail(
            root().key("driver_version"),
            format!("expected a version like \"570.172.08\", got {dv:?}"),
        );
    }
    if s.cuda_version < 1000 {
        return fail(
            root().key("cuda_version"),
            "expected NVML's integer form major*1000 + minor*10, e.g. 12080",
        );
    }
    if s.gpus.len() > MAX_GPUS {
        return fail(
            root().key("gpus"),
            format!("at most {MAX_GPUS} GPUs are supported"),
        );
    }

    let mut uuids: HashMap<&str, FieldPath> = HashMap::new();
    let mut buses: HashMap<(u32, u32, u32, u32), usize> = HashMap::new();
    for (i, g) in s.gpus.iter().enumerate() {
        let p = || root().key("gpus").index(i);
        if g.model.is_empty() || g.model.len() >= 96 {
            return fail(p().key("model"), "must be 1 to 95 characters");
        }
        match g.uuid.strip_prefix("GPU-") {
            Some(body) if is_uuid_body(body) && g.uuid.len() < 80 => {}
            _ => {
                return fail(
                    p().key("uuid"),
                    format!("expected \"GPU-\" followed by a hex UUID, got {:?}", g.uuid),
                );
            }
        }
        if let Some(prev) = uuids.insert(&g.uuid, p()) {
            return fail(
                p().key("uuid"),
                format!("duplicate UUID {:?} (also at {prev})", g.uuid),
            );
        }
        let Some(bdf) = parse_pci_bus_id(&g.pci_bus_id) else {
            return fail(
                p().key("pci_bus_id"),
                format!(
                    "expected \"DDDDDDDD:BB:DD.F\" (hex), got {:?}",
                    g.pci_bus_id
                ),
            );
        };
        if let Some(prev) = buses.insert(bdf, i) {
            return fail(
                p().key("pci_bus_id"),
                format!(
                    "duplicate PCI bus id {:?} (also gpus[{prev}])",
                    g.pci_bus_id
                ),
            );
        }
        if let Some(serial) = &g.serial
            && (serial.is_empty() || serial.len() >= 30)
        {
            return fail(p().key("serial"), "must be 1 to 29 characters");
        }
        if g.vbios_version.is_empty() || g.vbios_version.len() >= 32 {
            return fail(p().key("vbios_version"), "must be 1 to 31 characters");
        }
        if g.memory_mib == 0 {
            return fail(p().key("memory_mib"), "must be > 0");
        }
        if g.reserved_mib >= g.memory_mib {
            return fail(p().key("reserved_mib"), "must be less than memory_mib");
        }
        if !(g.power_limit_watts.is_finite() && g.power_limit_watts > 0.0) {
            return fail(p().key("power_limit_watts"), "must be > 0");
        }
        let mc = &g.max_clocks_mhz;
        if mc.graphics == 0 || mc.sm == 0 || mc.memory == 0 || mc.video == 0 {
            return fail(p().key("max_clocks_mhz"), "every clock must be > 0");
        }
        if !(1..=6).contains(&g.pcie.generation) {
            return fail(p().key("pcie").key("generation"), "must be 1..=6");
        }
        if ![1, 2, 4, 8, 16, 32].contains(&g.pcie.width) {
            return fail(p().key("pcie").key("width"), "must be 1, 2, 4, 8, 16 or 32");
        }
        if g.nvlinks > 18 {
            return fail(
                p().key("nvlinks"),
                "at most 18 NVLink links (NVML_NVLINK_MAX_LINKS)",
            );
        }
        if !(g.energy_offset_joules.is_finite() && g.energy_offset_joules >= 0.0) {
            return fail(p().key("energy_offset_joules"), "must be >= 0");
        }
        if let Some(at) = g.lost_at_s {
            check_time(at, p().key("lost_at_s"))?;
        }

        // load
        let l = &g.load;
        let lp = || p().key("load");
        pct(&l.utilization, lp().key("utilization"))?;
        pct(&l.memory_utilization, lp().key("memory_utilization"))?;
        if let Some(c) = &l.memory_used_mib {
            check_curve(
                c,
                lp().key("memory_used_mib"),
                0.0,
                (g.memory_mib - g.reserved_mib) as f64,
                "memory_used_mib (at most memory_mib - reserved_mib)",
            )?;
        }
        nonneg(&l.power_watts, lp().key("power_watts"))?;
        check_curve(
            &l.temperature_celsius,
            lp().key("temperature_celsius"),
            0.0,
            200.0,
            "a temperature",
        )?;
        check_curve(
            &l.memory_temperature_celsius,
            lp().key("memory_temperature_celsius"),
            0.0,
            200.0,
            "a temperature",
        )?;
        pct(&l.fan_speed, lp().key("fan_speed"))?;
        for (name, c, max) in [
            ("graphics_clock_mhz", &l.graphics_clock_mhz, mc.graphics),
            ("sm_clock_mhz", &l.sm_clock_mhz, mc.sm),
            ("memory_clock_mhz", &l.memory_clock_mhz, mc.memory),
            ("video_clock_mhz", &l.video_clock_mhz, mc.video),
        ] {
            if let Some(c) = c {
                check_curve(
                    c,
                    lp().key(name),
                    0.0,
                    max as f64,
                    "a clock (at most the max clock)",
                )?;
            }
        }
        check_curve(
            &l.pstate,
            lp().key("pstate"),
            0.0,
            15.0,
            "a performance state",
        )?;
        pct(&l.encoder_utilization, lp().key("encoder_utilization"))?;
        pct(&l.decoder_utilization, lp().key("decoder_utilization"))?;
        pct(&l.sm_active, lp().key("sm_active"))?;
        pct(&l.sm_occupancy, lp().key("sm_occupancy"))?;
        pct(&l.tensor_active, lp().key("tensor_active"))?;
        pct(&l.dram_active, lp().key("dram_active"))?;
        nonneg(
            &l.pcie_tx_bytes_per_second,
            lp().key("pcie_tx_bytes_per_second"),
        )?;
        nonneg(
            &l.pcie_rx_bytes_per_second,
            lp().key("pcie_rx_bytes_per_second"),
        )?;
        nonneg(
            &l.nvlink_tx_bytes_per_second,
            lp().key("nvlink_tx_bytes_per_second"),
        )?;
        nonneg(
            &l.nvlink_rx_bytes_per_second,
            lp().key("nvlink_rx_bytes_per_second"),
        )?;

        for (j, iv) in g.throttle.iter().enumerate() {
            let tp = || p().key("throttle").index(j);
            check_time(iv.from_s, tp().key("from_s"))?;
            if let Some(to) = iv.to_s {
                check_time(to, tp().key("to_s"))?;
                if to < iv.from_s {
                    return fail(tp().key("to_s"), "must not be before from_s");
                }
            }
        }
        for (j, x) in g.xids.iter().enumerate() {
            check_time(x.at_s, p().key("xids").index(j).key("at_s"))?;
            if x.xid == 0 {
                return fail(p().key("xids").index(j).key("xid"), "must be > 0");
            }
        }
        for (j, e) in g.ecc_errors.iter().enumerate() {
            check_time(e.at_s, p().key("ecc_errors").index(j).key("at_s"))?;
            if !g.ecc {
                return fail(
                    p().key("ecc_errors").index(j),
                    "ECC errors on a GPU with `ecc: false`",
                );
            }
        }
        for (j, e) in g.nvlink_errors.iter().enumerate() {
            check_time(e.at_s, p().key("nvlink_errors").index(j).key("at_s"))?;
            if e.link >= g.nvlinks {
                return fail(
                    p().key("nvlink_errors").index(j).key("link"),
                    format!("link {} does not exist (nvlinks: {})", e.link, g.nvlinks),
                );
            }
        }

        // MIG
        if g.mig_enabled() && !g.architecture.has_mig() {
            return fail(
                p().key("mig"),
                format!("{:?} GPUs have no MIG", g.architecture).to_lowercase(),
            );
        }
        if g.mig.len() > MAX_MIG_PER_GPU {
            return fail(
                p().key("mig"),
                format!("at most {MAX_MIG_PER_GPU} MIG instances per GPU"),
            );
        }
        let mut gis = HashSet::new();
        let mut mig_mem = 0u64;
        for (j, m) in g.mig.iter().enumerate() {
            let mp = || p().key("mig").index(j);
            match m.uuid.strip_prefix("MIG-") {
                Some(body) if is_uuid_body(body) && m.uuid.len() < 80 => {}
                _ => {
                    return fail(
                        mp().key("uuid"),
                        format!("expected \"MIG-\" followed by a hex UUID, got {:?}", m.uuid),
                    );
                }
            }
            if let Some(prev) = uuids.insert(&m.uuid, mp()) {
                return fail(
                    mp().key("uuid"),
                    format!("duplicate UUID {:?} (also at {prev})", m.uuid),
                );
            }
            if m.profile.is_empty() || m.profile.len() > 40 {
                return fail(
                    mp().key("profile"),
                    "must be 1 to 40 characters, e.g. 3g.40gb",
                );
            }
            if !gis.insert(m.gpu_instance_id) {
                return fail(
                    mp().key("gpu_instance_id"),
                    format!("duplicate gpu_instance_id {}", m.gpu_instance_id),
                );
            }
            if m.memory_mib == 0 {
                return fail(mp().key("memory_mib"), "must be > 0");
            }
            mig_mem += m.memory_mib;
            if let Some(c) = &m.load.memory_used_mib {
                check_curve(
                    c,
                    mp().key("load").key("memory_used_mib"),
                    0.0,
                    m.memory_mib as f64,
                    "memory_used_mib (at most the instance's memory_mib)",
                )?;
            }
            pct(&m.load.sm_active, mp().key("load").key("sm_active"))?;
            pct(&m.load.sm_occupancy, mp().key("load").key("sm_occupancy"))?;
            pct(&m.load.tensor_active, mp().key("load").key("tensor_active"))?;
            pct(&m.load.dram_active, mp().key("load").key("dram_active"))?;
        }
        if mig_mem > g.memory_mib {
            return fail(
                p().key("mig"),
                format!(
                    "MIG instances hold {mig_mem} MiB, more than memory_mib {}",
                    g.memory_mib
                ),
            );
        }

        // processes
        let mut pids = HashSet::new();
        for (j, pr) in g.processes.iter().enumerate() {
            let pp = || p().key("processes").index(j);
            if pr.pid == 0 {
                return fail(pp().key("pid"), "must be > 0");
            }
            if !pids.insert(pr.pid) {
                return fail(
                    pp().key("pid"),
                    format!("duplicate pid {} on this GPU", pr.pid),
                );
            }
            if pr.name.is_empty() {
                return fail(pp().key("name"), "must not be empty");
            }
            pct(&pr.sm_utilization, pp().key("sm_utilization"))?;
            pct(&pr.memory_utilization, pp().key("memory_utilization"))?;
            match &pr.mig {
                Some(m) => {
                    let Some(inst) = g.mig.iter().find(|x| &x.uuid == m) else {
                        return fail(
                            pp().key("mig"),
                            format!("no MIG instance {m:?} on this GPU"),
                        );
                    };
                    if pr.memory_mib > inst.memory_mib {
                        return fail(
                            pp().key("memory_mib"),
                            "more than the MIG instance's memory_mib",
                        );
                    }
                }
                None if g.mig_enabled() => {
                    return fail(
                        pp().key("mig"),
                        "the GPU is in MIG mode: name the MIG instance the process runs in",
                    );
                }
                None => {}
            }
            if pr.memory_mib > g.memory_mib {
                return fail(pp().key("memory_mib"), "more than the GPU's memory_mib");
            }
        }
    }

    // pods
    let mut names = HashSet::new();
    let mut uids = HashSet::new();
    for (i, pod) in s.pods.iter().enumerate() {
        let p = || root().key("pods").index(i);
        if pod.namespace.is_empty() {
            return fail(p().key("namespace"), "must not be empty");
        }
        if pod.name.is_empty() {
            return fail(p().key("name"), "must not be empty");
        }
        if !names.insert((pod.namespace.as_str(), pod.name.as_str())) {
            return fail(
                p().key("name"),
                format!("duplicate pod {}/{}", pod.namespace, pod.name),
            );
        }
        if pod.uid.is_empty() || !uids.insert(pod.uid.as_str()) {
            return fail(
                p().key("uid"),
                format!("missing or duplicate uid {:?}", pod.uid),
            );
        }
        if let Some(o) = &pod.owner
            && (o.kind.is_empty() || o.name.is_empty())
        {
            return fail(p().key("owner"), "kind and name must not be empty");
        }
        let mut cnames = HashSet::new();
        for (j, c) in pod.containers.iter().enumerate() {
            let cp = || p().key("containers").index(j);
            if c.name.is_empty() || !cnames.insert(c.name.as_str()) {
                return fail(
                    cp().key("name"),
                    format!("missing or duplicate container name {:?}", c.name),
                );
            }
            if c.id.len() != 64
                || !c
                    .id
                    .chars()
                    .all(|ch| ch.is_ascii_digit() || ('a'..='f').contains(&ch))
            {
                return fail(
                    cp().key("id"),
                    "a container ID is 64 lowercase hex characters",
                );
            }
            for (k, d) in c.devices.iter().enumerate() {
                let dp = || cp().key("devices").index(k);
                if !d.resource.contains('/') {
                    return fail(
                        dp().key("resource"),
                        format!(
                            "expected an extended resource name like nvidia.com/gpu, got {:?}",
                            d.resource
                        ),
                    );
                }
                for (m, id) in d.ids.iter().enumerate() {
                    let (uuid, replica) = match id.split_once("::") {
                        Some((u, r)) => (u, Some(r)),
                        None => (id.as_str(), None),
                    };
                    if let Some(r) = replica
                        && r.parse::<u32>().is_err()
                    {
                        return fail(
                            dp().key("ids").index(m),
                            format!("replica suffix of {id:?} must be a number (<uuid>::<n>)"),
                        );
                    }
                    if s.gpu_by_uuid(uuid).is_none() && s.mig_by_uuid(uuid).is_none() {
                        return fail(
                            dp().key("ids").index(m),
                            format!(
                                "unknown device {uuid:?}: no GPU or MIG instance has this UUID"
                            ),
                        );
                    }
                    if s.gpu_by_uuid(uuid).is_some_and(|(_, g)| g.mig_enabled()) {
                        return fail(
                            dp().key("ids").index(m),
                            format!("GPU {uuid:?} is in MIG mode: allocate its MIG instances"),
                        );
                    }
                }
            }
            for (k, claim) in c.claims.iter().enumerate() {
                check_claim(s, claim, || cp().key("claims").index(k))?;
            }
            for (k, pid) in c.pids.iter().enumerate() {
                if *pid == 0 {
                    return fail(cp().key("pids").index(k), "must be > 0");
                }
            }
        }
    }
    Ok(())
}

/// A DRA claim: a named claim of a driver; NVIDIA devices must be GPUs (not
/// in MIG mode) or MIG instances of this node.
fn check_claim(s: &Scenario, claim: &ClaimAlloc, at: impl Fn() -> FieldPath) -> Res {
    if claim.name.is_empty() {
        return fail(at().key("name"), "must not be empty");
    }
    if !claim.driver.contains('.') {
        return fail(
            at().key("driver"),
            format!(
                "expected a DRA driver name like gpu.nvidia.com, got {:?}",
                claim.driver
            ),
        );
    }
    if claim.devices.is_empty() {
        return fail(at().key("devices"), "a claim allocates at least one device");
    }
    for (m, id) in claim.devices.iter().enumerate() {
        if id.is_empty() {
            return fail(at().key("devices").index(m), "must not be empty");
        }
        if claim.driver != NVIDIA_DRA_DRIVER {
            continue;
        }
        if s.gpu_by_uuid(id).is_none() && s.mig_by_uuid(id).is_none() {
            return fail(
                at().key("devices").index(m),
                format!("unknown device {id:?}: no GPU or MIG instance has this UUID"),
            );
        }
        if s.gpu_by_uuid(id).is_some_and(|(_, g)| g.mig_enabled()) {
            return fail(
                at().key("devices").index(m),
                format!("GPU {id:?} is in MIG mode: claim its MIG instances"),
            );
        }
    }
    Ok(())
}
