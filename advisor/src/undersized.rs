//! The other half of right-sizing: workloads whose GPU is too small, what
//! to move them to and what that costs more (docs/right-sizing.md,
//! "Too small").

use crate::assess::{Assessment, Confidence, Recommendation};
use crate::tables::{GpuType, Tables};
use crate::thresholds as t;

/// KV-cache use p99 at or over this: requests wait for blocks.
pub const KV_FULL: f64 = 0.95;
/// Utilization p95 at or over this with a rising queue: the GPU is at
/// its ceiling and more of it will not come from the same GPU.
pub const BUSY: f64 = 0.95;
/// A queue is rising when its last day is at least this many times its
/// first day...
pub const QUEUE_GROWTH: f64 = 2.0;
/// ...and at least this: half a second a request (under it a queue is
/// noise beside an LLM request's seconds), or one request waiting.
pub const QUEUE_TIME_FLOOR_S: f64 = 0.5;
pub const QUEUE_WAITING_FLOOR: f64 = 1.0;

/// "queue time rose from ..." when the queue rose over the range.
fn rising(q: &crate::history::Queue) -> Option<String> {
    let (floor, what, unit) = match q.unit {
        "seconds" => (QUEUE_TIME_FLOOR_S, "mean queue time", " s a request"),
        _ => (QUEUE_WAITING_FLOOR, "mean requests waiting", ""),
    };
    (q.last_day >= floor && q.last_day >= QUEUE_GROWTH * q.first_day).then(|| {
        format!(
            "{what} rose from {:.2}{unit} on the range's first day to {:.2}{unit} on its last (>= {QUEUE_GROWTH}x and >= {floor}{unit})",
            q.first_day, q.last_day
        )
    })
}
/// Peak VRAM at or over this share of the device (not vLLM, whose peak is
/// its reservation): the next allocation fails.
pub const VRAM_FULL: f64 = 0.95;

/// Why it is too small, and whether more memory than today's is needed
/// (KV pressure) or the peak with headroom (capacity).
fn reasons(a: &Assessment) -> Vec<String> {
    let mut why = Vec::new();
    if let Some(u) = a.kv_usage_p99.filter(|u| *u >= KV_FULL) {
        why.push(format!(
            "KV cache p99 {:.0} % >= {:.0} %",
            u * 100.0,
            KV_FULL * 100.0
        ));
    }
    if let Some(n) = a.preemptions.filter(|n| *n > 0.0) {
        why.push(format!(
            "{n:.0} vLLM preemptions (vllm:num_preemptions_total) in the range"
        ));
    }
    if let (Some(q), Some(u)) = (a.queue.as_ref().and_then(rising), a.utilization_p95)
        && u >= BUSY
    {
        why.push(format!(
            "{q}, with utilization p95 {:.0} % >= {:.0} %",
            u * 100.0,
            BUSY * 100.0
        ));
    }
    let (Some(peak), Some(dev)) = (a.vram_peak_gib, a.device_memory_gib) else {
        return why;
    };
    // vLLM and TGI fill the GPU at start: their peak is a reservation.
    let preallocates = a.request_series == Some("tgi_request_success");
    if a.kv_usage_p99.is_none() && !preallocates && peak >= VRAM_FULL * dev {
        why.push(format!(
            "peak VRAM {peak:.1} GiB is {:.0} % of {dev:.1} GiB (>= {:.0} %)",
            peak / dev * 100.0,
            VRAM_FULL * 100.0
        ));
    } else if a.devices_now > 1 && peak * t::MEMORY_HEADROOM > dev {
        why.push(format!(
            "{} GPUs at {peak:.1} GiB each: no room for a tensor-parallel replica's {}x headroom ({:.1} > {dev:.1} GiB)",
            a.devices_now,
            t::MEMORY_HEADROOM,
            peak * t::MEMORY_HEADROOM
        ));
    }
    why
}

