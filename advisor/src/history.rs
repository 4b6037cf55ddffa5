//! What Prometheus saw of each workload over the range: the facts the
//! advisor judges. One PromQL query per fact for all workloads at once,
//! evaluated at the range's end with subqueries at the step, so the cost
//! is a few dozen queries whatever the number of workloads.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Error;
use crate::prom::{Prometheus, Sample};

mod coverage;
mod moves;
mod placement;
mod queue;
mod serving;
mod sglang;

pub use queue::Queue;
pub use serving::Kv;

/// The labels that name a workload (the pod mapper's owner walk).
const KEY: &str = "cluster, namespace, workload_kind, workload";

/// A workload: the top owner of its pods.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Key {
    pub cluster: String,
    pub namespace: String,
    pub kind: String,
    pub name: String,
}

impl Key {
    fn of(s: &Sample) -> Self {
        Self {
            cluster: s.label("cluster").to_string(),
            namespace: s.label("namespace").to_string(),
            kind: s.label("workload_kind").to_string(),
            name: s.label("workload").to_string(),
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.cluster.is_empty() {
            write!(f, "{}/", self.cluster)?;
        }
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A whole GPU or a MIG instance.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DeviceId {
    pub cluster: String,
    pub node: String,
    pub uuid: String,
    pub mig_uuid: String,
}

impl DeviceId {
    fn of(s: &Sample) -> Self {
        Self {
            cluster: s.label("cluster").to_string(),
            node: s.label("node").to_string(),
            uuid: s.label("uuid").to_string(),
            mig_uuid: s.label("mig_uuid").to_string(),
        }
    }
    fn gpu(&self) -> Self {
        Self {
            mig_uuid: String::new(),
            ..self.clone()
        }
    }
}

/// What is known of one device from its own series.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Device {
    pub model: Option<String>,
    /// MIG profile (`3g.40gb`) of a MIG instance.
    pub profile: Option<String>,
    pub memory_bytes: Option<f64>,
    /// The GPU's own memory, for a MIG instance whose profile is unknown.
    pub gpu_memory_bytes: Option<f64>,
    /// `gpu_price_usd_per_hour` of its GPU.
    pub price_usd_per_hour: Option<f64>,
    /// Its price series was refused (NaN, not above 0, over the bound):
    /// no cost, and no fallback to the table's list price either.
    pub price_refused: bool,
}

/// The facts of one workload over the range.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Facts {
    /// Devices it holds at the range's end, with the fraction of each that
    /// is its own (1 unless time-sliced with other workloads).
    pub devices_now: Vec<(DeviceId, f64)>,
    /// Seconds it held a GPU within the range.
    pub seen_seconds: f64,
    pub vram_peak_bytes: Option<f64>,
    pub vram_p99_bytes: Option<f64>,
    pub sm_active_p95: Option<f64>,
    pub tensor_active_p95: Option<f64>,
    pub dram_active_p95: Option<f64>,
    pub utilization_p95: Option<f64>,
    /// NVML proxies of its whole GPUs, p95: memory-controller duty cycle,
    /// power over the enforced limit, PCIe bytes per second both ways.
    pub memory_duty_p95: Option<f64>,
    pub power_of_limit_p95: Option<f64>,
    pub pcie_bytes_per_second_p95: Option<f64>,
    /// Share of its samples with the GPU under the idle threshold.
    pub idle_fraction: Option<f64>,
    /// Device-hours per device over the range (time-sliced GPUs split).
    pub device_hours: Vec<(DeviceId, f64)>,
    pub prompt_tokens: Option<f64>,
    pub generated_tokens: Option<f64>,
    pub requests: Option<f64>,
    /// The request counter its serving framework exports, if any.
    pub request_series: Option<&'static str>,
    /// A token or request counter of it was refused: no cost per unit.
    pub work_refused: bool,
    /// `gpuscale.dev/tier` values of its pods (label, else annotation).
    pub tiers: Vec<String>,
    /// What its vLLM pods say of their KV cache, if they serve vLLM.
    pub kv: Option<Kv>,
    /// Seconds its serving counters were scraped without the exporter's
    /// series (0: none); its work is then counted over the covered steps.
    pub exporter_gap_seconds: f64,
    /// Tokens over the whole range, where a gap made them differ.
    pub tokens_whole_range: Option<f64>,
    /// Where it ran before its latest placement, if it moved: its facts
    /// are then the latest placement's alone.
    pub moved: Option<String>,
    /// Its serving queue on the range's first and last day.
    pub queue: Option<Queue>,
}

/// Everything the advisor read.
#[derive(Debug, Default)]
pub struct History {
    pub workloads: BTreeMap<Key, Facts>,
    pub devices: BTreeMap<DeviceId, Device>,
    /// Range and step, seconds.
    pub range_s: f64,
    pub step_s: f64,
    /// Series refused on arrival: their labels and why (never advice).
    pub excluded: Vec<String>,
    /// `gpu_node_info{node_pool}` per (cluster, node).
    pub node_pools: BTreeMap<(String, String), String>,
    /// `gpuscale.dev/tier` label of each (cluster, namespace).
    pub namespace_tiers: BTreeMap<(String, String), String>,
}

/// The tier label or annotation (docs/right-sizing.md, "Tiers").
pub const TIER_KEY: &str = "gpuscale.dev/tier";

/// What a value must be to be used (docs/right-sizing.md, "Checks").
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    /// Finite, above 0, at most [`MAX_PRICE`].
    Price,
    /// Finite, in [0, 1 + [`RATIO_TOLERANCE`]].
    Ratio,
    /// Finite and above 0 (memory totals).
    Positive,
    /// Finite and at least 0 (peaks, counts, counter increases, hours).
    NonNegative,
}

