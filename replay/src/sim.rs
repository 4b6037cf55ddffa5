//! The discrete-time replay: one step per second, requests served FIFO by
//! the sequence slots of the Ready replicas.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::model::Service;
use crate::trace::Arrival;

/// What a policy sees at the start of a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signals {
    /// Unix seconds.
    pub now: i64,
    /// Requests running or waiting (vLLM `num_requests_running + waiting`).
    pub in_flight: f64,
    /// The same count as an activator in the path has it: current at
    /// `now` whatever the policy's signal path (never delayed).
    pub in_flight_now: f64,
    /// Requests completed+started per second over the last minute.
    pub rate_1m: f64,
    /// Replicas asked for, and those Ready.
    pub replicas: i32,
    pub ready: i32,
}

/// A scaling policy: the replicas it wants, asked once a second.
pub trait Policy {
    fn name(&self) -> String;
    fn initial(&self) -> i32;
    fn step(&mut self, s: &Signals) -> i32;
}

/// One replay's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub policy: String,
    pub gpu_hours: f64,
    pub cost: f64,
    pub slo_violation_minutes: u32,
    pub ttft_p50: f64,
    pub ttft_p95: f64,
    /// Requests that arrived with no Ready replica.
    pub cold_waiters: u32,
    /// Requests not started by the end of the replay (the trace's last
    /// second plus the SLO): the service was saturated. Their minutes
    /// violate the SLO.
    pub unserved: u64,
    pub scale_events: u32,
    /// Requests whose client gave up (`Service::client_deadline`) before a
    /// slot was free. Their minutes violate the SLO.
    pub failed: u64,
    /// Per wake from zero: seconds from the first request that found no
    /// replica to the scale-up (the signal path's delay; the cold start
    /// comes on top).
    pub wake_signal: Vec<f64>,
    /// Per minute: arrivals, most replicas asked for, SLO violated.
    pub minutes: Vec<Minute>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Minute {
    pub arrivals: u32,
    pub replicas: i32,
    pub violated: bool,
    /// Arrivals of this minute never started (unserved or failed).
    pub unserved: u32,
}

#[derive(Clone, Copy)]
struct Queued {
    a: Arrival,
    cold: bool,
}

/// The service's state during a replay.
struct Server<'a> {
    svc: &'a Service,
    t0: f64,
    /// Ready time of each replica asked for.
    replicas: Vec<i64>,
    running: BinaryHeap<Reverse<i64>>,
    queue: VecDeque<Queued>,
    ttft: Vec<Vec<f64>>,
    cold_waiters: u32,
    failed: u64,
    /// The first request held while no replica was asked for.
    held_since: Option<f64>,
    wake_signal: Vec<f64>,
}

const MS: f64 = 1000.0;

impl<'a> Server<'a> {
    fn new(svc: &'a Service, t0: f64) -> Self {
        Self {
            svc,
            t0,
            replicas: Vec::new(),
            running: BinaryHeap::new(),
            queue: VecDeque::new(),
            ttft: Vec::new(),
            cold_waiters: 0,
            failed: 0,
            held_since: None,
            wake_signal: Vec::new(),
        }
    }

    fn ready(&self, now: i64) -> usize {
        self.replicas.iter().filter(|r| **r <= now).count()
    }

    fn scale(&mut self, now: i64, want: i32) {
        let want = usize::try_from(want).unwrap_or(0);
        if want > 0
            && self.replicas.is_empty()
            && let Some(since) = self.held_since.take()
        {
            self.wake_signal.push(now as f64 - since);
        }
        while self.replicas.len() < want {
            self.replicas.push(now + i64::from(self.svc.cold_start));
        }
        // The newest (least ready) replicas go first.
        self.replicas.sort_unstable();
        self.replicas.truncate(want);
    }

    /// Start queued requests on free slots at `at` (Unix seconds).
    fn drain(&mut self, at: f64, ready: usize) {
        let slots = ready * self.svc.max_seqs as usize;
        while self.running.len() < slots {
            let Some(q) = self.queue.pop_front() else {
                break;
            };
            let start = at.max(q.a.t);
            self.record(&q, start - q.a.t + self.svc.prefill(&q.a));
            let end = start + self.svc.occupancy(&q.a);
            self.running.push(Reverse((end * MS) as i64));
        }
    }

    fn record(&mut self, q: &Queued, ttft: f64) {
        let m = ((q.a.t - self.t0) / 60.0) as usize;
        if self.ttft.len() <= m {
            self.ttft.resize_with(m + 1, Vec::new);
        }
        self.ttft[m].push(ttft);
        self.cold_waiters += u32::from(q.cold);
    }

    /// Clients waiting past their deadline at `now` give up: recorded with
    /// the deadline as their wait (a lower bound) and their minute violates.
    fn expire(&mut self, now: f64, minutes: &mut [Minute]) {
        let deadline = self.svc.client_deadline;
        while let Some(q) = self.queue.front().filter(|q| now - q.a.t > deadline) {
            let q = *q;
            self.queue.pop_front();
            self.record(&q, deadline);
            self.failed += 1;
            if let Some(m) = minutes.get_mut(((q.a.t - self.t0) / 60.0) as usize) {
                m.unserved += 1;
            }
        }
    }

