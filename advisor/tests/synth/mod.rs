//! A synthetic week of fleet history, as the exporter and the serving
//! frameworks expose it, in OpenMetrics for
//! `promtool tsdb create-blocks-from openmetrics`: per GPU its info, memory,
//! price, utilization and (Hopper) GPM activity; per pod its allocation,
//! info and VRAM; vLLM token and request counters. Load follows the day:
//! 08:00-20:00 UTC at the day level, the rest at the night level.

use std::fmt::Write as _;

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A GPU model as NVML names it.
#[derive(Clone, Copy)]
pub struct Gpu {
    pub model: &'static str,
    pub memory_gib: f64,
    /// The exporter's `--gpu-price`.
    pub price: f64,
    /// Hopper: GPM series.
    pub gpm: bool,
}

pub const H100: Gpu = Gpu {
    model: "NVIDIA H100 80GB HBM3",
    memory_gib: 79.6,
    price: 4.0,
    gpm: true,
};
pub const A100: Gpu = Gpu {
    model: "NVIDIA A100-SXM4-80GB",
    memory_gib: 79.2,
    price: 2.5,
    gpm: false,
};
#[allow(dead_code)]
pub const L4: Gpu = Gpu {
    model: "NVIDIA L4",
    memory_gib: 22.5,
    price: 0.805,
    gpm: false,
};

/// vLLM's own series of a workload: KV-cache use, how the cache was sized
/// (`vllm:cache_config_info`) and preemptions.
#[derive(Clone)]
pub struct Vllm {
    pub model_name: &'static str,
    /// `vllm:gpu_cache_usage_perc` (0-1).
    pub kv_usage: Level,
    pub gpu_memory_utilization: f64,
    pub num_gpu_blocks: u32,
    pub block_size: u32,
    /// Preemptions per second.
    pub preemptions: Level,
    /// The later name, `vllm:kv_cache_usage_perc`.
    pub new_name: bool,
    /// `vllm:num_requests_waiting`.
    pub waiting: Level,
    /// Seconds a request waits in the queue (`vllm:request_queue_time_seconds`
    /// histogram's `_sum` and `_count`, at the request rate of `tokens`;
    /// its `_bucket` series are left out: the advisor reads none).
    pub queue_time: Level,
    /// The queue (time and requests waiting) at the range's end over its
    /// start, in a straight line between (1: steady).
    pub queue_growth: f64,
    /// SGLang instead of vLLM: its scheduler's gauges (`sglang:token_usage`,
    /// `sglang:max_total_num_tokens` = `num_gpu_blocks`, `sglang:num_queue_reqs`),
    /// retractions for preemptions, its tokenizer's counters, and no
    /// `cache_config_info` (SGLang publishes none).
    pub sglang: bool,
}

/// (day, night) levels.
pub type Level = (f64, f64);

/// One workload on one whole GPU.
#[derive(Clone)]
pub struct Workload {
    pub namespace: String,
    pub name: String,
    pub kind: &'static str,
    pub gpu: Gpu,
    pub vram_gib: Level,
    pub utilization: Level,
    pub sm: Level,
    pub tensor: Level,
    pub dram: Level,
    /// vLLM prompt and generated tokens per second, requests per second.
    pub tokens: Option<(Level, Level, Level)>,
    /// Seconds of history before the end (None: the whole range).
    pub seen_s: Option<f64>,
    /// The `cluster` label of all its series (external label).
    pub cluster: Option<&'static str>,
    /// `gpuscale.dev/tier` on its pods (`--pod-label gpuscale.dev/tier`).
    pub tier: Option<&'static str>,
    /// `node_pool` of its node's `gpu_node_info`.
    pub pool: Option<&'static str>,
    /// Whole GPUs it holds (tensor parallel), 1 by default.
    pub gpus: usize,
    pub vllm: Option<Vllm>,
    /// NVML's proxies: memory duty cycle, power over a 400 W limit, PCIe
    /// bytes per second both ways.
    pub nvml: Option<(Level, Level, Level)>,
    /// No exporter series from `.0` seconds before the end for `.1`
    /// seconds (the serving counters go on).
    pub gap: Option<(i64, i64)>,
    /// Its series stop this many seconds before the end (it moved away).
    pub until_s: Option<i64>,
    /// Its pool as a `node_pool` target label on `gpu_info` instead of
    /// `gpu_node_info` (an exporter that read no Node).
    pub pool_on_gpu_info: bool,
    /// No pod: a node's free GPU (its exporter's GPU series alone).
    pub spare: bool,
    /// Its `tokens` are TGI's (`tgi_request_input_length_sum`, ...,
    /// `tgi_request_success`; TGI's router labels them with no model).
    pub tgi: bool,
}

