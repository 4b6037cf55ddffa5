//! A generated `/proc` tree: `<root>/<pid>/cgroup` for each simulated GPU
//! process, in the cgroup layouts real nodes use. Pods cycle through four
//! runtime/driver layouts and three QoS classes so every parser path runs.

use std::io;
use std::path::Path;

/// Container runtime + cgroup driver + cgroup version of a simulated pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// cgroup v2, systemd driver, containerd (the common case today).
    ContainerdSystemdV2,
    /// cgroup v2, cgroupfs driver, containerd.
    ContainerdCgroupfsV2,
    /// cgroup v1, systemd driver, CRI-O.
    CrioSystemdV1,
    /// cgroup v1, cgroupfs driver, Docker (cri-dockerd).
    DockerCgroupfsV1,
}

impl Layout {
    pub fn for_index(i: usize) -> Self {
        [
            Self::ContainerdSystemdV2,
            Self::ContainerdCgroupfsV2,
            Self::CrioSystemdV1,
            Self::DockerCgroupfsV1,
        ][i % 4]
    }

    /// The `containerID` scheme in the pod status.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::ContainerdSystemdV2 | Self::ContainerdCgroupfsV2 => "containerd",
            Self::CrioSystemdV1 => "cri-o",
            Self::DockerCgroupfsV1 => "docker",
        }
    }
}

/// QoS class by index: guaranteed pods sit directly under kubepods.
pub fn qos_for_index(i: usize) -> &'static str {
    ["", "burstable", "besteffort"][i % 3]
}

/// The cgroup file of a process in container `cid` of pod `uid`.
pub fn cgroup_text(layout: Layout, qos: &str, uid: &str, cid: &str) -> String {
    let uid_ = uid.replace('-', "_");
    let systemd = |runtime: &str| {
        if qos.is_empty() {
            format!("/kubepods.slice/kubepods-pod{uid_}.slice/{runtime}-{cid}.scope")
        } else {
            format!(
                "/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{uid_}.slice/{runtime}-{cid}.scope"
            )
        }
    };
    let cgroupfs = if qos.is_empty() {
        format!("/kubepods/pod{uid}/{cid}")
    } else {
        format!("/kubepods/{qos}/pod{uid}/{cid}")
    };
    match layout {
        Layout::ContainerdSystemdV2 => format!("0::{}\n", systemd("cri-containerd")),
        Layout::ContainerdCgroupfsV2 => format!("0::{cgroupfs}\n"),
        Layout::CrioSystemdV1 => v1_lines(&systemd("crio")),
        Layout::DockerCgroupfsV1 => v1_lines(&cgroupfs),
    }
}

fn v1_lines(path: &str) -> String {
    let controllers = [
        "memory",
        "cpu,cpuacct",
        "devices",
        "pids",
        "blkio",
        "freezer",
        "name=systemd",
    ];
    let mut text: String = controllers
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}:{c}:{path}\n", controllers.len() - i))
        .collect();
    text.push_str("0::/\n");
    text
}

/// A process outside any pod (e.g. a host daemon using the GPU).
pub const HOST_CGROUP: &str = "0::/system.slice/gpu-host-daemon.service\n";

pub fn write(root: &Path, pid: u32, text: &str) -> io::Result<()> {
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("cgroup"), text)
}

pub fn remove(root: &Path, pid: u32) -> io::Result<()> {
    match std::fs::remove_dir_all(root.join(pid.to_string())) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