/// Rounding a ratio may carry over 1 (sums of per-SM counters).
pub const RATIO_TOLERANCE: f64 = 1e-3;
/// USD per GPU-hour over which a price is refused: ten times the dearest
/// on-demand list price of any GPU.
pub const MAX_PRICE: f64 = 1000.0;

impl Bound {
    /// Why `v` is refused, if it is.
    pub fn refuse(self, v: f64) -> Option<&'static str> {
        if !v.is_finite() {
            return Some("not a finite number");
        }
        match self {
            Self::Price if v <= 0.0 => Some("a price must be above 0"),
            Self::Price if v > MAX_PRICE => Some("a price over 1000 USD per GPU-hour"),
            Self::Ratio if !(0.0..=1.0 + RATIO_TOLERANCE).contains(&v) => {
                Some("a ratio outside [0, 1]")
            }
            Self::Positive if v <= 0.0 => Some("must be above 0"),
            Self::NonNegative if v < 0.0 => Some("negative"),
            _ => None,
        }
    }
}

/// The range and step as PromQL durations, and in seconds.
pub struct Window {
    pub range: String,
    pub step: String,
    pub range_s: f64,
    pub step_s: f64,
}

/// Utilization under this is no work (same as the `idle` bottleneck).
pub const IDLE_UTILIZATION: f64 = 0.05;

/// Token and request counters per serving framework, as they emit them.
/// (prompt tokens, generated tokens, requests).
pub const SERVING_COUNTERS: &[(&str, &str, &str, &str)] = &[
    (
        "vLLM",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
    ),
    (
        "SGLang",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:num_requests_total",
    ),
    (
        "TGI",
        "tgi_request_input_length_sum",
        "tgi_request_generated_tokens_sum",
        "tgi_request_success",
    ),
    (
        "Triton (TensorRT-LLM)",
        "nv_llm_input_token_len_sum{response_metric_type=\"total_input_tokens\"}",
        "nv_llm_output_token_len_sum{response_metric_type=\"total_output_tokens\"}",
        "nv_inference_request_success",
    ),
];

/// A device series per workload: the whole GPU's `dev` family, or the MIG
/// instance's `mig` family, for every allocation; the busiest replica.
pub fn per_workload(dev: &str, mig: &str) -> String {
    format!(
        "max by ({KEY}) (\
         (gpu_pod_allocation{{mig_uuid=\"\"}} * on (cluster, node, uuid) group_left () max by (cluster, node, uuid) ({dev})) \
         or (gpu_pod_allocation{{mig_uuid!=\"\"}} * on (cluster, node, uuid, mig_uuid) group_left () max by (cluster, node, uuid, mig_uuid) ({mig})))"
    )
}

/// Whether `s` is within `bound`; if not, a note names it and the reason.
pub fn keep(excluded: &mut Vec<String>, what: &str, bound: Bound, s: &Sample) -> bool {
    let Some(why) = bound.refuse(s.value) else {
        return true;
    };
    tracing::warn!(series = %s.name(), value = s.value, what, why, "refused");
    excluded.push(format!(
        "{what} {}: {} is {why}: excluded",
        s.name(),
        s.value
    ));
    false
}

