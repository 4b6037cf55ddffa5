//! History per placement: a workload whose GPU model, MIG profile or GPU
//! count changed within the range is judged on its latest placement's
//! data alone (docs/right-sizing.md, "Moved workloads").

use std::collections::BTreeMap;

use super::{DeviceId, History, KEY, Key, Window};
use crate::Error;
use crate::prom::Prometheus;

/// Distinct latest-placement ranges read again; more moved workloads than
/// that keep their whole range, with a note.
const MAX_RANGES: usize = 8;

impl History {
    /// What a set of devices is: (model, MIG profile) sorted, with repeats.
    fn signature<'a>(&self, ids: impl Iterator<Item = &'a DeviceId>) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = ids
            .map(|id| {
                let d = self.devices.get(id);
                (
                    d.and_then(|d| d.model.clone()).unwrap_or_default(),
                    d.and_then(|d| d.profile.clone()).unwrap_or_default(),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// The workloads that held devices of another placement earlier, and
    /// a description of it.
    fn moved_workloads(&self) -> Vec<(Key, String, f64)> {
        let mut out = Vec::new();
        for (k, f) in &self.workloads {
            let now: Vec<&DeviceId> = f.devices_now.iter().map(|(d, _)| d).collect();
            let before: Vec<(&DeviceId, f64)> = f
                .device_hours
                .iter()
                .filter(|(d, h)| !now.contains(&d) && *h > 0.0)
                .map(|(d, h)| (d, *h))
                .collect();
            if before.is_empty() {
                continue;
            }
            let sig_now = self.signature(now.iter().copied());
            let sig_before = self.signature(before.iter().map(|(d, _)| *d));
            let mut distinct = sig_before.clone();
            distinct.dedup();
            if distinct.iter().all(|s| sig_now.contains(s)) && sig_before.len() <= sig_now.len() {
                continue;
            }
            let name = |s: &[(String, String)]| {
                let v: Vec<String> = s
                    .iter()
                    .map(|(m, p)| {
                        if p.is_empty() {
                            m.clone()
                        } else {
                            format!("{m} {p}")
                        }
                    })
                    .collect();
                v.join(" + ")
            };
            let hours: f64 = before.iter().map(|(_, h)| h).sum();
            out.push((
                k.clone(),
                format!("{} ({hours:.1} device-hours)", name(&distinct)),
                hours,
            ));
        }
        out
    }

    pub(super) fn read_moves(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let moved = self.moved_workloads();
        if moved.is_empty() {
            return Ok(());
        }
        let (r, st) = (&w.range, &w.step);
        // When each device it holds now was first held by it in the range.
        let first = p.query(&format!(
            "min_over_time(timestamp(max by ({KEY}, node, uuid, mig_uuid) (gpu_pod_allocation))[{r}:{st}])"
        ))?;
        let end = p.time;
        let mut ranges: BTreeMap<i64, Vec<(Key, String)>> = BTreeMap::new();
        for (k, before, _) in moved {
            let Some(f) = self.workloads.get(&k) else {
                continue;
            };
            let start = first
                .iter()
                .filter(|s| {
                    Key::of(s) == k && f.devices_now.iter().any(|(d, _)| *d == DeviceId::of(s))
                })
                .map(|s| s.value)
                .fold(f64::NEG_INFINITY, f64::max);
            if !start.is_finite() {
                continue;
            }
            // Whole steps back from the end, its first two left out: a
            // subquery evaluates at its range's start too, and the lookback
            // there still sees the previous placement's last sample.
            let steps = ((end - start) / w.step_s - 1.0).floor().max(1.0);
            let secs = (steps * w.step_s) as i64;
            ranges.entry(secs).or_default().push((k, before));
        }
        for (i, (secs, ks)) in ranges.into_iter().enumerate() {
            if i >= MAX_RANGES {
                for (k, before) in ks {
                    if let Some(f) = self.workloads.get_mut(&k) {
                        f.moved = Some(format!(
                            "{before}; too many moved workloads to read each placement apart: judged on the whole range"
                        ));
                    }
                }
                continue;
            }
            let short = Window {
                range: format!("{secs}s"),
                step: w.step.clone(),
                range_s: secs as f64,
                step_s: w.step_s,
            };
            let mut latest = Self::read_range(p, &short)?;
            self.excluded.append(&mut latest.excluded);
            for (k, before) in ks {
                if let Some(mut f) = latest.workloads.remove(&k) {
                    f.moved = Some(format!(
                        "moved: held {before} earlier in the range; judged on its latest placement alone, the last {:.1} h",
                        secs as f64 / 3600.0
                    ));
                    self.workloads.insert(k, f);
                }
            }
        }
        self.excluded.sort();
        self.excluded.dedup();
        Ok(())
    }
}
