//! Models sharing physical GPUs with the sleep tier: one step per second,
//! each model awake, falling asleep, asleep, waking, starting or at zero.
//! The controller puts a model idle for `sleep.after` to sleep (and to
//! zero after `idleFor`); the activator holds a request for a sleeping
//! model and wakes it at the next step, first putting the least recently
//! used idle awake neighbour to sleep when the GPU's VRAM cannot take it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::model::{Arrival, Service};
use crate::sleep::Tier;

/// A model's state; the times are when a transition ends (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase {
    Zero,
    Starting(f64),
    Awake,
    Sleeping(f64),
    Asleep,
    Waking(f64),
}

/// What a request found when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Awake,
    /// No pod, or a pod starting: a cold start.
    Cold,
    /// Asleep or waking: the wake time.
    Asleep,
    /// Falling asleep: the rest of the sleep, then the wake.
    FallingAsleep,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    a: Arrival,
    found: Found,
}

/// One model's result on the shared GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOutcome {
    pub slo_violation_minutes: u32,
    /// Requests that found no pod or a starting one.
    pub cold_waits: u32,
    /// Requests that found the model asleep, waking or falling asleep.
    pub sleep_waits: u32,
    /// The longest wait (arrival → start, prefill not counted) of a request
    /// that found the model asleep or waking, when its wake found the VRAM
    /// free, seconds.
    pub wake_wait_max: f64,
    /// The same when the wake first had to wait for VRAM (a neighbour put
    /// to sleep), seconds.
    pub evicted_wait_max: f64,
    /// The longest wait of a request that found the model falling asleep.
    pub falling_asleep_wait_max: f64,
    pub failed: u64,
    pub unserved: u64,
    pub sleeps: u32,
    pub wakes: u32,
    /// Sleeps forced by a neighbour's wake.
    pub evictions: u32,
    pub cold_starts: u32,
    /// Hours holding its awake VRAM (starting, awake, falling asleep,
    /// waking) and asleep.
    pub awake_hours: f64,
    pub asleep_hours: f64,
}

/// One model during the replay.
pub(crate) struct Model<'a> {
    svc: &'a Service,
    t0: f64,
    arrivals: &'a [Arrival],
    next: usize,
    pub(crate) phase: Phase,
    queue: VecDeque<Held>,
    running: BinaryHeap<Reverse<i64>>,
    /// How many times slower a request runs this step (the GPU
    /// time-sliced between the models running requests).
    slowdown: f64,
    /// The latest arrival or end of a started request: idle since then
    /// when nothing is in flight.
    last_busy: f64,
    /// The latest arrival: the least recently used goes to sleep first.
    last_used: f64,
    /// The step the current wake was first wanted, and whether the wake
    /// in progress waited for VRAM.
    waiting_since: Option<i64>,
    wake_delayed: bool,
    ttft: Vec<Vec<f64>>,
    unserved_in: Vec<u32>,
    pub(crate) out: ModelOutcome,
}

const MS: f64 = 1000.0;

impl<'a> Model<'a> {
    /// A model asleep at the start (started and put to sleep before).
    pub(crate) fn new(svc: &'a Service, arrivals: &'a [Arrival], t0: f64) -> Self {
        Self {
            svc,
            t0,
            arrivals,
            next: 0,
            phase: Phase::Asleep,
            queue: VecDeque::new(),
            running: BinaryHeap::new(),
            slowdown: 1.0,
            last_busy: t0,
            last_used: t0,
            waiting_since: None,
            wake_delayed: false,
            ttft: Vec::new(),
            unserved_in: Vec::new(),
            out: ModelOutcome::default(),
        }
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.running.len() + self.queue.len()
    }

    /// Requests held (arrived, not started).
    pub(crate) fn holding(&self) -> bool {
        !self.queue.is_empty()
    }

    pub(crate) fn busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// VRAM this model holds now, GiB.
    pub(crate) fn vram(&self, t: &Tier) -> f64 {
        match self.phase {
            Phase::Zero => 0.0,
            Phase::Asleep => t.vram.asleep,
            _ => t.vram.awake,
        }
    }