/// A query's series, each checked on arrival and handed to `f` as it is
/// read (no vector of the answer), with whether it is within `bound`; a
/// refused one is already a note.
pub(crate) fn fold(
    p: &Prometheus,
    excluded: &mut Vec<String>,
    (what, bound): (&str, Bound),
    q: &str,
    mut f: impl FnMut(Sample, bool),
) -> Result<(), Error> {
    p.query_each(q, |s| {
        let ok = keep(excluded, what, bound, &s);
        f(s, ok);
    })
}

impl History {
    /// A query's values within `bound` per workload, each series folded in
    /// as it is read (no vector of the answer); the others become notes.
    fn keyed(
        &mut self,
        p: &Prometheus,
        what: &str,
        bound: Bound,
        q: &str,
    ) -> Result<BTreeMap<Key, f64>, Error> {
        let mut out = BTreeMap::new();
        fold(p, &mut self.excluded, (what, bound), q, |s, ok| {
            if ok {
                out.insert(Key::of(&s), s.value);
            }
        })?;
        Ok(out)
    }

    /// Reads every fact from Prometheus.
    pub fn read(p: &Prometheus, w: &Window) -> Result<Self, Error> {
        let mut h = Self::read_range(p, w)?;
        h.read_moves(p, w)?;
        Ok(h)
    }

    /// Every fact over one range, without splitting it at moves.
    fn read_range(p: &Prometheus, w: &Window) -> Result<Self, Error> {
        let mut h = Self {
            range_s: w.range_s,
            step_s: w.step_s,
            ..Self::default()
        };
        h.read_allocations(p)?;
        h.read_devices(p, w)?;
        h.read_usage(p, w)?;
        h.read_device_hours(p, w)?;
        h.read_tokens(p, w)?;
        h.read_coverage(p, w)?;
        h.read_placement(p, w)?;
        h.read_serving(p, w)?;
        h.read_sglang(p, w)?;
        h.read_queue(p, w)?;
        Ok(h)
    }

    /// Devices per workload now, each with its share of the device. The
    /// sharing is read first so both answers are folded as they arrive.
    fn read_allocations(&mut self, p: &Prometheus) -> Result<(), Error> {
        let mut sharing: BTreeMap<DeviceId, f64> = BTreeMap::new();
        fold(
            p,
            &mut self.excluded,
            ("allocations per device", Bound::Positive),
            "count by (cluster, node, uuid, mig_uuid) (gpu_pod_allocation)",
            |s, ok| {
                if ok {
                    sharing.insert(DeviceId::of(&s), s.value);
                }
            },
        )?;
        let workloads = &mut self.workloads;
        fold(
            p,
            &mut self.excluded,
            ("allocations", Bound::Positive),
            &format!("count by ({KEY}, node, uuid, mig_uuid) (gpu_pod_allocation)"),
            |s, ok| {
                if !ok {
                    return;
                }
                let d = DeviceId::of(&s);
                // Its allocations (containers) over all on the device.
                let n = sharing.get(&d).map_or(1.0, |all| (s.value / all).min(1.0));
                let f = workloads.entry(Key::of(&s)).or_default();
                f.devices_now.push((d, n));
            },
        )?;
        Ok(())
    }

