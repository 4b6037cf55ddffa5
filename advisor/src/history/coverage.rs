//! Coverage: the exporter's series can be missing for hours while the
//! serving framework's counters are still scraped (an exporter restart
//! loop, a node's scrape failing). Cost comes from the exporter's series
//! only, so tokens over the whole range would make cost per token low:
//! where the exporter's samples are fewer than the counters', tokens and
//! requests are counted over the covered steps only and the gap is
//! reported (docs/right-sizing.md, "Coverage").

use std::collections::BTreeMap;

use super::{Bound, History, KEY, Key, SERVING_COUNTERS, Window};
use crate::Error;
use crate::prom::Prometheus;

/// A gap under this many steps is the range's edges, not a gap.
const MIN_GAP_STEPS: f64 = 2.0;

impl History {
    pub(super) fn read_coverage(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let (r, st) = (&w.range, &w.step);
        let names: Vec<&str> = SERVING_COUNTERS
            .iter()
            .map(|c| c.1.split('{').next().unwrap_or(c.1))
            .collect();
        let q = format!(
            "max by ({KEY}) (count_over_time((max by (cluster, namespace, pod) ({{__name__=~\"{}\"}}))[{r}:{st}]) \
             * on (cluster, namespace, pod) group_left (workload_kind, workload) \
             max by (cluster, namespace, pod, workload_kind, workload) (max_over_time(gpu_pod_info[{r}])))",
            names.join("|")
        );
        let served = self.keyed(p, "serving counter samples", Bound::NonNegative, &q)?;
        let mut gapped = Vec::new();
        for (k, f) in &mut self.workloads {
            let Some(n) = served.get(k) else { continue };
            let gap = n * w.step_s - f.seen_seconds;
            if gap >= MIN_GAP_STEPS * w.step_s {
                f.exporter_gap_seconds = gap;
                gapped.push(k.clone());
            }
        }
        if gapped.is_empty() {
            return Ok(());
        }
        self.covered_work(p, w, &gapped)
    }

    /// Tokens and requests over the steps the exporter's series exist:
    /// the counters' rate, joined to `gpu_pod_info` at each step, summed
    /// over the steps × the step.
    fn covered_work(&mut self, p: &Prometheus, w: &Window, gapped: &[Key]) -> Result<(), Error> {
        let (r, st) = (&w.range, &w.step);
        // Two steps: a rate needs two samples in its window.
        let window = format!("{}s", (2.0 * w.step_s).round());
        let mut totals: [BTreeMap<Key, f64>; 3] = Default::default();
        for c in SERVING_COUNTERS {
            for (i, series) in [c.1, c.2, c.3].into_iter().enumerate() {
                let q = format!(
                    "sum_over_time((sum by ({KEY}) (rate({series}[{window}]) \
                     * on (cluster, namespace, pod) group_left (workload_kind, workload) \
                     max by (cluster, namespace, pod, workload_kind, workload) (gpu_pod_info)))[{r}:{st}])"
                );
                for (k, v) in self.keyed(p, series, Bound::NonNegative, &q)? {
                    *totals[i].entry(k).or_insert(0.0) += v * w.step_s;
                }
            }
        }
        for k in gapped {
            if let Some(f) = self.workloads.get_mut(k) {
                let whole = f.prompt_tokens.unwrap_or(0.0) + f.generated_tokens.unwrap_or(0.0);
                f.tokens_whole_range = Some(whole);
                f.prompt_tokens = totals[0].get(k).copied().or(f.prompt_tokens.map(|_| 0.0));
                f.generated_tokens = totals[1]
                    .get(k)
                    .copied()
                    .or(f.generated_tokens.map(|_| 0.0));
                f.requests = totals[2].get(k).copied().or(f.requests.map(|_| 0.0));
            }
        }
        Ok(())
    }
}
