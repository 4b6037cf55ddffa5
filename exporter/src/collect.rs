//! The collection loop: on a timer, discover GPUs, run every collector
//! (timed, isolated), join pods, encode once and publish the snapshot.
//! Runs on its own thread: NVML calls block.

use crate::backoff::Backoff;
use std::collections::{BTreeMap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::error::NvmlError;
use tracing::{error, info, warn};

use crate::collectors::{self, Ctx, Gpu, MigDev, xid::XidLog};
use crate::metrics::dcgm::{self, Exposition};
use crate::metrics::encode::{self, Format};
use crate::metrics::{Collected, DeviceRef, Family, MigRef, NoPods, PodLookup, Subject};
use crate::nvml::Reader;
use crate::nvml::library::LibSource;
use crate::nvml::raw;
use crate::selfmetrics::{self, GpuState, LoopStats};
use crate::snapshot::{Snapshot, Store};

/// The pod join: given a cycle's GPU data, who holds what, plus the
/// mapper's own families. Supplied by the pod mapper.
pub type Join = Box<dyn Fn(&Collected) -> (Arc<dyn PodLookup>, Vec<Family>) + Send>;

pub struct Config {
    pub lib: LibSource,
    pub interval: Duration,
    pub collectors: Vec<String>,
    pub options: collectors::Options,
    pub node: String,
    pub exposition: Exposition,
}

pub fn spawn(
    cfg: Config,
    store: Arc<Store>,
    join: Option<Join>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("collect".into())
        .spawn(move || Loop::new(cfg, store, join, stop).run())
        .unwrap_or_else(|e| panic!("cannot start the collection thread: {e}"))
}

struct Loop {
    cfg: Config,
    store: Arc<Store>,
    join: Option<Join>,
    stop: Arc<AtomicBool>,
    reader: Reader,
    stats: LoopStats,
    xids: XidLog,
    uuids: HashMap<u32, Arc<str>>,
    /// What does not change while the driver is loaded, read once per GPU:
    /// architecture and GPM support.
    traits: HashMap<Arc<str>, (Option<DeviceArchitecture>, bool)>,
}

impl Loop {
    fn new(cfg: Config, store: Arc<Store>, join: Option<Join>, stop: Arc<AtomicBool>) -> Self {
        Self {
            cfg,
            store,
            join,
            stop,
            reader: Reader::default(),
            stats: LoopStats::default(),
            xids: XidLog::default(),
            uuids: HashMap::new(),
            traits: HashMap::new(),
        }
    }

    fn run(mut self) {
        if self.cfg.collectors.iter().any(|c| c == "xid") {
            let (lib, log, stop) = (self.cfg.lib.clone(), self.xids.clone(), self.stop.clone());
            let spawned = std::thread::Builder::new()
                .name("xid-events".into())
                .spawn(move || collectors::xid::run_event_thread(lib, log, stop));
            if let Err(e) = spawned {
                error!(error = %e, "cannot start the XID event thread");
            }
        }
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        while !self.stopped() {
            match self.cfg.lib.init() {
                Ok(nvml) => {
                    info!(library = %self.cfg.lib.describe(), "NVML initialised");
                    backoff.reset();
                    self.stats.nvml_up = true;
                    if let Err(e) = self.session(&nvml) {
                        error!(error = %e, "NVML stopped answering; re-initialising");
                    }
                    self.stats.nvml_up = false;
                }
                Err(e) => {
                    let wait = backoff.next_delay();
                    error!(
                        library = %self.cfg.lib.describe(),
                        cause = %describe_init_error(&e),
                        retry_in = ?wait,
                        "NVML unavailable; serving exporter self-metrics only"
                    );
                    self.stats.nvml_up = false;
                    self.publish(Collected::default(), &BTreeMap::new());
                    self.sleep(wait);
                }
            }
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn sleep(&self, d: Duration) {
        sleep_unless_stopped(d, &self.stop);
    }

    /// Collects until NVML fails as a whole (then the caller re-initialises).
    fn session(&mut self, nvml: &Nvml) -> Result<(), NvmlError> {
        let mut list = collectors::all(&self.cfg.collectors, self.cfg.options, self.xids.clone());
        while !self.stopped() {
            let started = Instant::now();
            let (gpus, migs, states) = self.discover(nvml)?;
            let mut out = Collected {
                devices: gpus.iter().map(|g| g.id.clone()).collect(),
                migs: migs.iter().map(|m| m.id.clone()).collect(),
                ..Collected::default()
            };
            self.reader.lost.clear();
            for c in list.iter_mut() {
                let t = Instant::now();
                self.reader.begin_run();
                let mut cx = Ctx {
                    nvml,
                    gpus: &gpus,
                    migs: &migs,
                    reader: &mut self.reader,
                };
                let ran = catch_unwind(AssertUnwindSafe(|| c.collect(&mut cx, &mut out)));
                if ran.is_err() {
                    error!(
                        collector = c.name(),
                        "collector panicked; its series are left out this cycle"
                    );
                }
                let ok = ran.is_ok() && self.reader.run_ok();
                self.stats
                    .collectors
                    .insert(c.name(), (t.elapsed().as_secs_f64(), ok));
            }
            let mut states = states;
            drop_lost(&mut out, &self.reader.lost, &mut states);
            let gone = states
                .iter()
                .filter(|(i, _)| !gpus.iter().any(|g| g.id.index == **i));
            let gone = gone.filter_map(|(&index, s)| {
                let uuid = s.uuid.clone()?;
                Some(Arc::new(DeviceRef { index, uuid }))
            });
            if self.cfg.collectors.iter().any(|c| c == "xid") {
                out.families
                    .extend(collectors::xid::families(&self.xids, gone));
            }
            self.stats.collections_total += 1;
            self.stats.last_duration = started.elapsed().as_secs_f64();
            self.stats.last_success_unix = now_unix();
            self.publish(out, &states);
            let next = self.cfg.interval.saturating_sub(started.elapsed());
            self.sleep(next);
        }
        Ok(())
    }

    /// The GPUs and MIG instances that answer now, and every GPU's state.
    #[allow(clippy::type_complexity)]
    fn discover<'n>(
        &mut self,
        nvml: &'n Nvml,
    ) -> Result<(Vec<Gpu<'n>>, Vec<MigDev<'n>>, BTreeMap<u32, GpuState>), NvmlError> {
        let count = nvml.device_count()?;
        let (mut gpus, mut migs, mut states) = (Vec::new(), Vec::new(), BTreeMap::new());
        for index in 0..count {
            let answered = nvml
                .device_by_index(index)
                .map_err(|e| ("nvmlDeviceGetHandleByIndex_v2", e));
            let answered = answered.and_then(|d| {
                d.uuid()
                    .map(|u| (d, u))
                    .map_err(|e| ("nvmlDeviceGetUUID", e))
            });
            let (device, uuid) = match answered {
                Ok((d, u)) => (d, Arc::<str>::from(u)),
                Err((function, e)) => {
                    let state = if matches!(e, NvmlError::GpuLost) {
                        "lost"
                    } else {
                        "error"
                    };
                    self.reader.fail(index, function, &e);
                    states.insert(
                        index,
                        GpuState {
                            uuid: self.uuids.get(&index).cloned(),
                            state,
                        },
                    );
                    continue;
                }
            };
            self.uuids.insert(index, uuid.clone());
            let reader = &mut self.reader;
            let (arch, gpm) = self
                .traits
                .entry(uuid.clone())
                .or_insert_with(|| {
                    let gpm = match device.gpm_support() {
                        Ok(supported) => supported,
                        Err(e) => {
                            reader.fail(index, "nvmlGpmQueryDeviceSupport", &e);
                            false
                        }
                    };
                    (device.architecture().ok(), gpm)
                })
                .clone();
            let id = Arc::new(DeviceRef {
                index,
                uuid: uuid.clone(),
            });
            states.insert(
                index,
                GpuState {
                    uuid: Some(uuid),
                    state: "ok",
                },
            );
            if matches!(device.mig_mode(), Ok(m) if m.current == 1) {
                self.discover_migs(nvml, &device, &id, &mut migs);
            }
            gpus.push(Gpu {
                device,
                id,
                arch,
                gpm,
            });
        }
        Ok((gpus, migs, states))
    }

    fn discover_migs<'n>(
        &mut self,
        nvml: &'n Nvml,
        device: &nvml_wrapper::Device<'n>,
        id: &Arc<DeviceRef>,
        migs: &mut Vec<MigDev<'n>>,
    ) {
        let i = id.index;
        let Some(max) = self.reader.read(
            i,
            "nvmlDeviceGetMaxMigDeviceCount",
            device.mig_device_count(),
        ) else {
            return;
        };
        for slot in 0..max {
            let mig = match device.mig_device_by_index(slot) {
                Ok(m) => m,
                // An empty slot.
                Err(NvmlError::NotFound) | Err(NvmlError::InvalidArg) => continue,
                Err(e) => {
                    self.reader
                        .fail(i, "nvmlDeviceGetMigDeviceHandleByIndex", &e);
                    continue;
                }
            };
            let Some(uuid) = self.reader.read(i, "nvmlDeviceGetUUID", mig.uuid()) else {
                continue;
            };
            let Some(gi) = self.reader.read(
                i,
                "nvmlDeviceGetGpuInstanceId",
                raw::gpu_instance_id(nvml, &mig),
            ) else {
                continue;
            };
            let ci = self.reader.read(
                i,
                "nvmlDeviceGetComputeInstanceId",
                raw::compute_instance_id(nvml, &mig),
            );
            let name = self
                .reader
                .read(i, "nvmlDeviceGetName", mig.name())
                .unwrap_or_default();
            // "NVIDIA H100 80GB HBM3 MIG 3g.40gb" → "3g.40gb"
            let profile = name
                .rsplit_once("MIG ")
                .map(|(_, p)| p.to_string())
                .unwrap_or(name);
            let id = Arc::new(MigRef {
                gpu: id.clone(),
                mig_uuid: Arc::from(uuid),
                gpu_instance_id: gi,
            });
            migs.push(MigDev {
                device: mig,
                id,
                compute_instance_id: ci,
                profile,
            });
        }
    }

    fn publish(&mut self, mut out: Collected, states: &BTreeMap<u32, GpuState>) {
        // The join reads `gpu_info` (GPU models for prices): join before taking the families.
        let (lookup, pod_families): (Arc<dyn PodLookup>, Vec<Family>) = match &self.join {
            Some(join) => match catch_unwind(AssertUnwindSafe(|| join(&out))) {
                Ok(r) => r,
                Err(_) => {
                    error!("pod join panicked; serving GPU series without pod labels this cycle");
                    (Arc::new(NoPods), Vec::new())
                }
            },
            None => (Arc::new(NoPods), Vec::new()),
        };
        let mut families = merge(std::mem::take(&mut out.families));
        families.extend(pod_families);
        families.extend(selfmetrics::families(
            &self.stats,
            &self.reader,
            states,
            &self.cfg.node,
        ));
        let mut families = merge(families);
        selfmetrics::label_node(&mut families, &self.cfg.node);
        let text = self.render(&families, &out, lookup.as_ref(), Format::Text);
        let om = self.render(&families, &out, lookup.as_ref(), Format::OpenMetrics);
        let ready = self.stats.nvml_up && self.stats.collections_total > 0;
        self.store.publish(Snapshot::new(text, om, ready));
    }
}

impl Loop {
    /// One exposition: the native families (or only the exporter's own under
    /// `--compat dcgm-only`), then the dcgm-exporter families if asked for.
    fn render(
        &self,
        families: &[Family],
        out: &Collected,
        pods: &dyn PodLookup,
        format: Format,
    ) -> Vec<u8> {
        let exposition = self.cfg.exposition;
        let native = exposition.native;
        let mut text = String::with_capacity(encode::capacity(families));
        let served = families
            .iter()
            .filter(|f| native || f.name.starts_with("gpuscale_"));
        encode::write_families(&mut text, served, &self.cfg.node, pods, format);
        if let Some(opts) = &exposition.dcgm {
            let input = dcgm::Input {
                families,
                devices: &out.devices,
                migs: &out.migs,
                node: &self.cfg.node,
                pods,
            };
            dcgm::write(&mut text, &input, opts, format);
        }
        encode::finish(text, format)
    }
}

/// Removes the series of GPUs found lost during the cycle.
fn drop_lost(
    out: &mut Collected,
    lost: &std::collections::HashSet<u32>,
    states: &mut BTreeMap<u32, GpuState>,
) {
    if lost.is_empty() {
        return;
    }
    for i in lost {
        if let Some(s) = states.get_mut(i) {
            s.state = "lost";
        }
    }
    let gone = |s: &Subject| match s {
        Subject::Global => false,
        Subject::Device(d) => lost.contains(&d.index),
        Subject::Mig(m) => lost.contains(&m.gpu.index),
        Subject::Process(p) => lost.contains(&p.gpu.index),
    };
    for f in &mut out.families {
        // XIDs stay: the one that took the GPU down is what the alert needs.
        if !f.name.starts_with("gpu_xid_") {
            f.samples.retain(|s| !gone(&s.subject));
        }
    }
    out.devices.retain(|d| !lost.contains(&d.index));
    out.migs.retain(|m| !lost.contains(&m.gpu.index));
    out.processes
        .retain(|p| !lost.contains(&p.proc_ref.gpu.index));
}

/// Joins families of the same name (two collectors may feed one family).
fn merge(families: Vec<Family>) -> Vec<Family> {
    let mut index: HashMap<&'static str, usize> = HashMap::new();
    let mut merged: Vec<Family> = Vec::with_capacity(families.len());
    for f in families {
        match index.get(f.name) {
            Some(&i) => merged[i].samples.extend(f.samples),
            None => {
                index.insert(f.name, merged.len());
                merged.push(f);
            }
        }
    }
    merged
}

/// Sleeps for `d`, waking early (within 100 ms) once `stop` is set.
pub(crate) fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

pub(crate) fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn describe_init_error(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(inner) => format!("cannot load the NVML library: {inner}"),
        NvmlError::DriverNotLoaded => "the NVIDIA kernel driver is not loaded".into(),
        NvmlError::NoPermission => "no permission to open the GPU devices".into(),
        NvmlError::FailedToLoadSymbol(s) => {
            format!("the NVML library lacks a required function: {s}")
        }
        other => {
            let msg = other.to_string();
            warn!(kind = crate::nvml::error_kind(other), "NVML init error");
            msg
        }
    }
}
