//! The collection loop: on a timer, discover GPUs, run every collector
//! (timed, isolated), join pods, encode once and publish the snapshot.
//! Runs on its own thread: NVML calls block.

use crate::backoff::Backoff;
use crate::clock::{sleep_unless_stopped, unix_now};
use std::collections::{BTreeMap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use tracing::{error, info, warn};

use crate::collectors::profile::Profile;
use crate::collectors::xid::{self, XidLog};
use crate::collectors::{self, Ctx, Gpu, MigDev, Running, Setup, fleet};
use crate::inventory::{self, Inventory};
use crate::metrics::dcgm::{self, Exposition};
use crate::metrics::encode::{self, Format};
use crate::metrics::{
    Collected, DeviceFacts, DeviceRef, Family, MigRef, NoPods, PodLookup, Subject,
};
use crate::nvml::library::LibSource;
use crate::nvml::raw;
use crate::nvml::{FixedRead, Reader};
use crate::selfmetrics::{CollectorRun, GpuHealth, GpuState, LoopStats, SelfMetrics};
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
    /// `--state-file`: where the GPU inventory survives restarts.
    pub state_file: Option<std::path::PathBuf>,
    /// `--dcgm-hostengine`: the DCGM reader, started with the loop.
    pub dcgm: Option<crate::dcgm::Settings>,
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
    selfm: SelfMetrics,
    setup: Setup,
    /// Whether GPM samples GPUs that support it (and so reports their PCIe rates).
    gpm_on: bool,
    xid_on: bool,
    uuids: HashMap<u32, Arc<str>>,
    traits: HashMap<Arc<str>, Traits>,
    /// The driver's version, read once per NVML session (`settled`: not to
    /// be read again).
    driver: FixedRead<Arc<str>>,
    inventory: Inventory,
}

/// What does not change while the driver is loaded, read once per GPU.
#[derive(Debug, Clone)]
struct Traits {
    arch: Option<DeviceArchitecture>,
    gpm_supported: bool,
    facts: DeviceFacts,
}

const UNREAD: FixedRead<Arc<str>> = FixedRead {
    value: None,
    settled: false,
};

/// The GPUs and MIG instances that answer now, and every GPU's state.
#[derive(Default)]
struct Discovery<'n> {
    gpus: Vec<Gpu<'n>>,
    migs: Vec<MigDev<'n>>,
    states: BTreeMap<u32, GpuState>,
}

impl Loop {
    fn new(cfg: Config, store: Arc<Store>, join: Option<Join>, stop: Arc<AtomicBool>) -> Self {
        let setup = Setup {
            options: cfg.options,
            xids: XidLog::default(),
            // No reader without the collector that serves what it reads.
            dcgm: (cfg.dcgm.clone())
                .filter(|_| collectors::is_enabled(&cfg.collectors, &collectors::dcgm::SPEC))
                .map(|s| crate::dcgm::Reader::spawn(s, stop.clone())),
        };
        let inventory = Inventory::load(cfg.state_file.clone());
        Self {
            selfm: SelfMetrics::new().with_profile(cfg.options.profile),
            gpm_on: collectors::is_enabled(&cfg.collectors, &collectors::gpm::SPEC),
            xid_on: collectors::is_enabled(&cfg.collectors, &xid::SPEC),
            cfg,
            store,
            join,
            stop,
            reader: Reader::default(),
            stats: LoopStats::default(),
            setup,
            uuids: HashMap::new(),
            traits: HashMap::new(),
            driver: UNREAD,
            inventory,
        }
    }