    fn read_devices(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let r = &w.range;
        let devices = &mut self.devices;
        p.query_each(
            &format!("max by (cluster, node, uuid, model) (last_over_time(gpu_info[{r}]))"),
            |s| {
                devices.entry(DeviceId::of(&s)).or_default().model =
                    Some(s.label("model").to_string())
            },
        )?;
        let memory = |d: &mut BTreeMap<DeviceId, Device>, s: Sample, ok: bool| {
            if ok {
                d.entry(DeviceId::of(&s)).or_default().memory_bytes = Some(s.value);
            }
        };
        fold(
            p,
            &mut self.excluded,
            ("gpu_memory_total_bytes", Bound::Positive),
            &format!("max by (cluster, node, uuid) (last_over_time(gpu_memory_total_bytes[{r}]))"),
            |s, ok| memory(devices, s, ok),
        )?;
        fold(
            p,
            &mut self.excluded,
            ("gpu_price_usd_per_hour", Bound::Price),
            &format!("max by (cluster, node, uuid) (last_over_time(gpu_price_usd_per_hour[{r}]))"),
            |s, ok| {
                let d = devices.entry(DeviceId::of(&s)).or_default();
                if ok {
                    d.price_usd_per_hour = Some(s.value);
                } else {
                    d.price_refused = true;
                }
            },
        )?;
        p.query_each(
            &format!("max by (cluster, node, uuid, mig_uuid, profile) (last_over_time(gpu_mig_info[{r}]))"),
            |s| devices.entry(DeviceId::of(&s)).or_default().profile = Some(s.label("profile").to_string()),
        )?;
        fold(
            p,
            &mut self.excluded,
            ("gpu_mig_memory_total_bytes", Bound::Positive),
            &format!(
                "max by (cluster, node, uuid, mig_uuid) (last_over_time(gpu_mig_memory_total_bytes[{r}]))"
            ),
            |s, ok| memory(devices, s, ok),
        )?;
        // A MIG instance inherits its GPU's model, price and memory.
        let gpus: BTreeMap<DeviceId, Device> = self
            .devices
            .iter()
            .filter(|(id, _)| id.mig_uuid.is_empty())
            .map(|(id, d)| (id.clone(), d.clone()))
            .collect();
        for (id, d) in self
            .devices
            .iter_mut()
            .filter(|(id, _)| !id.mig_uuid.is_empty())
        {
            if let Some(g) = gpus.get(&id.gpu()) {
                d.model = d.model.take().or_else(|| g.model.clone());
                d.price_usd_per_hour = d.price_usd_per_hour.or(g.price_usd_per_hour);
                d.price_refused |= g.price_refused;
                d.gpu_memory_bytes = g.memory_bytes;
            }
        }
        Ok(())
    }

    fn read_usage(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let (r, st) = (&w.range, &w.step);
        let nn = Bound::NonNegative;
        let seen = self.keyed(
            p,
            "samples seen",
            nn,
            &format!("count_over_time((max by ({KEY}) (gpu_pod_allocation))[{r}:{st}])"),
        )?;
        let vram =
            "max by (cluster, namespace, workload_kind, workload) (gpu_pod_memory_used_bytes)";
        let peak = self.keyed(
            p,
            "peak VRAM",
            nn,
            &format!("max_over_time(({vram})[{r}:{st}])"),
        )?;
        let p99 = self.keyed(
            p,
            "p99 VRAM",
            nn,
            &format!("quantile_over_time(0.99, ({vram})[{r}:{st}])"),
        )?;
        self.read_activity(p, w)?;
        // NVML has no utilization per MIG instance: its SM activity stands in.
        let util_expr = per_workload("gpu_utilization_ratio", "gpu_mig_sm_active_ratio");
        let util = self.keyed(
            p,
            "utilization p95",
            Bound::Ratio,
            &format!("quantile_over_time(0.95, ({util_expr})[{r}:{st}])"),
        )?;
        let samples = self.keyed(
            p,
            "utilization samples",
            nn,
            &format!("count_over_time(({util_expr})[{r}:{st}])"),
        )?;
        let idle = self.keyed(
            p,
            "idle samples",
            nn,
            &format!("count_over_time(({util_expr} < {IDLE_UTILIZATION})[{r}:{st}])"),
        )?;
        for (k, f) in &mut self.workloads {
            f.seen_seconds = seen.get(k).copied().unwrap_or(0.0) * w.step_s;
            f.vram_peak_bytes = peak.get(k).copied();
            f.vram_p99_bytes = p99.get(k).copied();
            f.utilization_p95 = util.get(k).copied();
            f.idle_fraction = samples
                .get(k)
                .filter(|n| **n > 0.0)
                .map(|n| (idle.get(k).copied().unwrap_or(0.0) / n).min(1.0));
        }
        Ok(())
    }

    /// SM, tensor and DRAM activity p95 per workload (ratios).
    fn read_activity(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let (r, st) = (&w.range, &w.step);
        let p95 = |h: &mut Self, what: &str, dev: &str, mig: &str| {
            h.keyed(
                p,
                what,
                Bound::Ratio,
                &format!(
                    "quantile_over_time(0.95, ({})[{r}:{st}])",
                    per_workload(dev, mig)
                ),
            )
        };
        let sm = p95(
            self,
            "SM active p95",
            "gpu_sm_active_ratio",
            "gpu_mig_sm_active_ratio",
        )?;
        let tensor = p95(
            self,
            "tensor active p95",
            "gpu_tensor_active_ratio",
            "gpu_mig_tensor_active_ratio",
        )?;
        let dram = p95(
            self,
            "DRAM active p95",
            "gpu_dram_active_ratio",
            "gpu_mig_dram_active_ratio",
        )?;
        for (k, f) in &mut self.workloads {
            f.sm_active_p95 = sm.get(k).copied();
            f.tensor_active_p95 = tensor.get(k).copied();
            f.dram_active_p95 = dram.get(k).copied();
        }
        self.read_proxies(p, w)
    }

