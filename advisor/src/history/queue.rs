//! Whether a serving workload's queue grew over the range: the mean time
//! a request waited in its first day and in its last (vLLM's
//! `vllm:request_queue_time_seconds`, SGLang's `sglang:queue_time_seconds`,
//! TGI's `tgi_request_queue_duration` histograms: `_sum` over `_count`),
//! else the mean number of requests waiting (`vllm:num_requests_waiting`,
//! `sglang:num_queue_reqs`, `tgi_queue_size`). Judged in `undersized`
//! (docs/right-sizing.md, "Too small").

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Bound, History, KEY, Key, Window};
use crate::Error;
use crate::prom::Prometheus;

const DAY_S: f64 = 86_400.0;

/// The queue time histograms of the three frameworks (name without the
/// `_sum` / `_count` suffix) and their queue-length gauges.
const QUEUE_TIME: [&str; 3] = [
    "vllm:request_queue_time_seconds",
    "sglang:queue_time_seconds",
    "tgi_request_queue_duration",
];
const WAITING: &str = "vllm:num_requests_waiting|sglang:num_queue_reqs|tgi_queue_size";

/// A workload's queue on the first and the last day of the range.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Queue {
    /// `seconds` (mean queue time per request) or `requests` (mean
    /// number waiting, where no queue time histogram is scraped).
    pub unit: &'static str,
    pub first_day: f64,
    pub last_day: f64,
}

/// The workload of a pod-level series, joined on its pod's `gpu_pod_info`
/// of the same day (`day`: `[1d]` and its offset): a day of the info
/// series, not the range's, for each of these queries.
fn joined(inner: &str, day: &str) -> String {
    format!(
        "sum by ({KEY}) ({inner} * on (cluster, namespace, pod) group_left (workload_kind, workload) \
         max by (cluster, namespace, pod, workload_kind, workload) (max_over_time(gpu_pod_info{day})))"
    )
}

fn names(suffix: &str) -> String {
    let v: Vec<String> = QUEUE_TIME.iter().map(|n| format!("{n}{suffix}")).collect();
    format!("{{__name__=~\"{}\"}}", v.join("|"))
}

impl History {
    /// A query's finite, non-negative values per workload; others noted.
    fn per_key(
        &mut self,
        p: &Prometheus,
        what: &str,
        q: &str,
    ) -> Result<BTreeMap<Key, f64>, Error> {
        let mut out = BTreeMap::new();
        for s in p.query(q)? {
            match Bound::NonNegative.refuse(s.value) {
                None => {
                    out.insert(Key::of(&s), s.value);
                }
                Some(why) => self.excluded.push(format!(
                    "{what} {}: {} is {why}: excluded",
                    s.name(),
                    s.value
                )),
            }
        }
        Ok(out)
    }

    /// Mean queue time (or length) of the day ending `back_s` before the end.
    fn day(&mut self, p: &Prometheus, w: &Window, back_s: f64) -> Result<Days, Error> {
        let st = &w.step;
        let off = if back_s > 0.0 {
            format!(" offset {back_s:.0}s")
        } else {
            String::new()
        };
        let day = format!("[1d]{off}");
        let inc = |suffix: &str| joined(&format!("increase({}{day})", names(suffix)), &day);
        let time = self.per_key(
            p,
            "queue time",
            &format!("({}) / (({}) > 0)", inc("_sum"), inc("_count")),
        )?;
        let waiting = format!(
            "avg_over_time((max by (cluster, namespace, pod) ({{__name__=~\"{WAITING}\"}}))[1d:{st}]{off})"
        );
        let waiting = self.per_key(p, "requests waiting", &joined(&waiting, &day))?;
        Ok((time, waiting))
    }

    /// The first and the last day's queue of every serving workload; none
    /// when the range is under two days.
    pub(super) fn read_queue(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        if w.range_s < 2.0 * DAY_S {
            return Ok(());
        }
        let last = self.day(p, w, 0.0)?;
        let first = self.day(p, w, w.range_s - DAY_S)?;
        for (k, f) in &mut self.workloads {
            f.queue = trend(k, &first, &last);
        }
        Ok(())
    }
}

/// Per workload: mean queue time, mean requests waiting.
type Days = (BTreeMap<Key, f64>, BTreeMap<Key, f64>);

/// Queue time where both days have it, else the number waiting.
fn trend(k: &Key, first: &Days, last: &Days) -> Option<Queue> {
    let both = |a: &BTreeMap<Key, f64>, b: &BTreeMap<Key, f64>| Some((*a.get(k)?, *b.get(k)?));
    if let Some((f, l)) = both(&first.0, &last.0) {
        return Some(Queue {
            unit: "seconds",
            first_day: f,
            last_day: l,
        });
    }
    both(&first.1, &last.1).map(|(f, l)| Queue {
        unit: "requests",
        first_day: f,
        last_day: l,
    })
}
