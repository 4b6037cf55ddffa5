//! Which of a sleep route's endpoints sleep: the state the route reads to
//! forward only to those awake, and the runner (`crate::sleep`) updates.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::sleep_spec::SleepSpec;

/// The route's endpoints and which of them sleep.
pub struct Sleeper {
    pub spec: SleepSpec,
    endpoints: Mutex<Vec<SocketAddr>>,
    asleep: Mutex<BTreeSet<SocketAddr>>,
    /// The pod behind each endpoint (the EndpointSlice's `targetRef`).
    pods: Mutex<BTreeMap<SocketAddr, String>>,
    /// When a request last arrived or was open (least recently used first
    /// when a neighbour needs the GPU), and the forwarded count it read.
    last_used: Mutex<(Instant, u64)>,
    /// An endpoint fell asleep under open requests: wake it for them.
    wake_wanted: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sleeper {
    pub fn new(spec: SleepSpec) -> Self {
        Self {
            spec,
            endpoints: Mutex::new(Vec::new()),
            asleep: Mutex::new(BTreeSet::new()),
            pods: Mutex::new(BTreeMap::new()),
            last_used: Mutex::new((Instant::now(), 0)),
            wake_wanted: AtomicBool::new(false),
        }
    }

    /// The pods behind the endpoints, from the EndpointSlices.
    pub fn set_pods(&self, pods: BTreeMap<SocketAddr, String>) {
        *lock(&self.pods) = pods;
    }

    pub fn pod_of(&self, a: SocketAddr) -> Option<String> {
        lock(&self.pods).get(&a).cloned()
    }

    /// The route's forwarded count and open requests now: a change or an
    /// open request is a use.
    pub fn saw_use(&self, forwarded: u64, open: bool) {
        let mut u = lock(&self.last_used);
        if open || forwarded != u.1 {
            *u = (Instant::now(), forwarded);
        }
    }

    pub fn last_used(&self) -> Instant {
        lock(&self.last_used).0
    }

    pub fn want_wake(&self, want: bool) {
        self.wake_wanted.store(want, Ordering::Relaxed);
    }

    pub fn wake_wanted(&self) -> bool {
        self.wake_wanted.load(Ordering::Relaxed)
    }

    /// The Service's Ready endpoints changed; returns those awake.
    pub fn set_endpoints(&self, all: Vec<SocketAddr>) -> Vec<SocketAddr> {
        lock(&self.asleep).retain(|a| all.contains(a));
        *lock(&self.endpoints) = all;
        self.awake()
    }

    /// The endpoints to forward to: those not known asleep.
    pub fn awake(&self) -> Vec<SocketAddr> {
        let asleep = lock(&self.asleep).clone();
        lock(&self.endpoints)
            .iter()
            .filter(|a| !asleep.contains(a))
            .copied()
            .collect()
    }

    pub fn endpoints(&self) -> Vec<SocketAddr> {
        lock(&self.endpoints).clone()
    }

    pub fn asleep(&self) -> Vec<SocketAddr> {
        lock(&self.asleep).iter().copied().collect()
    }

    /// Records one endpoint's state; true when it changed.
    pub fn mark(&self, a: SocketAddr, sleeping: bool) -> bool {
        let mut asleep = lock(&self.asleep);
        if sleeping {
            asleep.insert(a)
        } else {
            asleep.remove(&a)
        }
    }

    /// Where an endpoint's sleep endpoints answer.
    pub fn sleep_addr(&self, a: SocketAddr) -> SocketAddr {
        SocketAddr::new(a.ip(), self.spec.port.unwrap_or(a.port()))
    }
}