    /// From when it serves during the step at `now`, if at all.
    fn serving_from(&self, now: i64) -> Option<f64> {
        match self.phase {
            Phase::Awake => Some(now as f64),
            Phase::Waking(r) | Phase::Starting(r) if r < (now + 1) as f64 => Some(r),
            _ => None,
        }
    }

    /// Transitions that ended by `now`, and clients that gave up.
    pub(crate) fn settle(&mut self, now: i64) {
        let t = now as f64;
        self.phase = match self.phase {
            Phase::Starting(r) | Phase::Waking(r) if r <= t => Phase::Awake,
            Phase::Sleeping(d) if d <= t => Phase::Asleep,
            p => p,
        };
        let deadline = self.svc.client_deadline;
        while let Some(q) = self.queue.front().copied().filter(|q| t - q.a.t > deadline) {
            self.queue.pop_front();
            self.record(&q, deadline);
            self.unserved_at(&q.a);
            self.out.failed += 1;
        }
        match self.phase {
            Phase::Zero => {}
            Phase::Asleep => self.out.asleep_hours += 1.0 / 3600.0,
            _ => self.out.awake_hours += 1.0 / 3600.0,
        }
    }

    /// The controller's sync: to zero after `idleFor`, else to sleep after
    /// `sleep.after`, of idle (nothing in flight).
    pub(crate) fn control(&mut self, now: i64, t: &Tier) {
        self.release(now as f64, 0);
        if self.in_flight() > 0 {
            return;
        }
        let idle = now as f64 - self.last_busy;
        let at_rest = matches!(self.phase, Phase::Awake | Phase::Asleep);
        if at_rest && t.zero_after.is_some_and(|z| idle >= z as f64) {
            self.phase = Phase::Zero;
        } else if self.phase == Phase::Awake && idle >= t.after as f64 {
            self.sleep(now, t);
        }
    }

    pub(crate) fn sleep(&mut self, now: i64, t: &Tier) {
        self.phase = Phase::Sleeping(now as f64 + t.timing.sleep);
        self.out.sleeps += 1;
    }

    /// A held request and nothing to serve it: the activator wakes it.
    pub(crate) fn wants_wake(&self) -> bool {
        !self.queue.is_empty() && matches!(self.phase, Phase::Zero | Phase::Asleep)
    }

    pub(crate) fn oldest_held(&self) -> f64 {
        self.queue.front().map_or(f64::INFINITY, |q| q.a.t)
    }

    pub(crate) fn last_used(&self) -> f64 {
        self.last_used
    }

    /// VRAM its wake needs on top of what it holds, GiB.
    pub(crate) fn wake_needs(&self, t: &Tier) -> f64 {
        t.vram.awake - self.vram(t)
    }

    /// The wake could not start at `now` (no VRAM yet).
    pub(crate) fn wake_blocked(&mut self, now: i64) {
        self.waiting_since.get_or_insert(now);
    }

    /// The wake starts at `now`: a cold start from zero, else a wake.
    pub(crate) fn wake(&mut self, now: i64, t: &Tier) {
        self.wake_delayed = self.waiting_since.take().is_some_and(|s| s < now);
        let now = now as f64;
        if self.phase == Phase::Zero {
            self.phase = Phase::Starting(now + f64::from(self.svc.cold_start));
            self.out.cold_starts += 1;
        } else {
            self.phase = Phase::Waking(now + t.wake_time());
            self.out.wakes += 1;
        }
    }

    /// Serve the step at `now`: arrivals are held, free slots start them,
    /// each running `slowdown` times slower.
    pub(crate) fn serve(&mut self, now: i64, slowdown: f64) {
        self.slowdown = slowdown;
        let from = self.serving_from(now);
        let slots = from.map_or(0, |_| self.svc.max_seqs as usize);
        let end = (now + 1) as f64;
        if let Some(f) = from {
            self.release(f, slots);
            self.drain(f, slots);
        }
        while let Some(a) = self.arrivals.get(self.next).copied().filter(|a| a.t < end) {
            self.next += 1;
            self.last_busy = self.last_busy.max(a.t);
            self.last_used = a.t;
            let found = self.found();
            self.out.cold_waits += u32::from(found == Found::Cold);
            self.out.sleep_waits +=
                u32::from(matches!(found, Found::Asleep | Found::FallingAsleep));
            self.queue.push_back(Held { a, found });
            if let Some(f) = from {
                let at = a.t.max(f);
                self.release(at, slots);
                self.drain(at, slots);
            }
        }
        self.release(end, slots);
    }

