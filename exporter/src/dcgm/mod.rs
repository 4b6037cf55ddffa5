//! The DCGM reader (`--dcgm-hostengine`, `--dcgm-lib`): profiling activity
//! of GPUs without GPM (T4, A10G, A100, L4, L40S) from the node's DCGM host
//! engine, served under the families the GPM collector serves.
//!
//! Every DCGM call runs on the reader's own thread; the collection loop
//! only swaps what it wants and what was last read under a lock held for
//! a copy. A host engine that stops answering therefore delays neither
//! `/metrics` nor the NVML families: once a call has been out longer than
//! [`Settings::bound`], or the last read is older than that, its values are
//! dropped and `gpuscale_exporter_dcgm_up` says `timeout`.

pub mod calls;
pub mod ffi;
mod link;
#[cfg(feature = "simulate")]
pub mod simulate;
mod watch;
mod worker;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// DCGM's host engine port (`nv-hostengine`, the GPU Operator's `nvidia-dcgm`).
pub const DEFAULT_PORT: u16 = 5555;
/// The library `--dcgm-lib` loads by default.
pub const DEFAULT_LIB: &str = "libdcgm.so.4";

/// The profiling fields the reader watches, in the order of [`Activity`].
pub const FIELDS: [(u16, &str); 5] = [
    (1001, "gr_engine_active"),
    (1002, "sm_active"),
    (1003, "sm_occupancy"),
    (1004, "pipe_tensor_active"),
    (1005, "dram_active"),
];

/// One entity's values, in the order of [`FIELDS`]; None = no value.
pub type Activity = [Option<f64>; 5];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub lib: PathBuf,
    /// `host:port` of the host engine.
    pub hostengine: String,
    /// The collection interval: how often the fields are sampled and read.
    pub interval: Duration,
}

impl Settings {
    /// The longest a DCGM call may take, and the oldest a read may be, for
    /// its values to be served: two intervals, 1 s to 10 s.
    pub fn bound(&self) -> Duration {
        (self.interval * 2).clamp(Duration::from_secs(1), Duration::from_secs(10))
    }
}

/// A GPU (by UUID) or a MIG instance (GPU UUID, GPU instance id).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Gpu(Arc<str>),
    Mig(Arc<str>, u32),
}

/// What the collection loop wants read: GPUs and MIG instances without GPM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted(pub BTreeSet<Key>);

/// Why the reader serves nothing (`gpuscale_exporter_dcgm_up{reason}`).
pub mod reason {
    pub const NO_LIBRARY: &str = "no_library";
    pub const INIT: &str = "init_failed";
    pub const CONNECT: &str = "connect_failed";
    pub const LOST: &str = "connection_lost";
    pub const TIMEOUT: &str = "timeout";
    pub const ERROR: &str = "error";
    pub const STARTING: &str = "starting";
}

/// State shared by the reader's thread and the collection loop.
#[derive(Debug, Default)]
struct State {
    wanted: Wanted,
    values: HashMap<Key, Activity>,
    read_at: Option<Instant>,
    /// None while connected and reading.
    down: Option<&'static str>,
    in_flight: Option<Instant>,
    /// Fields left out: (field name, reason) -> entities.
    left_out: BTreeMap<(&'static str, &'static str), usize>,
}

/// What one collection sees.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub values: HashMap<Key, Activity>,
    /// None when up.
    pub down: Option<&'static str>,
    pub left_out: BTreeMap<(&'static str, &'static str), usize>,
}

/// The running reader; cheap to clone.
#[derive(Clone)]
pub struct Reader {
    shared: Arc<Mutex<State>>,
    bound: Duration,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Reader {
    /// Starts the reader's thread; it stops when `stop` is set.
    pub fn spawn(settings: Settings, stop: Arc<AtomicBool>) -> Reader {
        let shared = Arc::new(Mutex::new(State {
            down: Some(reason::STARTING),
            ..State::default()
        }));
        let reader = Reader {
            shared: shared.clone(),
            bound: settings.bound(),
        };
        let spawned = std::thread::Builder::new()
            .name("dcgm".into())
            .spawn(move || worker::run(&settings, &shared, &stop));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the DCGM reader thread");
            lock(&reader.shared).down = Some(reason::ERROR);
        }
        reader
    }

    /// Says what to read from now on; returns what may be served now.
    pub fn exchange(&self, wanted: Wanted) -> View {
        let now = Instant::now();
        let mut s = lock(&self.shared);
        s.wanted = wanted;
        let stuck = s
            .in_flight
            .is_some_and(|t| now.duration_since(t) > self.bound);
        let fresh = s
            .read_at
            .is_some_and(|t| now.duration_since(t) <= self.bound);
        let down = match (stuck, s.down) {
            (true, _) => Some(reason::TIMEOUT),
            (false, d) => d,
        };
        if down.is_some() || !fresh {
            return View {
                values: HashMap::new(),
                down: down.or(Some(reason::TIMEOUT)),
                left_out: s.left_out.clone(),
            };
        }
        View {
            values: s.values.clone(),
            down: None,
            left_out: s.left_out.clone(),
        }
    }
}

/// The reader's flags: `--dcgm-hostengine`, `--dcgm-lib`, `--collect-interval`.
#[derive(Debug, Clone, Copy)]
pub struct Flags<'a> {
    pub hostengine: Option<&'a str>,
    pub lib: &'a std::path::Path,
    pub interval: Duration,
}

/// The reader's settings from the flags; None without a host engine.
pub fn settings(flags: &Flags<'_>) -> Option<Settings> {
    let he = flags.hostengine?.trim();
    if he.is_empty() {
        return None;
    }
    let hostengine = if he.contains(':') {
        he.to_string()
    } else {
        format!("{he}:{DEFAULT_PORT}")
    };
    Some(Settings {
        lib: flags.lib.to_path_buf(),
        hostengine,
        interval: flags.interval,
    })
}

/// Keeps what [`configure`] started (a simulated host engine) running.
#[derive(Default)]
pub struct Guard {
    #[cfg(feature = "simulate")]
    _engine: Option<gpuscale_dcgm_sim::hostengine::HostEngine>,
}

/// The reader to run: the flags' host engine, or, under `--simulate` with
/// a scenario that has a `dcgm:` section (`simulated`) and no
/// `--dcgm-hostengine`, a simulated host engine on loopback read through
/// the DCGM simulator library. An empty `--dcgm-hostengine` is no reader.
pub fn configure(flags: &Flags<'_>, simulated: bool) -> Result<(Option<Settings>, Guard), String> {
    if let Some(s) = settings(flags) {
        return Ok((Some(s), Guard::default()));
    }
    // `--dcgm-hostengine ""`: off, under `--simulate` too.
    if flags.hostengine.is_some() {
        return Ok((None, Guard::default()));
    }
    #[cfg(feature = "simulate")]
    if simulated {
        let (s, engine) = simulate::start(flags)?;
        return Ok((
            Some(s),
            Guard {
                _engine: Some(engine),
            },
        ));
    }
    let _ = simulated;
    Ok((None, Guard::default()))
}
