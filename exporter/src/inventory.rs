//! The node's GPU inventory, persisted (`--state-file`): which GPU (UUID,
//! model) sits at which NVML index and PCI bus ID. NVML cannot read the UUID
//! of a GPU that fell off the bus, so without it a restarted exporter would
//! report the lost GPU without its identity; and the number of GPUs ever
//! seen is what a node that boots short is compared with.
//!
//! The file is small JSON, rewritten atomically (temporary file, fsync,
//! rename) only when something changed. A missing, unreadable or corrupt
//! file is rebuilt from what NVML reports; a file that cannot be written is
//! logged and retried: never a crash.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

/// The file's format version.
const VERSION: u32 = 1;
/// A state file larger than this is not ours (1,000 GPUs take ~250 KB).
const MAX_BYTES: u64 = 1 << 20;

/// One GPU as last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// NVML index when last seen.
    pub index: u32,
    pub uuid: String,
    /// `DDDDDDDD:BB:DD.F`; empty when NVML could not read it.
    #[serde(default)]
    pub pci_bus_id: String,
    #[serde(default)]
    pub model: String,
}

impl Entry {
    /// The slot the GPU occupies: its PCI bus ID, else its UUID.
    fn key(&self) -> String {
        if self.pci_bus_id.is_empty() {
            format!("uuid:{}", self.uuid)
        } else {
            self.pci_bus_id.to_ascii_lowercase()
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    gpus: Vec<Entry>,
}

/// A GPU the file remembers that NVML no longer reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub index: u32,
    pub uuid: Arc<str>,
}

/// What the self-metrics show of the inventory; `None` without a state file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    pub expected: Option<usize>,
    pub file_ok: Option<bool>,
    pub missing: Vec<Missing>,
}

#[derive(Debug, Default)]
pub struct Inventory {
    path: Option<PathBuf>,
    /// Slot (PCI bus ID) → GPU.
    gpus: BTreeMap<String, Entry>,
    /// Slots that answered since the exporter started.
    seen: BTreeSet<String>,
    dirty: bool,
    /// Whether the last load and write succeeded.
    ok: bool,
}

impl Inventory {
    /// Loads `path`; without a path the inventory lives in memory only.
    pub fn load(path: Option<PathBuf>) -> Self {
        let mut inv = Inventory {
            path,
            ok: true,
            ..Inventory::default()
        };
        let Some(path) = inv.path.clone() else {
            return inv;
        };
        match read(&path) {
            Ok(Some(file)) => inv.adopt(file, &path),
            Ok(None) => info!(path = %path.display(), "no GPU state file yet; it is created"),
            Err(e) => {
                warn!(path = %path.display(), error = %e, "GPU state file unusable; rebuilding it from NVML");
                inv.dirty = true;
            }
        }
        inv
    }

    fn adopt(&mut self, file: File, path: &Path) {
        for e in file.gpus {
            let key = e.key();
            if e.uuid.is_empty() || self.gpus.contains_key(&key) {
                warn!(path = %path.display(), slot = %key, "GPU state file entry without UUID or listed twice; dropped");
                self.dirty = true;
                continue;
            }
            self.gpus.insert(key, e);
        }
        info!(path = %path.display(), gpus = self.gpus.len(), "GPU state file loaded");
    }

    /// Records a GPU that answered.
    pub fn observe(&mut self, entry: Entry) {
        let key = entry.key();
        // A GPU that moved slot (or was keyed by UUID before its PCI ID was read).
        let stale: Vec<String> = self
            .gpus
            .iter()
            .filter(|(k, e)| **k != key && e.uuid == entry.uuid)
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            self.gpus.remove(&k);
            self.dirty = true;
        }
        if self.gpus.get(&key) != Some(&entry) {
            self.gpus.insert(key.clone(), entry);
            self.dirty = true;
        }
        self.seen.insert(key);
    }

    /// The UUID of the GPU at `index`, for a GPU that no longer answers: the
    /// one seen there since the exporter started, else the only one the file
    /// remembers there (two = indexes shifted by a reboot: no guess).
    pub fn uuid_at(&self, index: u32) -> Option<Arc<str>> {
        let at: Vec<(&String, &Entry)> =
            self.gpus.iter().filter(|(_, e)| e.index == index).collect();
        let this_run = at.iter().find(|(k, _)| self.seen.contains(*k));
        let (_, e) = match (this_run, at.as_slice()) {
            (Some(found), _) => found,
            (None, [only]) => only,
            _ => return None,
        };
        Some(Arc::from(e.uuid.as_str()))
    }

    /// What the self-metrics show: `answering` are the UUIDs NVML reported
    /// this cycle (answering or not).
    pub fn view(&self, reported: &BTreeSet<Arc<str>>) -> View {
        if self.path.is_none() {
            return View::default();
        }
        let missing = self
            .gpus
            .values()
            .filter(|e| !reported.contains(e.uuid.as_str()))
            .map(|e| Missing {
                index: e.index,
                uuid: Arc::from(e.uuid.as_str()),
            })
            .collect();
        View {
            expected: Some(self.gpus.len()),
            file_ok: Some(self.ok),
            missing,
        }
    }

    /// Writes the file if anything changed; a failure is logged once and
    /// retried on the next call.
    pub fn save(&mut self) {
        let Some(path) = self.path.clone() else {
            return;
        };
        if !self.dirty {
            return;
        }
        let file = File {
            version: VERSION,
            gpus: self.gpus.values().cloned().collect(),
        };
        match write_atomically(&path, &file) {
            Ok(()) => {
                if !self.ok {
                    info!(path = %path.display(), "GPU state file written again");
                }
                self.ok = true;
                self.dirty = false;
            }
            Err(e) => {
                if self.ok {
                    warn!(path = %path.display(), error = %e, "cannot write the GPU state file; a lost GPU will lose its UUID if the exporter restarts");
                }
                self.ok = false;
            }
        }
    }
}

/// `Ok(None)` when there is no file.
fn read(path: &Path) -> Result<Option<File>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_BYTES {
        return Err(format!("{} bytes, more than {MAX_BYTES}", meta.len()));
    }
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    let file: File =
        serde_json::from_slice(&text).map_err(|e| format!("not valid JSON state: {e}"))?;
    if file.version != VERSION {
        return Err(format!(
            "version {} (this exporter writes {VERSION})",
            file.version
        ));
    }
    Ok(Some(file))
}

fn write_atomically(path: &Path, file: &File) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let bytes = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    // The rename itself survives a power loss once the directory is synced.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests;