    /// The NVML proxies p95, whole GPUs only (they are device-wide).
    fn read_proxies(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let (r, st) = (&w.range, &w.step);
        let p95 = |h: &mut Self, what: &str, bound: Bound, dev: &str| {
            let q = format!(
                "quantile_over_time(0.95, (max by ({KEY}) (gpu_pod_allocation{{mig_uuid=\"\"}} \
                 * on (cluster, node, uuid) group_left () max by (cluster, node, uuid) ({dev})))[{r}:{st}])"
            );
            h.keyed(p, what, bound, &q)
        };
        let duty = p95(
            self,
            "memory duty cycle p95",
            Bound::Ratio,
            "gpu_memory_utilization_ratio",
        )?;
        let power = p95(
            self,
            "power over the limit p95",
            Bound::NonNegative,
            "gpu_power_usage_watts / gpu_power_limit_watts",
        )?;
        let pcie = p95(
            self,
            "PCIe p95",
            Bound::NonNegative,
            "gpu_pcie_transmit_bytes_per_second + gpu_pcie_receive_bytes_per_second",
        )?;
        for (k, f) in &mut self.workloads {
            f.memory_duty_p95 = duty.get(k).copied();
            f.power_of_limit_p95 = power.get(k).copied();
            f.pcie_bytes_per_second_p95 = pcie.get(k).copied();
        }
        Ok(())
    }

    fn read_device_hours(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let q = format!(
            "sum_over_time((sum by ({KEY}, node, uuid, mig_uuid) (gpu_pod_allocation) \
             / on (cluster, node, uuid, mig_uuid) group_left () \
             count by (cluster, node, uuid, mig_uuid) (gpu_pod_allocation))[{}:{}])",
            w.range, w.step
        );
        let workloads = &mut self.workloads;
        let what = ("device-hours", Bound::NonNegative);
        fold(p, &mut self.excluded, what, &q, |s, ok| {
            if let Some(f) = workloads.get_mut(&Key::of(&s)).filter(|_| ok) {
                f.device_hours
                    .push((DeviceId::of(&s), s.value * w.step_s / 3600.0));
            }
        })
    }

    /// One counter's increase per workload; refused series mark theirs.
    fn counter(
        &mut self,
        p: &Prometheus,
        r: &str,
        series: &str,
    ) -> Result<BTreeMap<Key, f64>, Error> {
        let q = format!(
            "sum by ({KEY}) (increase({series}[{r}]) \
             * on (cluster, namespace, pod) group_left (workload_kind, workload) \
             max by (cluster, namespace, pod, workload_kind, workload) (max_over_time(gpu_pod_info[{r}])))"
        );
        let (mut good, workloads) = (BTreeMap::new(), &mut self.workloads);
        fold(
            p,
            &mut self.excluded,
            (series, Bound::NonNegative),
            &q,
            |s, ok| {
                if ok {
                    good.insert(Key::of(&s), s.value);
                } else if let Some(f) = workloads.get_mut(&Key::of(&s)) {
                    f.work_refused = true;
                }
            },
        )?;
        Ok(good)
    }

    fn read_tokens(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let r = &w.range;
        for (_, prompt, generated, requests) in SERVING_COUNTERS {
            let pt = self.counter(p, r, prompt)?;
            let gt = self.counter(p, r, generated)?;
            let rq = self.counter(p, r, requests)?;
            for (k, f) in &mut self.workloads {
                add(&mut f.prompt_tokens, pt.get(k));
                add(&mut f.generated_tokens, gt.get(k));
                add(&mut f.requests, rq.get(k));
                if rq.contains_key(k) {
                    f.request_series = Some(requests);
                }
            }
        }
        Ok(())
    }
}

fn add(to: &mut Option<f64>, v: Option<&f64>) {
    if let Some(v) = v {
        *to = Some(to.unwrap_or(0.0) + v);
    }
}