#[allow(clippy::too_many_arguments)]
pub fn workload(
    namespace: &str,
    name: &str,
    kind: &'static str,
    gpu: Gpu,
    vram_gib: Level,
    utilization: Level,
    sm: Level,
    tensor: Level,
    dram: Level,
) -> Workload {
    Workload {
        namespace: namespace.into(),
        name: name.into(),
        kind,
        gpu,
        vram_gib,
        utilization,
        sm,
        tensor,
        dram,
        tokens: None,
        seen_s: None,
        cluster: None,
        tier: None,
        pool: None,
        gpus: 1,
        vllm: None,
        nvml: None,
        gap: None,
        until_s: None,
        pool_on_gpu_info: false,
        spare: false,
        tgi: false,
    }
}

/// The built-in scenario: an embedding model on a whole H100, a 70B model
/// filling one, a decode-heavy vLLM chat service, two idle notebooks and a
/// small classifier on A100s, and a workload started 20 minutes ago.
/// Levels: VRAM GiB, utilization, SM, tensor, DRAM active.
#[rustfmt::skip]
pub fn scenario() -> Vec<Workload> {
    let mut chat = workload("ml-serve", "chat", "Deployment", H100,
        (40.0, 40.0), (1.0, 0.6), (0.55, 0.3), (0.25, 0.1), (0.65, 0.3));
    chat.tokens = Some(((900.0, 200.0), (2400.0, 500.0), (3.0, 0.6)));
    let mut fresh = workload("ml-serve", "fresh", "Deployment", H100,
        (5.0, 5.0), (0.2, 0.2), (0.05, 0.05), (0.02, 0.02), (0.03, 0.03));
    fresh.seen_s = Some(20.0 * 60.0);
    let mut v = vec![
        workload("ml-serve", "embedder", "Deployment", H100,
            (6.0, 5.5), (0.3, 0.1), (0.08, 0.02), (0.03, 0.01), (0.05, 0.01)),
        workload("ml-serve", "llama-70b", "Deployment", H100,
            (75.0, 75.0), (0.9, 0.4), (0.6, 0.2), (0.35, 0.1), (0.45, 0.2)),
        chat,
        workload("research", "nb-alice", "StatefulSet", A100,
            (2.0, 2.0), (0.01, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
        workload("research", "nb-bob", "StatefulSet", A100,
            (3.0, 3.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
        workload("research", "classifier", "Deployment", A100,
            (4.0, 4.0), (0.2, 0.06), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
        fresh,
    ];
    // The lab's notebooks and classifier are `dev`; ml-serve has no tier
    // and so is production (the default).
    for w in v.iter_mut().filter(|w| w.namespace == "research") {
        w.tier = Some("dev");
    }
    v
}

/// `n` workloads cycling through the scenario's shapes (for the bench and
/// the walkthrough, `examples/synth.rs`): the first seven are the
/// scenario itself, the next seven its copies in namespaces `<ns>-1`, ...
#[allow(dead_code)]
pub fn fleet(n: usize) -> Vec<Workload> {
    let base = scenario();
    (0..n)
        .map(|i| {
            let mut w = base[i % base.len()].clone();
            let copy = i / base.len();
            if copy > 0 {
                w.namespace = format!("{}-{copy}", w.namespace);
            }
            w
        })
        .collect()
}

fn is_day(t: i64) -> bool {
    (8..20).contains(&((t % 86_400) / 3600))
}

fn at(l: Level, t: i64) -> f64 {
    if is_day(t) { l.0 } else { l.1 }
}

/// Timestamps of the samples: `end` back over `range_s`, every `step_s`.
pub fn times(end: i64, range_s: i64, step_s: i64) -> Vec<i64> {
    let n = range_s / step_s;
    (0..n).map(|i| end - (n - 1 - i) * step_s).collect()
}

#[allow(dead_code)]
/// The hand computation of the test: (prompt + generated) tokens over the
/// samples, and GPU-hours x price.
pub fn tokens_and_cost(w: &Workload, end: i64, range_s: i64, step_s: i64) -> (f64, f64) {
    let ts = times(end, range_s, step_s);
    let (p, g, _) = w.tokens.expect("a serving workload");
    // A counter's increase over the range is the sum of rate x step of
    // every sample after the first.
    let tokens: f64 = ts[1..]
        .iter()
        .map(|t| (at(p, *t) + at(g, *t)) * step_s as f64)
        .sum();
    let hours = ts.len() as f64 * step_s as f64 / 3600.0;
    (tokens, hours * w.gpu.price)
}

struct Family {
    name: &'static str,
    series: Vec<(String, Vec<(i64, f64)>)>,
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", inner.join(","))
}

fn family<'a>(fams: &'a mut Vec<Family>, name: &'static str) -> &'a mut Family {
    if let Some(i) = fams.iter().position(|f| f.name == name) {
        return &mut fams[i];
    }
    fams.push(Family {
        name,
        series: Vec::new(),
    });
    let last = fams.len() - 1;
    &mut fams[last]
}

fn gauge(
    fams: &mut Vec<Family>,
    name: &'static str,
    l: String,
    ts: &[i64],
    f: impl Fn(i64) -> f64,
) {
    let pts = ts.iter().map(|t| (*t, f(*t))).collect();
    family(fams, name).series.push((l, pts));
}

fn counter(
    fams: &mut Vec<Family>,
    name: &'static str,
    l: String,
    ts: &[i64],
    step: i64,
    rate: Level,
) {
    counter_of(fams, name, l, ts, step, |t| at(rate, t));
}

/// A counter growing at `rate(t)` a second.
fn counter_of(
    fams: &mut Vec<Family>,
    name: &'static str,
    l: String,
    ts: &[i64],
    step: i64,
    rate: impl Fn(i64) -> f64,
) {
    let mut total = 0.0;
    let pts = ts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if i > 0 {
                total += rate(*t) * step as f64;
            }
            (*t, total)
        })
        .collect();
    family(fams, name).series.push((l, pts));
}

/// The queue's factor at `t`: 1 at `start`, `growth` at `end`, linear.
pub fn ramp(growth: f64, (start, end): (i64, i64), t: i64) -> f64 {
    if end <= start {
        return 1.0;
    }
    1.0 + (growth - 1.0) * (t - start) as f64 / (end - start) as f64
}

/// A short name of a GPU model for node names: `h100`, `a100`, `t4`.
fn tag(model: &str) -> String {
    let word = model
        .split(' ')
        .find(|w| w.chars().any(|c| c.is_ascii_digit()))
        .unwrap_or("gpu");
    word.split('-').next().unwrap_or(word).to_ascii_lowercase()
}

/// Where a workload's GPUs are: its node (one per cluster, pool, GPU
/// model and 8 GPUs, as real nodes hold one model; a workload's GPUs on
/// one node) and each GPU's index there.
fn layout(ws: &[Workload]) -> Vec<(String, Vec<usize>)> {
    let mut next: std::collections::BTreeMap<(Option<&str>, Option<&str>, &str), usize> =
        std::collections::BTreeMap::new();
    ws.iter()
        .map(|w| {
            let n = next.entry((w.cluster, w.pool, w.gpu.model)).or_insert(0);
            if *n % 8 + w.gpus > 8 {
                *n += 8 - *n % 8;
            }
            let node = format!(
                "{}{}-node-{}",
                w.pool.map_or(String::new(), |p| format!("{p}-")),
                tag(w.gpu.model),
                *n / 8
            );
            let gpus = (*n % 8..*n % 8 + w.gpus).collect();
            *n += w.gpus;
            (node, gpus)
        })
        .collect()
}

/// The `cluster` pair of a workload's series, if it has one.
fn with_cluster<'a>(w: &'a Workload, pairs: &[(&'a str, &'a str)]) -> String {
    let mut v: Vec<(&str, &str)> = w.cluster.map(|c| ("cluster", c)).into_iter().collect();
    v.extend_from_slice(pairs);
    labels(&v)
}

fn add_workload(
    fams: &mut Vec<Family>,
    i: usize,
    w: &Workload,
    at: &(String, Vec<usize>),
    all: &[i64],
    step: i64,
) {
    let first_on_node = at.1.first() == Some(&0);
    if first_on_node
        && !w.pool_on_gpu_info
        && let Some(pool) = w.pool
    {
        let l = with_cluster(w, &[("node", at.0.as_str()), ("node_pool", pool)]);
        gauge(fams, "gpu_node_info", l, all, |_| 1.0);
    }
    let first = w
        .seen_s
        .map_or(i64::MIN, |s| all[all.len() - 1] - s as i64 + step);
    let last = all[all.len() - 1] - w.until_s.unwrap_or(0);
    let ts: Vec<i64> = all
        .iter()
        .copied()
        .filter(|t| *t >= first && *t <= last)
        .collect();
    // The exporter's series skip its gap; the serving counters do not.
    let end = all[all.len() - 1];
    let up = |t: &i64| {
        w.gap
            .is_none_or(|(from, len)| *t < end - from || *t >= end - from + len)
    };
    let all_up: Vec<i64> = all.iter().copied().filter(up).collect();
    let ts_up: Vec<i64> = ts.iter().copied().filter(up).collect();
    let mut devs = Vec::new();
    for (k, g) in at.1.iter().enumerate() {
        let gpu = g.to_string();
        let uuid = format!("GPU-{i:08x}-{k:04x}-4000-8000-000000000000");
        let d = [at.0.as_str(), gpu.as_str(), uuid.as_str()];
        add_gpu(fams, w, &d, &all_up, &ts_up);
        devs.push([at.0.clone(), gpu, uuid]);
    }
    if !w.spare {
        add_pod(fams, w, &devs, (&ts_up, &ts), step);
    }
}

/// One GPU's own series: info, memory, price, utilization, GPM.
fn add_gpu(fams: &mut Vec<Family>, w: &Workload, d: &[&str; 3], all: &[i64], ts: &[i64]) {
    let dev = [("node", d[0]), ("gpu", d[1]), ("uuid", d[2])];
    let g = w.gpu;
    let mut info = vec![dev[0], dev[1], dev[2], ("model", g.model)];
    if let (true, Some(pool)) = (w.pool_on_gpu_info, w.pool) {
        info.push(("node_pool", pool));
    }
    gauge(fams, "gpu_info", with_cluster(w, &info), all, |_| 1.0);
    let l = with_cluster(w, &dev);
    gauge(fams, "gpu_memory_total_bytes", l.clone(), all, |_| {
        g.memory_gib * GIB
    });
    gauge(fams, "gpu_price_usd_per_hour", l.clone(), all, |_| g.price);
    let (u, sm, tc, dr) = (w.utilization, w.sm, w.tensor, w.dram);
    gauge(fams, "gpu_utilization_ratio", l.clone(), ts, |t| at(u, t));
    if g.gpm {
        gauge(fams, "gpu_sm_active_ratio", l.clone(), ts, |t| at(sm, t));
        gauge(fams, "gpu_tensor_active_ratio", l.clone(), ts, |t| {
            at(tc, t)
        });
        gauge(fams, "gpu_dram_active_ratio", l.clone(), ts, |t| at(dr, t));
    }
    if let Some((duty, power, pcie)) = w.nvml {
        gauge(fams, "gpu_memory_utilization_ratio", l.clone(), ts, |t| {
            at(duty, t)
        });
        gauge(fams, "gpu_power_usage_watts", l.clone(), ts, |t| {
            at(power, t) * 400.0
        });
        gauge(fams, "gpu_power_limit_watts", l.clone(), ts, |_| 400.0);
        gauge(
            fams,
            "gpu_pcie_transmit_bytes_per_second",
            l.clone(),
            ts,
            |t| at(pcie, t) / 2.0,
        );
        gauge(fams, "gpu_pcie_receive_bytes_per_second", l, ts, |t| {
            at(pcie, t) / 2.0
        });
    }
}

/// The pod's series: allocation, info, VRAM, and vLLM's.
fn add_pod(
    fams: &mut Vec<Family>,
    w: &Workload,
    devs: &[[String; 3]],
    (ts, served_ts): (&[i64], &[i64]),
    step: i64,
) {
    let pod = format!("{}-0", w.name);
    let node = devs[0][0].as_str();
    let mut podl = vec![
        ("namespace", w.namespace.as_str()),
        ("pod", pod.as_str()),
        ("workload", w.name.as_str()),
        ("workload_kind", w.kind),
    ];
    if let Some(t) = w.tier {
        podl.push(("label_gpuscale_dev_tier", t));
    }
    for d in devs {
        let dev = [
            ("node", d[0].as_str()),
            ("gpu", d[1].as_str()),
            ("uuid", d[2].as_str()),
        ];
        let mut alloc = dev.to_vec();
        alloc.extend_from_slice(&podl);
        alloc.extend([
            ("container", "main"),
            ("resource", "nvidia.com/gpu"),
            ("allocation", "device_plugin"),
        ]);
        gauge(
            fams,
            "gpu_pod_allocation",
            with_cluster(w, &alloc),
            ts,
            |_| 1.0,
        );
        let mut meml = dev.to_vec();
        meml.extend_from_slice(&podl);
        let vram = w.vram_gib;
        gauge(
            fams,
            "gpu_pod_memory_used_bytes",
            with_cluster(w, &meml),
            ts,
            |t| at(vram, t) * GIB,
        );
    }
    let mut info = vec![("node", node)];
    info.extend_from_slice(&podl);
    gauge(fams, "gpu_pod_info", with_cluster(w, &info), ts, |_| 1.0);
    add_serving(fams, w, (podl[0], podl[1]), served_ts, step);
}

/// The serving framework's series of a pod: its token and request
/// counters, and vLLM's or SGLang's own.
fn add_serving(
    fams: &mut Vec<Family>,
    w: &Workload,
    podl: ((&str, &str), (&str, &str)),
    served_ts: &[i64],
    step: i64,
) {
    let podl = [podl.0, podl.1];
    let model = w.vllm.as_ref().map_or("llama-3-8b", |v| v.model_name);
    let served = if w.tgi {
        with_cluster(w, &[podl[0], podl[1]])
    } else {
        with_cluster(w, &[podl[0], podl[1], ("model_name", model)])
    };
    let names = match &w.vllm {
        _ if w.tgi => [
            "tgi_request_input_length_sum",
            "tgi_request_generated_tokens_sum",
            "tgi_request_success",
        ],
        Some(v) if v.sglang => [
            "sglang:prompt_tokens_total",
            "sglang:generation_tokens_total",
            "sglang:num_requests_total",
        ],
        _ => [
            "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total",
            "vllm:request_success_total",
        ],
    };
    if let Some((p, gen_, rq)) = w.tokens {
        counter(fams, names[0], served.clone(), served_ts, step, p);
        counter(fams, names[1], served.clone(), served_ts, step, gen_);
        counter(fams, names[2], served.clone(), served_ts, step, rq);
    }
    if let Some(v) = w.vllm.as_ref().filter(|v| v.sglang) {
        let sched = with_cluster(
            w,
            &[
                podl[0],
                podl[1],
                ("engine_type", "unified"),
                ("model_name", model),
                ("moe_ep_rank", "0"),
                ("pp_rank", "0"),
                ("tp_rank", "0"),
            ],
        );
        add_sglang(fams, v, &sched, served_ts, step);
    } else if let Some(v) = &w.vllm {
        add_vllm(fams, w, v, &served, (podl[0], podl[1]), served_ts, step);
    }
}

/// SGLang's scheduler series (labels `sched`: its model, engine type and
/// ranks): KV pool use and size, queue, retractions.
fn add_sglang(fams: &mut Vec<Family>, v: &Vllm, sched: &str, ts: &[i64], step: i64) {
    let (kv, q, g) = (v.kv_usage, v.waiting, v.queue_growth);
    let span = (ts[0], ts[ts.len() - 1]);
    gauge(fams, "sglang:token_usage", sched.into(), ts, |t| at(kv, t));
    let pool = f64::from(v.num_gpu_blocks);
    gauge(fams, "sglang:num_used_tokens", sched.into(), ts, |t| {
        (at(kv, t) * pool).floor()
    });
    gauge(
        fams,
        "sglang:max_total_num_tokens",
        sched.into(),
        ts,
        |_| pool,
    );
    gauge(fams, "sglang:num_queue_reqs", sched.into(), ts, |t| {
        at(q, t) * ramp(g, span, t)
    });
    counter(
        fams,
        "sglang:num_retracted_requests_total",
        sched.into(),
        ts,
        step,
        v.preemptions,
    );
}

fn add_vllm(
    fams: &mut Vec<Family>,
    w: &Workload,
    v: &Vllm,
    served: &str,
    pod: ((&str, &str), (&str, &str)),
    ts: &[i64],
    step: i64,
) {
    let usage = if v.new_name {
        "vllm:kv_cache_usage_perc"
    } else {
        "vllm:gpu_cache_usage_perc"
    };
    let kv = v.kv_usage;
    gauge(fams, usage, served.to_string(), ts, |t| at(kv, t));
    let (f, n, b) = (
        v.gpu_memory_utilization.to_string(),
        v.num_gpu_blocks.to_string(),
        v.block_size.to_string(),
    );
    let config = with_cluster(
        w,
        &[
            pod.0,
            pod.1,
            ("block_size", &b),
            ("gpu_memory_utilization", &f),
            ("num_gpu_blocks", &n),
        ],
    );
    gauge(fams, "vllm:cache_config_info", config, ts, |_| 1.0);
    let (q, g) = (v.waiting, v.queue_growth);
    let span = (ts[0], ts[ts.len() - 1]);
    gauge(
        fams,
        "vllm:num_requests_waiting",
        served.to_string(),
        ts,
        |t| at(q, t) * ramp(g, span, t),
    );
    if let (Some((_, _, rq)), true) = (w.tokens, v.queue_time != (0.0, 0.0)) {
        let qt = v.queue_time;
        let l = served.to_string();
        counter_of(
            fams,
            "vllm:request_queue_time_seconds_sum",
            l.clone(),
            ts,
            step,
            |t| at(rq, t) * at(qt, t) * ramp(g, span, t),
        );
        counter_of(
            fams,
            "vllm:request_queue_time_seconds_count",
            l,
            ts,
            step,
            |t| at(rq, t),
        );
    }
    counter(
        fams,
        "vllm:num_preemptions_total",
        served.to_string(),
        ts,
        step,
        v.preemptions,
    );
}

/// Writes the OpenMetrics text of the workloads' history, one family at a
/// time (OpenMetrics wants each family's samples together), building one
/// workload's series at a time so a large fleet streams.
pub fn write_openmetrics(
    ws: &[Workload],
    end: i64,
    range_s: i64,
    step_s: i64,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let all = times(end, range_s, step_s);
    let at = layout(ws);
    let mut names: Vec<&'static str> = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        let mut fams = Vec::new();
        add_workload(&mut fams, i, w, &at[i], &all[all.len() - 1..], step_s);
        for f in fams {
            if !names.contains(&f.name) {
                names.push(f.name);
            }
        }
    }
    for name in names {
        writeln!(out, "# TYPE {name} gauge")?;
        for (i, w) in ws.iter().enumerate() {
            let mut fams = Vec::new();
            add_workload(&mut fams, i, w, &at[i], &all, step_s);
            let mut text = String::new();
            for f in fams.iter().filter(|f| f.name == name) {
                for (l, pts) in &f.series {
                    for (t, v) in pts {
                        let _ = writeln!(text, "{name}{l} {v} {t}");
                    }
                }
            }
            out.write_all(text.as_bytes())?;
        }
    }
    out.write_all(b"# EOF\n")
}

/// The OpenMetrics text of the workloads' history.
#[allow(dead_code)]
pub fn openmetrics(ws: &[Workload], end: i64, range_s: i64, step_s: i64) -> String {
    let mut v = Vec::new();
    let _ = write_openmetrics(ws, end, range_s, step_s, &mut v);
    String::from_utf8_lossy(&v).into_owned()
}
