//! `/proc/<pid>/cgroup` → pod UID and container ID.
//!
//! Formats seen on Kubernetes nodes (v1 lines are `id:controllers:path`, the
//! v2 line is `0::path`):
//! - systemd driver: `…/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`
//!   (`crio-<id>.scope` for CRI-O, `docker-<id>.scope` for Docker);
//! - cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>`;
//! - containerd's nested systemd form: `…/kubepods-pod<uid>.slice:cri-containerd:<id>`.

use std::io;
use std::path::Path;

use super::families::Unattributed;

/// The pod a process runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCgroup {
    /// Pod UID in its API form (dashes).
    pub pod_uid: String,
    /// Container ID (64 hex) when the path names one.
    pub container_id: Option<String>,
}

/// Why a process could not be attributed from its cgroup file.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read {path}: {source}")]
    Unreadable { path: String, source: io::Error },
    #[error("malformed cgroup line {line:?}")]
    Malformed { line: String },
    /// A host process, or a container runtime path that names no pod.
    #[error("not in a pod cgroup")]
    NotAPod,
}

impl CgroupError {
    /// The reason the unattributed-process self-metrics give.
    pub fn reason(&self) -> Unattributed {
        match self {
            Self::Unreadable { .. } => Unattributed::CgroupUnreadable,
            Self::Malformed { .. } => Unattributed::CgroupMalformed,
            Self::NotAPod => Unattributed::NotAPod,
        }
    }
}

/// Reads and parses `<proc_root>/<pid>/cgroup`.
pub fn read_pod_cgroup(proc_root: &Path, pid: u32) -> Result<PodCgroup, CgroupError> {
    let path = proc_root.join(pid.to_string()).join("cgroup");
    let text = std::fs::read_to_string(&path).map_err(|source| CgroupError::Unreadable {
        path: path.display().to_string(),
        source,
    })?;
    parse_cgroup(&text)
}

/// Parses the text of a cgroup file. The v2 line wins; on v1 any controller
/// line with a pod path does (they all name the same pod).
pub fn parse_cgroup(text: &str) -> Result<PodCgroup, CgroupError> {
    let mut v1 = None;
    let mut any_line = false;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        any_line = true;
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(CgroupError::Malformed {
                line: line.to_owned(),
            });
        };
        if id.parse::<u32>().is_err() || !path.starts_with('/') {
            return Err(CgroupError::Malformed {
                line: line.to_owned(),
            });
        }
        let parsed = parse_path(path);
        if id == "0" && controllers.is_empty() {
            if let Some(found) = parsed {
                return Ok(found);
            }
        } else if v1.is_none() {
            v1 = parsed;
        }
    }
    if !any_line {
        return Err(CgroupError::Malformed {
            line: String::new(),
        });
    }
    v1.ok_or(CgroupError::NotAPod)
}

/// Finds the pod UID segment and the container segment after it.
fn parse_path(path: &str) -> Option<PodCgroup> {
    // `:` separates the slice from the runtime in containerd's nested form.
    let segments: Vec<&str> = path.split(['/', ':']).filter(|s| !s.is_empty()).collect();
    let pod_at = segments.iter().rposition(|s| pod_uid_of(s).is_some())?;
    let pod_uid = pod_uid_of(segments[pod_at])?;
    let container_id = segments[pod_at + 1..]
        .iter()
        .rev()
        .find_map(|s| container_id_of(s));
    Some(PodCgroup {
        pod_uid,
        container_id,
    })
}

/// `pod<uid>` (cgroupfs) or `kubepods[-qos]-pod<uid_underscored>.slice` (systemd).
fn pod_uid_of(segment: &str) -> Option<String> {
    let segment = segment.strip_suffix(".slice").unwrap_or(segment);
    let at = segment.rfind("pod")?;
    let prefix = &segment[..at];
    if !(prefix.is_empty() || prefix.starts_with("kubepods")) {
        return None;
    }
    let uid = segment[at + 3..].replace('_', "-");
    is_uid(&uid).then_some(uid)
}

