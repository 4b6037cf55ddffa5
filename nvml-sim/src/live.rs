//! Live processes: GPU processes that come, go and change their memory
//! while the simulator runs, for the simulated cluster's workloads (a
//! model server put to sleep frees its VRAM, a woken one takes it back).
//!
//! `GPUSCALE_SIM_LIVE_PROCESSES` names a directory; each file
//! `<GPU or MIG UUID>/<pid>` holds that process's used memory in MiB
//! (a whole number). It is read at every call: a process is listed beside
//! the scenario's processes of that device (a pid the scenario also lists
//! takes the live figure), and its memory counts in the device's used
//! memory. A file that does not parse is skipped (a write in progress);
//! writers replace files atomically ([`write`]).

use std::path::{Path, PathBuf};

use crate::scenario::Process;

/// Environment variable naming the live processes' directory.
pub const ENV_LIVE: &str = "GPUSCALE_SIM_LIVE_PROCESSES";

fn dir() -> Option<PathBuf> {
    std::env::var_os(ENV_LIVE)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// (pid, memory MiB) of the live processes on the device `uuid`, by pid.
pub fn processes(uuid: &str) -> Vec<(u32, u64)> {
    let Some(dir) = dir() else {
        return Vec::new();
    };
    processes_in(&dir, uuid)
}

/// (pid, memory MiB) of the live processes on the device `uuid` under
/// `dir`, by pid.
pub fn processes_in(dir: &Path, uuid: &str) -> Vec<(u32, u64)> {
    read(&dir.join(uuid))
}

fn read(dir: &Path) -> Vec<(u32, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, u64)> = entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let text = std::fs::read_to_string(e.path()).ok()?;
            Some((pid, text.trim().parse::<u64>().ok()?))
        })
        .collect();
    out.sort_unstable();
    out
}

/// `listed` (the scenario's processes of device `uuid`) with the live ones
/// of that device: a live pid the scenario lists takes the live memory.
pub fn merge(mut listed: Vec<Process>, uuid: &str) -> Vec<Process> {
    for (pid, mib) in processes(uuid) {
        match listed.iter_mut().find(|p| p.pid == pid) {
            Some(p) => p.memory_mib = mib,
            None => listed.push(Process {
                pid,
                name: String::new(),
                memory_mib: mib,
                sm_utilization: Default::default(),
                memory_utilization: Default::default(),
                mig: None,
            }),
        }
    }
    listed
}

/// Writes (or replaces, atomically) the live process `pid` on device
/// `uuid` under `dir` with `mib` of memory.
pub fn write(dir: &Path, uuid: &str, pid: u32, mib: u64) -> std::io::Result<()> {
    let device = dir.join(uuid);
    std::fs::create_dir_all(&device)?;
    let tmp = device.join(format!(".{pid}.tmp"));
    std::fs::write(&tmp, format!("{mib}\n"))?;
    std::fs::rename(tmp, device.join(pid.to_string()))
}

/// Removes the live process `pid` on device `uuid` (gone: not an error).
pub fn remove(dir: &Path, uuid: &str, pid: u32) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(uuid).join(pid.to_string())) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_processes_are_read_back_and_junk_is_skipped() {
        let d = tempfile::tempdir().expect("a temp dir");
        write(d.path(), "GPU-1", 42, 24_576).expect("write");
        write(d.path(), "GPU-1", 7, 100).expect("write");
        std::fs::write(d.path().join("GPU-1").join("9"), "half\n").expect("junk");
        assert_eq!(read(&d.path().join("GPU-1")), [(7, 100), (42, 24_576)]);
        write(d.path(), "GPU-1", 42, 2_458).expect("write");
        remove(d.path(), "GPU-1", 7).expect("remove");
        remove(d.path(), "GPU-1", 7).expect("removing twice is fine");
        assert_eq!(read(&d.path().join("GPU-1")), [(42, 2_458)]);
        assert!(read(&d.path().join("GPU-2")).is_empty());
    }
}
