//! The library's global state: the init count, the scenario, and one
//! session per connection to a host engine with its groups and watches.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gpuscale_nvml_sim::scenario::{self, Scenario};

use gpuscale_dcgm_abi::*;

/// Environment variable naming the scenario file (the NVML simulator's).
pub const ENV_SCENARIO: &str = "GPUSCALE_SIM_SCENARIO";
/// Environment variable with the scenario epoch (Unix seconds).
pub const ENV_EPOCH: &str = "GPUSCALE_SIM_EPOCH";
/// DCGM's host engine port.
const DEFAULT_PORT: u16 = 5555;
/// dcgmConnect_v2's timeout when the caller gives none.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

pub(crate) struct World {
    pub scenario: Scenario,
    pub epoch: f64,
}

impl World {
    pub fn now(&self) -> f64 {
        unix_now() - self.epoch
    }
}

#[derive(Default)]
struct Global {
    inits: u32,
    world: Option<Arc<World>>,
    next_handle: usize,
    sessions: HashMap<usize, Arc<Session>>,
    first_init: Option<f64>,
}

static GLOBAL: Mutex<Option<Global>> = Mutex::new(None);

fn with_global<R>(f: impl FnOnce(&mut Global) -> R) -> R {
    let mut g = lock(&GLOBAL);
    f(g.get_or_insert_with(Global::default))
}

fn load_world(first_init: Option<f64>) -> Result<World, String> {
    let scenario = scenario::from_env()?;
    let epoch = match std::env::var(ENV_EPOCH) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("{ENV_EPOCH}={v:?}: expected Unix seconds (a number)"))?,
        _ => first_init.unwrap_or_else(unix_now),
    };
    Ok(World { scenario, epoch })
}

/// dcgmInit: count up; read the scenario on the first.
pub(crate) fn init() -> dcgmReturn_t {
    with_global(|g| {
        if g.inits == 0 {
            match load_world(g.first_init) {
                Ok(w) => {
                    g.first_init.get_or_insert(w.epoch);
                    g.world = Some(Arc::new(w));
                }
                Err(msg) => {
                    eprintln!("gpuscale-dcgm-sim: cannot load the scenario: {msg}");
                    return DCGM_ST_INIT_ERROR;
                }
            }
        }
        g.inits += 1;
        DCGM_ST_OK
    })
}

/// dcgmShutdown: count down; at zero every session is closed.
pub(crate) fn shutdown() -> dcgmReturn_t {
    with_global(|g| {
        if g.inits == 0 {
            return DCGM_ST_UNINITIALIZED;
        }
        g.inits -= 1;
        if g.inits == 0 {
            g.world = None;
            for s in g.sessions.drain().map(|(_, s)| s) {
                s.close();
            }
        }
        DCGM_ST_OK
    })
}

pub(crate) fn world() -> Result<Arc<World>, dcgmReturn_t> {
    with_global(|g| g.world.clone()).ok_or(DCGM_ST_UNINITIALIZED)
}

pub(crate) fn session(handle: dcgmHandle_t) -> Result<Arc<Session>, dcgmReturn_t> {
    with_global(|g| g.sessions.get(&handle).cloned()).ok_or(DCGM_ST_BADPARAM)
}

/// dcgmConnect_v2: a TCP connection to the host engine and its greeting.
pub(crate) fn connect(address: &str, timeout_ms: u32) -> Result<dcgmHandle_t, dcgmReturn_t> {
    world()?;
    let timeout = match timeout_ms {
        0 => DEFAULT_CONNECT_TIMEOUT,
        ms => Duration::from_millis(u64::from(ms)),
    };
    let target = if address.contains(':') {
        address.to_string()
    } else {
        format!("{address}:{DEFAULT_PORT}")
    };
    let addr = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or(DCGM_ST_BADPARAM)?;
    let stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|_| DCGM_ST_CONNECTION_NOT_VALID)?;
    let session = Session::new(stream);
    // The greeting is bounded by the connect timeout; later requests wait
    // as long as the host engine takes.
    session.request_within("dcgmConnect_v2", Some(timeout))?;
    Ok(with_global(|g| {
        g.next_handle += 1;
        let handle = g.next_handle;
        g.sessions.insert(handle, Arc::new(session));
        handle
    }))
}

pub(crate) fn disconnect(handle: dcgmHandle_t) -> Result<(), dcgmReturn_t> {
    let s = with_global(|g| g.sessions.remove(&handle)).ok_or(DCGM_ST_BADPARAM)?;
    s.close();
    Ok(())
}

/// What one connection has made.
#[derive(Default)]
pub(crate) struct Book {
    pub next_id: usize,
    pub groups: BTreeMap<usize, Vec<dcgmGroupEntityPair_t>>,
    pub field_groups: BTreeMap<usize, Vec<u16>>,
    pub watched: HashSet<(dcgmGroupEntityPair_t, u16)>,
    /// Per GPU, the minor id of each profiling major group being watched.
    pub passes: HashMap<(u32, u16), u16>,
}

/// One connection to a host engine.
pub(crate) struct Session {
    link: Mutex<Option<BufReader<TcpStream>>>,
    pub book: Mutex<Book>,
}

impl Session {
    fn new(stream: TcpStream) -> Session {
        Session {
            link: Mutex::new(Some(BufReader::new(stream))),
            book: Mutex::new(Book::default()),
        }
    }

    /// Sends one request and waits for its answer; a closed or broken
    /// connection is DCGM_ST_CONNECTION_NOT_VALID from then on.
    pub fn request(&self, line: &str) -> Result<(), dcgmReturn_t> {
        self.request_within(line, None)
    }

    fn request_within(&self, line: &str, timeout: Option<Duration>) -> Result<(), dcgmReturn_t> {
        let mut link = lock(&self.link);
        let Some(conn) = link.as_mut() else {
            return Err(DCGM_ST_CONNECTION_NOT_VALID);
        };
        let _ = conn.get_ref().set_read_timeout(timeout);
        let mut answer = String::new();
        let sent = conn.get_mut().write_all(format!("{line}\n").as_bytes());
        let read = sent.and_then(|()| conn.read_line(&mut answer));
        match read {
            Ok(_) if answer.trim_end() == "ok" => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                *link = None;
                Err(DCGM_ST_TIMEOUT)
            }
            _ => {
                *link = None;
                Err(DCGM_ST_CONNECTION_NOT_VALID)
            }
        }
    }

    fn close(&self) {
        if let Some(conn) = lock(&self.link).take() {
            let _ = conn.get_ref().shutdown(std::net::Shutdown::Both);
        }
    }
}
