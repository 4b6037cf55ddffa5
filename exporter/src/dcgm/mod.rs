//! The DCGM reader (`--dcgm-hostengine`, `--dcgm-lib`): profiling activity
//! of GPUs without GPM (T4, A10G, A100, L4, L40S) from the node's DCGM host
//! engine, served under the families the GPM collector serves.
//!
//! Every DCGM call runs on the reader's own thread. Each collection asks it
//! for one read as the collection starts ([`Reader::ask`]), collects NVML
//! meanwhile, and serves that read only ([`Reader::answer`]): a read that
//! failed, or that has not come back within [`Settings::wait`], leaves the
//! families out of that very collection, so a stopped host engine's values
//! are gone within one interval and no value older than the collection is
//! served. While a read is still out, later collections ask nothing and do
//! not wait: a host engine that stops answering delays neither `/metrics`
//! nor the NVML families.

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
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
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
    /// The connect timeout given to DCGM: two intervals, 1 s to 10 s.
    pub fn bound(&self) -> Duration {
        (self.interval * 2).clamp(Duration::from_secs(1), Duration::from_secs(10))
    }

    /// How long a collection waits for the read it asked for (while NVML is
    /// collected): half the interval, at most 1 s. A read not back by then
    /// is `timeout`, and its values are never served.
    pub fn wait(&self) -> Duration {
        (self.interval / 2).min(Duration::from_secs(1))
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
    /// The last read a collection asked for, and the last one answered.
    asked: u64,
    answered: u64,
    /// The values of read `answered` (none when it failed).
    values: HashMap<Key, Activity>,
    /// None while connected and the last read succeeded.
    down: Option<&'static str>,
    /// Connected, no call out: the next collection may ask for a read.
    ready: bool,
    /// When the call now out began.
    in_flight: Option<Instant>,
    /// Fields left out: (field name, reason) -> entities.
    left_out: BTreeMap<(&'static str, &'static str), usize>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a read is asked for and when one is answered.
    changed: Condvar,
}

/// What one collection sees.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub values: HashMap<Key, Activity>,
    /// None when up.
    pub down: Option<&'static str>,
    pub left_out: BTreeMap<(&'static str, &'static str), usize>,
}

/// A read a collection asked for, or why it asked none.
#[derive(Debug, Clone, Copy)]
pub enum Pending {
    Asked { read: u64, by: Instant },
    Not(&'static str),
}

/// The running reader; cheap to clone.
#[derive(Clone)]
pub struct Reader {
    shared: Arc<Shared>,
    wait: Duration,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Reader {
    /// Starts the reader's thread; it stops when `stop` is set.
    pub fn spawn(settings: Settings, stop: Arc<AtomicBool>) -> Reader {
        let shared = Arc::new(Shared::default());
        lock(&shared.state).down = Some(reason::STARTING);
        let reader = Reader {
            shared: shared.clone(),
            wait: settings.wait(),
        };
        let spawned = std::thread::Builder::new()
            .name("dcgm".into())
            .spawn(move || worker::run(&settings, &shared, &stop));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the DCGM reader thread");
            lock(&reader.shared.state).down = Some(reason::ERROR);
        }
        reader
    }

    /// At the start of a collection: asks for a read of `wanted` now, unless
    /// the reader is not connected or a read is still out (then says why).
    pub fn ask(&self, wanted: Wanted) -> Pending {
        let now = Instant::now();
        let mut s = lock(&self.shared.state);
        s.wanted = wanted;
        if !s.ready {
            let stuck = s
                .in_flight
                .is_some_and(|t| now.duration_since(t) > self.wait);
            return Pending::Not(match s.down {
                Some(why) if !stuck => why,
                _ => reason::TIMEOUT,
            });
        }
        s.ready = false;
        s.asked += 1;
        let read = s.asked;
        drop(s);
        self.shared.changed.notify_all();
        Pending::Asked {
            read,
            by: now + self.wait,
        }
    }

    /// What the collection serves: the read it asked for, waited for until
    /// its deadline; nothing, and why, when it failed or is late.
    pub fn answer(&self, pending: Pending) -> View {
        let (read, by) = match pending {
            Pending::Asked { read, by } => (read, by),
            Pending::Not(why) => return down(&lock(&self.shared.state), why),
        };
        let mut s = lock(&self.shared.state);
        while s.answered < read {
            let left = by.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return down(&s, reason::TIMEOUT);
            }
            s = (self.shared.changed.wait_timeout(s, left))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        match s.down {
            Some(why) => down(&s, why),
            None => View {
                values: s.values.clone(),
                down: None,
                left_out: s.left_out.clone(),
            },
        }
    }
}

/// Nothing to serve, and why.
fn down(s: &State, why: &'static str) -> View {
    View {
        values: HashMap::new(),
        down: Some(why),
        left_out: s.left_out.clone(),
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
