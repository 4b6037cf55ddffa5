//! The reader's side of the shared state: the library and the state its
//! calls are timed into.

use std::sync::MutexGuard;
use std::time::Instant;

use super::ffi::{Dcgm, Error};
use super::{Shared, State, lock};

/// The reader's side of the shared state.
pub(super) struct Link<'a> {
    pub shared: &'a Shared,
    pub lib: &'a Dcgm,
}

impl Link<'_> {
    /// Runs one DCGM call with its start recorded.
    pub fn call<T>(&self, f: impl FnOnce(&Dcgm) -> Result<T, Error>) -> Result<T, Error> {
        self.state().in_flight = Some(Instant::now());
        let r = f(self.lib);
        self.state().in_flight = None;
        r
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.shared.state)
    }
}
