//! The reader's side of the shared state: the library and the state its
//! calls are timed into.

use std::sync::Mutex;
use std::time::Instant;

use super::ffi::{Dcgm, Error};
use super::{State, lock};

/// The reader's side of the shared state.
pub(super) struct Link<'a> {
    pub shared: &'a Mutex<State>,
    pub lib: &'a Dcgm,
}

impl Link<'_> {
    /// Runs one DCGM call with its start recorded.
    pub fn call<T>(&self, f: impl FnOnce(&Dcgm) -> Result<T, Error>) -> Result<T, Error> {
        lock(self.shared).in_flight = Some(Instant::now());
        let r = f(self.lib);
        lock(self.shared).in_flight = None;
        r
    }
}
