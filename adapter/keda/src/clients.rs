//! Open push streams per client (its source address), over all its
//! connections: HTTP/2 bounds the streams of one connection, this bounds
//! what one client holds however many connections it opens.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tonic::Status;

/// The client of a request: the connection's source address, put in the
/// request's extensions by the listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// Open streams by client.
#[derive(Debug)]
pub struct StreamSlots {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl StreamSlots {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for one more stream of `peer`, or RESOURCE_EXHAUSTED naming
    /// the limit. Requests without a peer (not from the listener) share one.
    pub fn acquire(self: &Arc<Self>, peer: Option<Peer>) -> Result<Slot, Status> {
        let ip = peer.map_or(IpAddr::from([0, 0, 0, 0]), |p| p.0);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.max {
            return Err(Status::resource_exhausted(format!(
                "this client ({ip}) holds {} StreamIsActive streams, the most one client may \
                 (--keda-max-streams-per-client); close one or poll IsActive",
                self.max
            )));
        }
        *n += 1;
        Ok(Slot {
            slots: self.clone(),
            ip,
        })
    }

    /// Streams `ip` holds open now.
    pub fn open(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(&ip).copied().unwrap_or(0)
    }
}

/// One open stream's place in its client's count, given back on drop.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<StreamSlots>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_at_most_max_and_gets_its_slots_back() {
        let slots = StreamSlots::new(2);
        let a = Some(Peer(IpAddr::from([10, 0, 0, 1])));
        let b = Some(Peer(IpAddr::from([10, 0, 0, 2])));
        let s1 = slots.acquire(a).unwrap();
        let _s2 = slots.acquire(a).unwrap();
        let e = slots.acquire(a).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("--keda-max-streams-per-client"));
        assert!(slots.acquire(b).is_ok(), "another client is not affected");
        drop(s1);
        assert!(slots.acquire(a).is_ok());
    }
}
