//! Which of a sleep route's endpoints sleep: the state the route reads to
//! forward only to those awake, and the runner (`crate::sleep`) updates.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

use crate::sleep_spec::SleepSpec;

/// The route's endpoints and which of them sleep.
pub struct Sleeper {
    pub spec: SleepSpec,
    endpoints: Mutex<Vec<SocketAddr>>,
    asleep: Mutex<BTreeSet<SocketAddr>>,
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
        }
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