    fn found(&self) -> Found {
        match self.phase {
            Phase::Awake => Found::Awake,
            Phase::Zero | Phase::Starting(_) => Found::Cold,
            Phase::Asleep | Phase::Waking(_) => Found::Asleep,
            Phase::Sleeping(_) => Found::FallingAsleep,
        }
    }

    /// End requests up to `until`, starting held ones on the freed slots
    /// (none with `slots` 0).
    fn release(&mut self, until: f64, slots: usize) {
        while let Some(Reverse(end)) = self.running.peek().copied() {
            let at = end as f64 / MS;
            if at > until {
                break;
            }
            self.running.pop();
            self.drain(at, slots);
        }
    }

    /// Start held requests at `at` while one of `slots` is free.
    fn drain(&mut self, at: f64, slots: usize) {
        while self.running.len() < slots {
            let Some(q) = self.queue.pop_front() else {
                break;
            };
            let start = at.max(q.a.t);
            let wait = start - q.a.t;
            self.record(&q, wait + self.svc.prefill(&q.a) * self.slowdown);
            self.waited(q.found, wait);
            let end = start + self.svc.occupancy(&q.a) * self.slowdown;
            self.last_busy = self.last_busy.max(end);
            self.running.push(Reverse((end * MS).ceil() as i64));
        }
    }

    fn waited(&mut self, found: Found, wait: f64) {
        let o = &mut self.out;
        let max = match found {
            Found::Asleep if self.wake_delayed => &mut o.evicted_wait_max,
            Found::Asleep => &mut o.wake_wait_max,
            Found::FallingAsleep => &mut o.falling_asleep_wait_max,
            Found::Awake | Found::Cold => return,
        };
        *max = max.max(wait);
    }

    fn minute(&self, a: &Arrival) -> usize {
        ((a.t - self.t0) / 60.0).max(0.0) as usize
    }

    fn record(&mut self, q: &Held, ttft: f64) {
        let m = self.minute(&q.a);
        if self.ttft.len() <= m {
            self.ttft.resize_with(m + 1, Vec::new);
        }
        self.ttft[m].push(ttft);
    }

    fn unserved_at(&mut self, a: &Arrival) {
        let m = self.minute(a);
        if self.unserved_in.len() <= m {
            self.unserved_in.resize(m + 1, 0);
        }
        self.unserved_in[m] += 1;
    }

    /// The end of the replay at `now`: what is still held is unserved;
    /// the SLO-violating minutes are counted.
    pub(crate) fn finish(mut self, now: i64) -> ModelOutcome {
        while let Some(q) = self.queue.pop_front() {
            self.record(&q, now as f64 - q.a.t);
            self.unserved_at(&q.a);
            self.out.unserved += 1;
        }
        let slo = self.svc.ttft_slo;
        let minutes = self.ttft.len().max(self.unserved_in.len());
        let mut ttft = std::mem::take(&mut self.ttft);
        ttft.resize_with(minutes, Vec::new);
        let unserved = &self.unserved_in;
        self.out.slo_violation_minutes = ttft
            .iter_mut()
            .enumerate()
            .filter_map(|(m, t)| {
                let bad = unserved.get(m).is_some_and(|u| *u > 0)
                    || crate::sim::percentile(t, 0.95) > slo;
                bad.then_some(())
            })
            .count() as u32;
        self.out
    }
}

/// The fleet's result on the shared GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedOutcome {
    pub tier: Tier,
    /// Physical GPUs held (any model on it not at zero), hours.
    pub gpu_hours: f64,
    /// One per model, in the fleet's order.
    pub models: Vec<ModelOutcome>,
}

impl SharedOutcome {
    pub fn slo_violation_minutes(&self) -> u32 {
        self.models.iter().map(|m| m.slo_violation_minutes).sum()
    }
}