/// The cheapest way to `need` GiB in all with at least today's bandwidth
/// per GPU: `n` GPUs of any type, or twice as many of today's type (a
/// second replica, or twice the tensor parallelism: a count it divides).
/// Only types `there` allows (the cluster has nodes of them).
fn target<'a>(
    tables: &'a Tables,
    cur: &GpuType,
    n: u32,
    need: f64,
    there: impl Fn(&GpuType) -> bool,
) -> Option<(&'a GpuType, u32)> {
    let mut best: Option<(&GpuType, u32)> = None;
    for c in tables
        .gpus
        .gpus
        .iter()
        .filter(|c| c.bandwidth_gbps >= cur.bandwidth_gbps && (c.name == cur.name || there(c)))
    {
        let m = if c.name == cur.name { 2 * n } else { n };
        let cost = f64::from(m) * c.price_usd_per_hour;
        if f64::from(m) * c.memory_gib >= need
            && best.is_none_or(|(b, k)| cost < f64::from(k) * b.price_usd_per_hour)
        {
            best = Some((c, m));
        }
    }
    best
}

/// Marks the workloads that are too small and says what to move them to.
pub fn judge(tables: &Tables, a: &mut Assessment) {
    if a.confidence == Confidence::Insufficient {
        return;
    }
    let why = reasons(a);
    if why.is_empty() {
        return;
    }
    a.too_small = true;
    let n = a.devices_now.max(1) as u32;
    let cur = a.model.as_deref().and_then(|m| tables.gpu(m));
    let (Some(cur), Some(price)) = (cur, a.price_usd_per_hour) else {
        a.notes.push(format!(
            "too small ({}); no GPU table entry or price to say what to",
            why.join("; ")
        ));
        return;
    };
    // KV pressure or a queue at the ceiling: 20 % more memory (and at least
    // today's bandwidth) than today; capacity: the peak x 1.2.
    let kv = a.kv_usage_p99.is_some_and(|u| u >= KV_FULL)
        || a.preemptions.is_some_and(|p| p > 0.0)
        || why.iter().any(|w| w.contains(" rose from "));
    let dev = a
        .device_memory_gib
        .unwrap_or(cur.memory_gib)
        .min(cur.memory_gib);
    let peak = a.vram_peak_gib.unwrap_or(0.0);
    let per_gpu = if kv { dev } else { peak };
    let need = f64::from(n) * per_gpu * t::MEMORY_HEADROOM;
    let cluster = a.workload.cluster.clone();
    let needs = |c: &GpuType| tables.sites.needs(&cluster, &c.name);
    let Some(firm) = target(tables, cur, n, need, |c| needs(c).is_none()) else {
        a.notes.push(format!(
            "too small ({}); no GPU in the table holds {need:.1} GiB",
            why.join("; ")
        ));
        return;
    };
    // A cheaper way on a type the cluster has no node of: conditional.
    let cond = target(tables, cur, n, need, |_| true)
        .filter(|(c, _)| c.name != firm.0.name)
        .and_then(|(c, m)| Some((c, m, needs(c)?)));
    let ctx = Move {
        cur,
        n,
        price,
        need,
        per_gpu,
        why: why.join("; "),
    };
    if let Some((c, m, needs)) = cond {
        a.recommendations.push(ctx.rec((c, m), Some(needs)));
    }
    a.recommendations.push(ctx.rec(firm, None));
}

/// A too-small workload's move: from `n` of `cur` at `price`.
struct Move<'a> {
    cur: &'a GpuType,
    n: u32,
    price: f64,
    need: f64,
    per_gpu: f64,
    why: String,
}

impl Move<'_> {
    fn rec(&self, (to, m): (&GpuType, u32), needs: Option<String>) -> Recommendation {
        let Self {
            cur,
            n,
            price,
            need,
            per_gpu,
            ..
        } = *self;
        let more =
            (f64::from(m) * to.price_usd_per_hour - f64::from(n) * price) * t::HOURS_PER_MONTH;
        Recommendation {
            kind: "too_small",
            action: format!("too small: {m} x {} instead of {n} x {}", to.name, cur.name),
            why: format!(
                "{}; {m} x {:.1} GiB holds {need:.1} GiB ({n} x {per_gpu:.1} GiB x {}), bandwidth {} GB/s >= {} GB/s",
                self.why,
                to.memory_gib,
                t::MEMORY_HEADROOM,
                to.bandwidth_gbps,
                cur.bandwidth_gbps
            ),
            saving_usd_per_month: -more,
            settings: None,
            group: None,
            check: None,
            needs,
        }
    }
}