    fn run(mut self) {
        if self.xid_on {
            let (lib, log, stop) = (
                self.cfg.lib.clone(),
                self.setup.xids.clone(),
                self.stop.clone(),
            );
            let spawned = std::thread::Builder::new()
                .name("xid-events".into())
                .spawn(move || xid::run_event_thread(lib, log, stop));
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
                    self.driver = UNREAD;
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
        let mut list = collectors::build(nvml, &self.cfg.collectors, &self.setup);
        while !self.stopped() {
            let started = Instant::now();
            let Discovery {
                gpus,
                migs,
                mut states,
            } = self.discover(nvml)?;
            let mut out = Collected {
                devices: gpus.iter().map(|g| g.id.clone()).collect(),
                migs: migs.iter().map(|m| m.id.clone()).collect(),
                ..Collected::default()
            };
            self.reader.lost.clear();
            prepare_all(&mut list, nvml, (&gpus, &migs), &mut self.reader);
            for c in list.iter_mut() {
                let mut cx = Ctx {
                    nvml,
                    gpus: &gpus,
                    migs: &migs,
                    reader: &mut self.reader,
                };
                let run = run_one(c, &mut cx, &mut out);
                self.stats.collectors.insert(c.spec.name, run);
            }
            drop_lost(&mut out, &self.reader.lost, &mut states);
            if self.xid_on {
                let gone = gone_devices(&states, &gpus);
                out.families
                    .extend(xid::families(&self.setup.xids, gone.into_iter()));
            }
            self.stats.collections_total += 1;
            self.stats.last_duration = started.elapsed().as_secs_f64();
            self.stats.last_success_unix = unix_now();
            // Saved before it is served: a GPU /metrics counts as expected
            // is remembered even if the exporter is killed right after.
            self.inventory.save();
            self.publish(out, &states);
            let next = self.cfg.interval.saturating_sub(started.elapsed());
            self.sleep(next);
        }
        Ok(())
    }

    fn discover<'n>(&mut self, nvml: &'n Nvml) -> Result<Discovery<'n>, NvmlError> {
        let mut found = Discovery::default();
        if !self.driver.settled {
            let read = self.reader.read_fixed(
                u32::MAX,
                "nvmlSystemGetDriverVersion",
                nvml.sys_driver_version(),
            );
            self.driver = FixedRead {
                value: read.value.map(Arc::from),
                settled: read.settled,
            };
        }
        for index in 0..nvml.device_count()? {
            let gpu = match self.probe_device(nvml, index) {
                Ok(gpu) => gpu,
                Err(state) => {
                    found.states.insert(index, state);
                    continue;
                }
            };
            let state = GpuState {
                uuid: Some(gpu.id.uuid.clone()),
                state: GpuHealth::Ok,
            };
            found.states.insert(index, state);
            if matches!(gpu.device.mig_mode(), Ok(m) if m.current == 1) {
                self.discover_migs(nvml, &gpu.device, &gpu.id, &mut found.migs);
            }
            found.gpus.push(gpu);
        }
        Ok(found)
    }

    /// One GPU by index: its handle, UUID and traits, or the state it is in
    /// when it does not answer.
    fn probe_device<'n>(&mut self, nvml: &'n Nvml, index: u32) -> Result<Gpu<'n>, GpuState> {
        let answered = nvml
            .device_by_index(index)
            .map_err(|e| ("nvmlDeviceGetHandleByIndex_v2", e))
            .and_then(|d| {
                d.uuid()
                    .map(|u| (d, Arc::<str>::from(u)))
                    .map_err(|e| ("nvmlDeviceGetUUID", e))
            });
        let (device, uuid) = match answered {
            Ok(found) => found,
            Err((function, e)) => {
                self.reader.fail(index, function, &e);
                // NVML cannot name a lost GPU: the name it had, this run or before a restart.
                let known = self.uuids.get(&index).cloned();
                return Err(GpuState {
                    uuid: known.or_else(|| self.inventory.uuid_at(index)),
                    state: GpuHealth::of_error(&e),
                });
            }
        };
        self.uuids.insert(index, uuid.clone());
        let traits = self.traits_of(&device, index, &uuid);
        let text = |v: &Option<Arc<str>>| v.as_deref().unwrap_or_default().to_owned();
        self.inventory.observe(inventory::Entry {
            index,
            uuid: uuid.to_string(),
            // Empty when NVML could not read them (the inventory keys by UUID then).
            pci_bus_id: text(&traits.facts.pci_bus_id),
            model: text(&traits.facts.model),
        });
        Ok(Gpu {
            device,
            id: Arc::new(DeviceRef {
                index,
                uuid,
                facts: DeviceFacts {
                    driver_version: self.driver.value.clone(),
                    ..traits.facts
                },
            }),
            arch: traits.arch,
            gpm: self.gpm_on && traits.gpm_supported,
        })
    }

    /// A GPU's traits, read through the reader once (again next cycle when
    /// a read failed in a way worth retrying).
    fn traits_of(&mut self, device: &Device<'_>, index: u32, uuid: &Arc<str>) -> Traits {
        if let Some(known) = self.traits.get(uuid) {
            return known.clone();
        }
        let reader = &mut self.reader;
        let gpm = reader.read_fixed(index, "nvmlGpmQueryDeviceSupport", device.gpm_support());
        let model = reader.read_fixed(index, "nvmlDeviceGetName", device.name());
        let pci = reader.read_fixed(
            index,
            "nvmlDeviceGetPciInfo_v3",
            device.pci_info().map(|p| p.bus_id),
        );
        let traits = Traits {
            arch: device.architecture().ok(),
            gpm_supported: gpm.value.unwrap_or(false),
            facts: DeviceFacts {
                model: model.value.map(Arc::from),
                pci_bus_id: pci.value.map(Arc::from),
                // Per session, not per GPU: see `probe_device`.
                driver_version: None,
            },
        };
        if gpm.settled && model.settled && pci.settled {
            self.traits.insert(uuid.clone(), traits.clone());
        }
        traits
    }

    fn discover_migs<'n>(
        &mut self,
        nvml: &'n Nvml,
        device: &Device<'n>,
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
            let name = self.reader.read(i, "nvmlDeviceGetName", mig.name());
            let id = Arc::new(MigRef {
                gpu: id.clone(),
                mig_uuid: Arc::from(uuid),
                gpu_instance_id: gi,
                profile: name.as_deref().map(mig_profile),
            });
            migs.push(MigDev {
                device: mig,
                id,
                compute_instance_id: ci,
            });
        }
    }

    fn publish(&mut self, mut out: Collected, states: &BTreeMap<u32, GpuState>) {
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
        let families = merge(families);
        // `--profile fleet` serves less, while `--compat dcgm` reads it all.
        let fleet = (self.cfg.options.profile == Profile::Fleet).then(|| fleet::serve(&families));
        self.selfm.record(&self.stats, self.reader.errors(), states);
        let reported = states.values().filter_map(|s| s.uuid.clone()).collect();
        let mut view = self.inventory.view(&reported);
        if !self.stats.nvml_up {
            // NVML down says nothing about which GPUs are there.
            view.missing.clear();
        }
        self.selfm.record_inventory(&view);
        let own = self.selfm.gather();
        let served = (fleet.as_deref().unwrap_or(&families), &families[..]);
        let text = self.render(served, &own, &out, lookup.as_ref(), Format::Text);
        let om = self.render(served, &own, &out, lookup.as_ref(), Format::OpenMetrics);
        let ready = self.stats.nvml_up && self.stats.collections_total > 0;
        self.store.publish(Snapshot::new(text, om, ready));
    }
}