    /// Finish requests up to `until`, starting waiting ones on freed slots.
    fn release(&mut self, until: f64, ready: usize) {
        while let Some(Reverse(end)) = self.running.peek().copied() {
            if end as f64 / MS > until {
                break;
            }
            self.running.pop();
            self.drain(end as f64 / MS, ready);
        }
    }
}

/// Replay `arrivals` (sorted, non-empty, within `crate::limits`) through
/// `policy`. After the last arrival the service keeps working on its queue
/// for as long as the SLO allows; what is still queued then is unserved.
pub fn replay(svc: &Service, arrivals: &[Arrival], policy: &mut dyn Policy) -> Outcome {
    let t0 = arrivals.first().map_or(0.0, |a| a.t.floor());
    let last = arrivals.last().map_or(t0, |a| a.t);
    let steps = (last - t0).floor() as i64 + 1;
    let mut srv = Server::new(svc, t0);
    let start = t0 as i64;
    let (trace_end, drain_end) = (start + steps, start + steps + svc.ttft_slo.ceil() as i64);
    srv.scale(start - i64::from(svc.cold_start), policy.initial());
    let mut minutes = vec![Minute::default(); (steps as usize).div_ceil(60)];
    let (mut next, mut gpu_seconds, mut events) = (0usize, 0u64, 0u32);
    let mut recent: VecDeque<f64> = VecDeque::new();
    let mut now = start;
    while now < trace_end || (now < drain_end && !srv.queue.is_empty()) {
        while recent.front().is_some_and(|t| *t < (now - 60) as f64) {
            recent.pop_front();
        }
        srv.expire(now as f64, &mut minutes);
        let ready = srv.ready(now);
        let in_flight = (srv.running.len() + srv.queue.len()) as f64;
        let seen = Signals {
            now,
            in_flight,
            in_flight_now: in_flight,
            rate_1m: recent.len() as f64 / 60.0,
            replicas: srv.replicas.len() as i32,
            ready: ready as i32,
        };
        let want = policy.step(&seen).max(0);
        if want != seen.replicas {
            events += 1;
            srv.scale(now, want);
        }
        let ready = srv.ready(now);
        srv.drain(now as f64, ready);
        let end = (now + 1) as f64;
        let m = ((now - start) / 60) as usize;
        if minutes.len() <= m {
            minutes.resize(m + 1, Minute::default());
        }
        let minute = &mut minutes[m];
        minute.replicas = minute.replicas.max(want);
        while let Some(a) = arrivals.get(next).filter(|a| a.t < end) {
            srv.release(a.t, ready);
            if srv.replicas.is_empty() {
                srv.held_since.get_or_insert(a.t);
            }
            srv.queue.push_back(Queued {
                a: *a,
                cold: ready == 0,
            });
            srv.drain(a.t, ready);
            recent.push_back(a.t);
            minute.arrivals += 1;
            next += 1;
        }
        srv.release(end, ready);
        gpu_seconds += srv.replicas.len() as u64 * u64::from(svc.gpus_per_replica);
        now += 1;
    }
    // Still waiting after the drain: not served. Their wait so far is
    // recorded (a lower bound of their TTFT) and their minutes violate.
    let end = now as f64;
    let mut unserved = 0;
    while let Some(q) = srv.queue.pop_front() {
        srv.record(&q, end - q.a.t);
        unserved += 1;
        let m = ((q.a.t - t0) / 60.0) as usize;
        if let Some(minute) = minutes.get_mut(m) {
            minute.unserved += 1;
        }
    }
    let mut o = summarize(svc, policy.name(), srv, minutes, gpu_seconds, events);
    o.unserved = unserved;
    o
}

fn summarize(
    svc: &Service,
    policy: String,
    srv: Server,
    mut minutes: Vec<Minute>,
    gpu_seconds: u64,
    scale_events: u32,
) -> Outcome {
    let mut all: Vec<f64> = Vec::new();
    let mut violations = 0;
    for (m, ttft) in srv.ttft.into_iter().enumerate() {
        let mut ttft = ttft;
        let mut bad = percentile(&mut ttft, 0.95) > svc.ttft_slo;
        if let Some(minute) = minutes.get_mut(m) {
            bad |= minute.unserved > 0;
            minute.violated = bad;
        }
        violations += u32::from(bad);
        all.extend(ttft);
    }
    let gpu_hours = gpu_seconds as f64 / 3600.0;
    Outcome {
        policy,
        gpu_hours,
        cost: gpu_hours * svc.price_per_gpu_hour,
        slo_violation_minutes: violations,
        ttft_p50: percentile(&mut all, 0.5),
        ttft_p95: percentile(&mut all, 0.95),
        cold_waiters: srv.cold_waiters,
        unserved: 0,
        failed: srv.failed,
        wake_signal: srv.wake_signal,
        scale_events,
        minutes,
    }
}

/// Nearest-rank percentile (0 for none); reorders `values`.
pub fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let rank = (q * values.len() as f64).ceil() as usize;
    let i = rank.clamp(1, values.len()) - 1;
    *values.select_nth_unstable_by(i, f64::total_cmp).1
}