/// Replay `traces` (one per model, sorted, non-empty) on `tier.gpus`
/// shared GPUs, model `i` on GPU `i mod gpus`. The replay runs from the
/// earliest arrival to the latest, then while requests are held, for at
/// most the SLO.
pub fn replay(svc: &Service, tier: &Tier, traces: &[Vec<Arrival>]) -> SharedOutcome {
    let first = traces.iter().filter_map(|t| t.first()).map(|a| a.t);
    let t0 = first.fold(f64::INFINITY, f64::min).floor();
    let last = traces.iter().filter_map(|t| t.last()).map(|a| a.t);
    let last = last.fold(t0, f64::max);
    let start = t0 as i64;
    let trace_end = start + (last - t0).floor() as i64 + 1;
    let drain_end = trace_end + svc.ttft_slo.ceil() as i64;
    let gpus = tier.gpus.max(1) as usize;
    let mut on: Vec<Vec<Model>> = (0..gpus).map(|_| Vec::new()).collect();
    for (i, t) in traces.iter().enumerate() {
        on[i % gpus].push(Model::new(svc, t, t0));
    }
    let mut gpu_seconds = 0u64;
    let mut now = start;
    while now < trace_end || (now < drain_end && on.iter().flatten().any(Model::holding)) {
        for models in &mut on {
            gpu_seconds += u64::from(step(models, tier, now));
        }
        now += 1;
    }
    let mut models: Vec<(usize, ModelOutcome)> = Vec::new();
    for (g, list) in on.into_iter().enumerate() {
        for (j, m) in list.into_iter().enumerate() {
            models.push((j * gpus + g, m.finish(now)));
        }
    }
    models.sort_by_key(|(i, _)| *i);
    SharedOutcome {
        tier: *tier,
        gpu_hours: gpu_seconds as f64 / 3600.0,
        models: models.into_iter().map(|(_, m)| m).collect(),
    }
}

/// One second of one GPU's models; whether the GPU was held.
fn step(models: &mut [Model], tier: &Tier, now: i64) -> bool {
    for m in models.iter_mut() {
        m.settle(now);
    }
    if now.rem_euclid(tier.sync.max(1) as i64) == 0 {
        for m in models.iter_mut() {
            m.control(now, tier);
        }
    }
    wake(models, tier, now);
    let busy = models.iter().filter(|m| m.busy()).count() as f64;
    for m in models.iter_mut() {
        // A model starting requests shares the GPU with those running.
        let s = if m.busy() { busy } else { busy + 1.0 };
        m.serve(now, s.max(1.0));
    }
    models.iter().any(|m| m.phase != Phase::Zero)
}

/// The activator's wakes, oldest held request first; a wake the VRAM
/// cannot take first puts the least recently used idle awake models to
/// sleep (never one with a request in flight) and waits for their VRAM.
fn wake(models: &mut [Model], tier: &Tier, now: i64) {
    let mut order: Vec<usize> = (0..models.len())
        .filter(|i| models[*i].wants_wake())
        .collect();
    order.sort_by(|a, b| {
        models[*a]
            .oldest_held()
            .total_cmp(&models[*b].oldest_held())
    });
    for i in order {
        let used: f64 = models.iter().map(|m| m.vram(tier)).sum();
        let free = tier.vram.gpu - used;
        let need = models[i].wake_needs(tier);
        if need <= free + 1e-9 {
            models[i].wake(now, tier);
            continue;
        }
        models[i].wake_blocked(now);
        let freeing: f64 = models
            .iter()
            .filter(|m| matches!(m.phase, Phase::Sleeping(_)))
            .map(|_| tier.vram.awake - tier.vram.asleep)
            .sum();
        let mut short = need - free - freeing;
        while short > 1e-9 {
            let lru = (0..models.len())
                .filter(|j| models[*j].phase == Phase::Awake && models[*j].in_flight() == 0)
                .min_by(|a, b| models[*a].last_used().total_cmp(&models[*b].last_used()));
            let Some(j) = lru else { break };
            models[j].sleep(now, tier);
            models[j].out.evictions += 1;
            short -= tier.vram.awake - tier.vram.asleep;
        }
    }
}