impl Loop {
    /// One exposition: the native families (or only the exporter's own under
    /// `--compat dcgm-only`), its self-metrics (`own`), then the
    /// dcgm-exporter families if asked for.
    fn render(
        &self,
        (served, families): (&[Family], &[Family]),
        own: &[Family],
        out: &Collected,
        pods: &dyn PodLookup,
        format: Format,
    ) -> Vec<u8> {
        let exposition = self.cfg.exposition;
        let native = exposition.native;
        let mut text = String::with_capacity(encode::capacity(served) + encode::capacity(own));
        let served = served
            .iter()
            .filter(|f| native || f.name.starts_with("gpuscale_"));
        let served = served.chain(own);
        encode::write_families(&mut text, served, &self.cfg.node, pods, format);
        if let Some(opts) = &exposition.dcgm {
            let input = dcgm::Input {
                families,
                devices: &out.devices,
                migs: &out.migs,
                last_xids: out.last_xids.as_ref(),
                node: &self.cfg.node,
                pods,
            };
            dcgm::write(&mut text, &input, opts, format);
        }
        encode::finish(text, format)
    }
}

/// Lets every collector start what runs beside the cycle (the DCGM read);
/// a panic there is logged and costs nothing else.
fn prepare_all<'n>(
    list: &mut [Running<'n>],
    nvml: &'n Nvml,
    (gpus, migs): (&[Gpu<'n>], &[MigDev<'n>]),
    reader: &mut Reader,
) {
    let cx = Ctx {
        nvml,
        gpus,
        migs,
        reader,
    };
    for c in list.iter_mut() {
        if catch_unwind(AssertUnwindSafe(|| c.collector.prepare(&cx))).is_err() {
            error!(
                collector = c.spec.name,
                "collector panicked while preparing"
            );
        }
    }
}

/// Runs one collector, timed; a panic costs only its own series.
fn run_one<'n>(c: &mut Running<'n>, cx: &mut Ctx<'_, 'n>, out: &mut Collected) -> CollectorRun {
    let t = Instant::now();
    cx.reader.begin_run();
    let ran = catch_unwind(AssertUnwindSafe(|| c.collector.collect(cx, out)));
    if ran.is_err() {
        error!(
            collector = c.spec.name,
            "collector panicked; its series are left out this cycle"
        );
    }
    CollectorRun {
        duration_seconds: t.elapsed().as_secs_f64(),
        success: ran.is_ok() && cx.reader.run_ok(),
    }
}

/// GPUs with a state that no longer answer (lost, error): their XIDs stay.
fn gone_devices(states: &BTreeMap<u32, GpuState>, gpus: &[Gpu<'_>]) -> Vec<Arc<DeviceRef>> {
    states
        .iter()
        .filter(|(i, _)| !gpus.iter().any(|g| g.id.index == **i))
        .filter_map(|(&index, s)| {
            let uuid = s.uuid.clone()?;
            Some(Arc::new(DeviceRef::new(index, uuid)))
        })
        .collect()
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
            s.state = GpuHealth::Lost;
        }
    }
    let gone = |s: &Subject| match s {
        Subject::Global | Subject::Node => false,
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

/// "NVIDIA H100 80GB HBM3 MIG 3g.40gb" → "3g.40gb" (the whole name when it
/// has no profile).
fn mig_profile(name: &str) -> Arc<str> {
    Arc::from(name.rsplit_once("MIG ").map_or(name, |(_, p)| p))
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