fn is_uid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `<id>`, `cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`,
/// or the bare `<id>` after `cri-containerd`/`crio` in the nested form.
fn container_id_of(segment: &str) -> Option<String> {
    let s = segment.strip_suffix(".scope").unwrap_or(segment);
    // crio-conmon-<id> is CRI-O's monitor process, not the container.
    if s.starts_with("crio-conmon-") {
        return None;
    }
    let s = ["cri-containerd-", "crio-", "docker-", "containerd-"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .unwrap_or(s);
    (s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())).then(|| s.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6a1c0d6e-0000-4000-8000-000000000001";
    const UID_: &str = "6a1c0d6e_0000_4000_8000_000000000001";
    const CID: &str = "0f3e0c1b2a0f3e0c1b2a0f3e0c1b2a0f3e0c1b2a0f3e0c1b2a0f3e0c1b2a0f3e";

    fn ok(text: &str) -> PodCgroup {
        match parse_cgroup(text) {
            Ok(found) => found,
            Err(e) => panic!("{text:?}: {e}"),
        }
    }

    fn expect(text: &str) {
        assert_eq!(
            ok(text),
            PodCgroup {
                pod_uid: UID.into(),
                container_id: Some(CID.into())
            },
            "{text}"
        );
    }

    #[test]
    fn v2_systemd_containerd() {
        expect(&format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{CID}.scope\n"
        ));
    }

    #[test]
    fn v2_systemd_guaranteed_crio() {
        expect(&format!(
            "0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{CID}.scope"
        ));
    }

    #[test]
    fn v2_cgroupfs() {
        expect(&format!("0::/kubepods/besteffort/pod{UID}/{CID}"));
    }

    #[test]
    fn v2_nested_containerd_systemd() {
        expect(&format!(
            "0::/system.slice/containerd.service/kubepods-besteffort-pod{UID_}.slice:cri-containerd:{CID}"
        ));
    }

    #[test]
    fn v1_cgroupfs_docker() {
        expect(&format!(
            "12:pids:/kubepods/burstable/pod{UID}/{CID}\n11:memory:/kubepods/burstable/pod{UID}/{CID}\n1:name=systemd:/kubepods/burstable/pod{UID}/{CID}\n0::/\n"
        ));
    }

    #[test]
    fn v1_systemd_docker() {
        expect(&format!(
            "4:devices:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{CID}.scope\n"
        ));
    }

    #[test]
    fn v2_seen_from_another_cgroup_namespace() {
        // A containerized exporter reads host /proc from inside its own
        // cgroup namespace: paths are relative to it.
        expect(&format!(
            "0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{CID}.scope"
        ));
    }

    #[test]
    fn pod_without_container_segment() {
        let found = ok(&format!("0::/kubepods/pod{UID}"));
        assert_eq!(found.pod_uid, UID);
        assert_eq!(found.container_id, None);
    }

    #[test]
    fn conmon_is_not_a_container() {
        let found = ok(&format!(
            "0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{CID}.scope"
        ));
        assert_eq!(found.container_id, None);
    }

    #[test]
    fn host_process_is_not_a_pod() {
        assert!(matches!(
            parse_cgroup("0::/system.slice/nvidia-persistenced.service\n"),
            Err(CgroupError::NotAPod)
        ));
        assert!(matches!(
            parse_cgroup("0::/user.slice/podman-pod.slice\n"),
            Err(CgroupError::NotAPod)
        ));
    }

    #[test]
    fn malformed_files() {
        for text in ["", "garbage", "x::/kubepods", "0::relative/path", "\n\n"] {
            assert!(
                matches!(parse_cgroup(text), Err(CgroupError::Malformed { .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn unreadable_file() {
        let err = read_pod_cgroup(Path::new("/nonexistent-proc"), 1);
        assert!(matches!(err, Err(CgroupError::Unreadable { .. })));
    }
}
