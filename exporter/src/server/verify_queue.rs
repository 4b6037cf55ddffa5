//! The bcrypt checks waiting for the verifier thread: bounded, and served
//! round-robin by client address, so a flood from one source delays another
//! source's first login by about one check per flooding source, not by the
//! whole flood. A check that waits past its timeout is dropped unrun.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// Checks waiting at once, all sources together.
pub const MAX_QUEUED: usize = 64;
/// Checks one source may have waiting; more are refused at once.
pub const MAX_PER_SOURCE: usize = 4;

/// A password to check and where its answer goes.
pub struct Job {
    pub user: String,
    pub pass: String,
    pub answer: oneshot::Sender<bool>,
}

/// Why a check was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// This source already has [`MAX_PER_SOURCE`] checks waiting.
    Source,
    /// The queue is full of other sources' checks.
    Full,
}

#[derive(Default)]
struct State {
    by_source: HashMap<IpAddr, VecDeque<Job>>,
    /// Sources with waiting checks, in the order they get their next turn.
    turns: VecDeque<IpAddr>,
    len: usize,
    closed: bool,
}

/// Shared between the request handlers and the verifier thread.
#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
    ready: Condvar,
}

impl Queue {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Queues `job` for `source`. A full queue makes room for a source with
    /// fewer checks waiting by dropping the newest check of the longest
    /// queue (its client gets the same answer as a refused one).
    pub fn push(&self, source: IpAddr, job: Job) -> Result<(), Refused> {
        let mut guard = self.lock();
        let s = &mut *guard;
        let mine = s.by_source.get(&source).map_or(0, VecDeque::len);
        if mine >= MAX_PER_SOURCE {
            return Err(Refused::Source);
        }
        if s.len >= MAX_QUEUED && !s.drop_from_longest(mine + 1) {
            return Err(Refused::Full);
        }
        let q = s.by_source.entry(source).or_default();
        if q.is_empty() {
            s.turns.push_back(source);
        }
        q.push_back(job);
        s.len += 1;
        drop(guard);
        self.ready.notify_one();
        Ok(())
    }

    /// The next check, round-robin over sources; `None` once closed.
    pub fn pop(&self) -> Option<Job> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(job) = s.next() {
                return Some(job);
            }
            s = self.ready.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn next(&mut self) -> Option<Job> {
        while let Some(source) = self.turns.pop_front() {
            let Some(q) = self.by_source.get_mut(&source) else {
                continue;
            };
            let job = q.pop_front();
            if q.is_empty() {
                self.by_source.remove(&source);
            } else {
                self.turns.push_back(source);
            }
            if let Some(job) = job {
                self.len -= 1;
                // Its client gave up (timeout, disconnect): skip the work.
                if !job.answer.is_closed() {
                    return Some(job);
                }
            }
        }
        None
    }

    /// Drops the newest check of the source with the most waiting, if it
    /// has more than `than`; its client is answered as refused.
    fn drop_from_longest(&mut self, than: usize) -> bool {
        let Some((&source, _)) = self
            .by_source
            .iter()
            .filter(|(_, q)| q.len() > than)
            .max_by_key(|(_, q)| q.len())
        else {
            return false;
        };
        let Some(q) = self.by_source.get_mut(&source) else {
            return false;
        };
        // Dropping the sender tells the waiting handler it was refused.
        let dropped = q.pop_back().is_some();
        if q.is_empty() {
            self.by_source.remove(&source);
            self.turns.retain(|s| *s != source);
        }
        self.len -= usize::from(dropped);
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> (Job, oneshot::Receiver<bool>) {
        let (answer, rx) = oneshot::channel();
        let job = Job {
            user: String::new(),
            pass: String::new(),
            answer,
        };
        (job, rx)
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn sources_take_turns_and_each_is_capped() {
        let q = Queue::default();
        let mut waiting = Vec::new();
        for i in 0..MAX_PER_SOURCE {
            let (mut j, rx) = job();
            j.user = format!("flood-{i}");
            waiting.push(rx);
            assert!(q.push(ip(2), j).is_ok());
        }
        let (j, _rx) = job();
        assert_eq!(q.push(ip(2), j).err(), Some(Refused::Source));
        let (mut j, _rx1) = job();
        j.user = "prometheus".into();
        assert!(q.push(ip(1), j).is_ok());
        let order: Vec<String> = (0..3).filter_map(|_| q.pop()).map(|j| j.user).collect();
        assert_eq!(order, ["flood-0", "prometheus", "flood-1"]);
        // A check whose client gave up is skipped.
        drop(waiting.remove(2));
        assert_eq!(q.pop().map(|j| j.user).as_deref(), Some("flood-3"));
    }

    #[test]
    fn a_full_queue_makes_room_for_a_new_source() {
        let q = Queue::default();
        let mut rxs = Vec::new();
        for i in 0..MAX_QUEUED {
            let (j, rx) = job();
            rxs.push(rx);
            let source = ip(u8::try_from(i / MAX_PER_SOURCE).unwrap_or(0) + 10);
            assert!(q.push(source, j).is_ok());
        }
        // Every source holds MAX_PER_SOURCE: a new source takes one's newest.
        let (j, _rx) = job();
        assert!(q.push(ip(1), j).is_ok(), "room made for a new source");
        assert_eq!(q.lock().len, MAX_QUEUED);
        let refused = rxs
            .iter_mut()
            .map(oneshot::Receiver::try_recv)
            .filter(|r| *r == Err(oneshot::error::TryRecvError::Closed))
            .count();
        assert_eq!(refused, 1);
    }
}
