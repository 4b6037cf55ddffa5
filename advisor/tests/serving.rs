//! vLLM's preallocation seen through, and GPUs that are too small, on a
//! backfilled week in a real Prometheus: a 7B model on an H100 at 0.9
//! preallocation using 6 % of its KV cache is told an L40S or a 3g.40gb
//! slice with the flags to run it there; an L4 at 97 % KV use with
//! preemptions and a 70B model on two H100s with no headroom are "too
//! small", with what to move to and what that costs more; an A100 with
//! DCGM activity gets a real class, two with NVML alone proxy classes.

use gpuscale_advisor::Report;
use gpuscale_advisor::bottleneck::Bottleneck;

use crate::fleet::spare;
use crate::synth::{A100, Gpu, H100, L4, Vllm, Workload, workload};
use crate::week::{RANGE_S, STEP_S, find, kinds};

const H: f64 = 730.0;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn vllm(model: &'static str, kv: (f64, f64), f: f64, blocks: u32) -> Vllm {
    Vllm {
        model_name: model,
        kv_usage: kv,
        gpu_memory_utilization: f,
        num_gpu_blocks: blocks,
        block_size: 16,
        preemptions: (0.0, 0.0),
        new_name: false,
        waiting: (0.0, 0.0),
        queue_time: (0.0, 0.0),
        queue_growth: 1.0,
        sglang: false,
    }
}

/// Levels: VRAM GiB, utilization, SM, tensor, DRAM active.
#[rustfmt::skip]
fn fleet() -> Vec<Workload> {
    let mut chat = workload("chat", "chat-7b", "Deployment", H100,
        (72.04, 72.04), (0.6, 0.3), (0.2, 0.1), (0.05, 0.02), (0.15, 0.05));
    chat.vllm = Some(vllm("Qwen/Qwen2-7B-Instruct", (0.06, 0.02), 0.9, 36_000));
    chat.tokens = Some(((300.0, 50.0), (600.0, 100.0), (2.0, 0.3)));
    let mut small = workload("edge", "l4-chat", "Deployment", L4,
        (21.5, 21.5), (0.98, 0.5), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    let mut v = vllm("meta-llama/Llama-3.1-8B-Instruct", (0.97, 0.6), 0.95, 4_000);
    v.preemptions = (0.01, 0.0);
    v.new_name = true;
    small.vllm = Some(v);
    let mut big = workload("llm", "llama-70b-tp", "Deployment", H100,
        (75.0, 75.0), (0.9, 0.5), (0.6, 0.3), (0.3, 0.1), (0.45, 0.2));
    big.gpus = 2;
    // A100s with neither GPM nor DCGM: NVML's proxies only.
    let mut decoder = workload("nvml", "a100-decoder", "Deployment", A100,
        (30.0, 30.0), (0.95, 0.5), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    decoder.nvml = Some(((0.7, 0.3), (0.6, 0.4), (0.2e9, 0.1e9)));
    let mut light = workload("nvml", "a100-light", "Deployment", A100,
        (6.0, 6.0), (0.3, 0.1), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    light.nvml = Some(((0.1, 0.05), (0.3, 0.2), (0.1e9, 0.0)));
    // An A100 whose exporter reads DCGM: the same activity families as
    // GPM (gpu_sm_active_ratio, ...), so a real class.
    let dcgm_a100 = Gpu { gpm: true, ..A100 };
    #[rustfmt::skip]
    let mut dcgm = workload("nvml", "a100-dcgm", "Deployment", dcgm_a100,
        (30.0, 30.0), (0.95, 0.5), (0.5, 0.2), (0.1, 0.05), (0.6, 0.2));
    for w in [&mut decoder, &mut light, &mut dcgm] {
        w.cluster = Some("lab");
    }
    // Busy all day with a queue that grows eight-fold over the week: its
    // KV cache is not the limit. The same at a steady queue is not too
    // small: a queue at the ceiling that does not grow is the load it has.
    let mut busy = workload("queue", "busy-8b", "Deployment", H100,
        (72.04, 72.04), (0.98, 0.5), (0.7, 0.3), (0.3, 0.1), (0.45, 0.2));
    busy.tokens = Some(((300.0, 50.0), (600.0, 100.0), (2.0, 0.3)));
    let mut steady = busy.clone();
    let mut v = vllm("meta-llama/Llama-3.1-8B-Instruct", (0.3, 0.1), 0.9, 30_000);
    (v.waiting, v.queue_time) = ((3.0, 0.0), (0.3, 0.05));
    busy.vllm = Some(Vllm { queue_growth: 8.0, ..v.clone() });
    steady.name = "steady-8b".into();
    steady.vllm = Some(Vllm { queue_time: (2.0, 0.5), ..v });
    // Node pools of the types their moves go to (a GPU of each).
    let l40s = Gpu { model: "NVIDIA L40S", memory_gib: 44.5, price: 1.861, gpm: false };
    let h200 = Gpu { model: "NVIDIA H200", memory_gib: 139.8, price: 7.91, gpm: true };
    vec![
        chat, small, big, decoder, light, dcgm, busy, steady,
        spare("l40s", l40s, None, None),
        spare("h200", h200, None, None),
        spare("l40s-lab", l40s, Some("lab"), None),
    ]
}

#[test]
fn vllm_is_sized_by_what_it_needs_and_small_gpus_are_called_too_small() {
    let w = crate::fleet::week(&fleet());
    let r = w.advise();
    a_7b_model_at_0_9_gets_an_l40s_or_a_3g_slice(&r);
    an_l4_at_97_percent_kv_is_too_small(&r);
    a_70b_model_without_headroom_is_too_small(&r);
    nvml_only_a100s_get_proxy_classes(&r);
    a_queue_at_the_ceiling_is_too_small(&r, w.end);
}

fn busy_8b() -> Workload {
    fleet()
        .into_iter()
        .find(|w| w.name == "busy-8b")
        .expect("in the fleet")
}

/// Mean queue time of the first and last day, as Prometheus' ratio of two
/// `increase(...[1d])` reads it: the samples in the day after its first.
fn queue_days(w: &Workload, end: i64) -> (f64, f64) {
    let v = w.vllm.as_ref().expect("vLLM");
    let ts = crate::synth::times(end, RANGE_S, STEP_S);
    let span = (ts[0], ts[ts.len() - 1]);
    let rate = |t: i64| if is_day(t) { 2.0 } else { 0.3 };
    let q = |t: i64| {
        if is_day(t) {
            v.queue_time.0
        } else {
            v.queue_time.1
        }
    };
    let mean = |from: i64, to: i64| {
        let day: Vec<i64> = ts
            .iter()
            .copied()
            .filter(|t| *t > from && *t <= to)
            .collect();
        let (sum, n) = day[1..].iter().fold((0.0, 0.0), |(s, n), t| {
            let r = rate(*t);
            (
                s + r * q(*t) * crate::synth::ramp(v.queue_growth, span, *t),
                n + r,
            )
        });
        sum / n
    };
    let day = 86_400;
    (
        mean(end - RANGE_S, end - RANGE_S + day),
        mean(end - day, end),
    )
}

fn is_day(t: i64) -> bool {
    (8..20).contains(&((t % 86_400) / 3600))
}

fn a_queue_at_the_ceiling_is_too_small(r: &Report, end: i64) {
    let a = find(r, "busy-8b");
    assert!(
        a.too_small,
        "{:?} {:?}",
        a.requests_waiting_p95, a.utilization_p95
    );
    let t = crate::fleet::rec(a, "too_small");
    // By hand: the mean queue time a request of its first and last day
    // (the day's queue time over its requests).
    let (first, last) = queue_days(&busy_8b(), end);
    let q = a.queue.as_ref().expect("a queue");
    assert_eq!(q.unit, "seconds");
    assert!((q.first_day / first - 1.0).abs() < 0.02, "{q:?} vs {first}");
    assert!((q.last_day / last - 1.0).abs() < 0.02, "{q:?} vs {last}");
    let rose = format!("mean queue time rose from {:.2} s a request", q.first_day);
    assert!(t.why.contains(&rose), "{} lacks {rose}", t.why);
    // Steady: 2 s a request all week, at the same ceiling: not too small.
    let s = find(r, "steady-8b");
    assert!(!s.too_small, "{:?}", s.queue);
    // 1.2 x 74.5 GiB (the table's H100) = 89.4 GiB at >= 3350 GB/s: an
    // H200 ($7.91) beats two H100s ($8.00).
    assert!(t.action.contains("1 x H200"), "{}", t.action);
    near(-t.saving_usd_per_month, (7.91 - 4.0) * H, "cost increase");
}

fn nvml_only_a100s_get_proxy_classes(r: &Report) {
    let c = find(r, "a100-dcgm");
    assert_eq!(
        c.bottleneck,
        Bottleneck::MemoryBandwidth,
        "{}",
        c.bottleneck_reason
    );
    assert!((c.dram_active_p95.expect("DCGM's DRAM activity") - 0.6).abs() < 1e-9);
    let d = find(r, "a100-decoder");
    assert_eq!(
        d.bottleneck,
        Bottleneck::MemoryBandwidthProxy,
        "{}",
        d.bottleneck_reason
    );
    assert_eq!(d.bottleneck.as_str(), "memory_bandwidth_proxy");
    assert!(
        d.bottleneck_reason
            .contains("NVML proxy: memory duty cycle p95 70 %"),
        "{}",
        d.bottleneck_reason
    );
    // Bandwidth-bound: only a GPU with at least 2039 GB/s, all dearer.
    assert!(!kinds(d).contains(&"gpu_type"), "{:?}", d.recommendations);
    let l = find(r, "a100-light");
    assert_eq!(
        l.bottleneck,
        Bottleneck::BalancedProxy,
        "{}",
        l.bottleneck_reason
    );
    // Duty cycle 10 % x 2039 GB/s bounds its traffic: an L40S carries it
    // (utilization 30 % x 2039 / 864 = 71 %); a T4, L4 or A10G would be
    // over 80 % busy.
    let t = crate::fleet::rec(l, "gpu_type");
    assert!(t.action.starts_with("L40S "), "{}", t.action);
    near(
        t.saving_usd_per_month,
        (2.5 - 1.861) * H,
        "L40S for an A100",
    );
}

fn near(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() < 0.01,
        "{what}: got {got}, by hand {want}"
    );
}

fn a_7b_model_at_0_9_gets_an_l40s_or_a_3g_slice(r: &Report) {
    let a = find(r, "chat-7b");
    let v = a.vllm.as_ref().expect("seen through");
    // By hand: 7 B parameters x 2 bytes; 0.9 x 79.6 GiB reserved; 6 % of
    // the rest used at p99; 0.4 GiB beyond the reservation.
    let w = 7e9 * 2.0 / GIB;
    let reserved = 0.9 * 79.6;
    let need = w + 0.06 * (reserved - w) + (72.04 - reserved);
    near(v.weights_gib, w, "weights");
    near(a.memory_need_gib.expect("need"), need, "need");
    assert!((v.kv_usage_p99 - 0.06).abs() < 1e-9);
    let mig = crate::fleet::rec(a, "mig");
    assert!(mig.action.contains("3g.40gb"), "{}", mig.action);
    near(mig.saving_usd_per_month, 4.0 * 4.0 / 7.0 * H, "3g.40gb");
    let ty = crate::fleet::rec(a, "gpu_type");
    assert!(ty.action.starts_with("L40S "), "{}", ty.action);
    near(ty.saving_usd_per_month, (4.0 - 1.861) * H, "L40S");
    // How to run it on the L40S: the same fraction, and a --max-model-len
    // the smaller KV pool holds.
    let tokens = (36_000.0 * 16.0 * (0.9 * 44.7 - w) / (reserved - w)).floor();
    let run = ty.settings.as_deref().expect("vLLM flags");
    assert!(run.contains("--gpu-memory-utilization 0.90"), "{run}");
    assert!(
        run.contains(&format!("--max-model-len at most {tokens:.0}")),
        "{run}"
    );
}

fn an_l4_at_97_percent_kv_is_too_small(r: &Report) {
    let a = find(r, "l4-chat");
    assert!(a.too_small);
    assert!(a.kv_usage_p99.expect("kv") >= 0.95);
    // 0.01 preemptions a second over the day's 12 hours, 7 days (less the
    // first sample's: a counter's increase starts at its second sample).
    assert!(a.preemptions.expect("preemptions") > 2000.0);
    let k = kinds(a);
    assert!(
        k.contains(&"too_small") && !k.contains(&"mig") && !k.contains(&"gpu_type"),
        "{k:?}"
    );
    let t = crate::fleet::rec(a, "too_small");
    // 1.2 x 22.4 GiB = 26.9 GiB: a second L4 ($0.805) beats an L40S ($1.861).
    assert!(t.action.contains("2 x L4"), "{}", t.action);
    near(
        -t.saving_usd_per_month,
        (2.0 * 0.805 - 0.805) * H,
        "cost increase",
    );
    assert!(
        t.why.contains("KV cache p99") && t.why.contains("preemptions"),
        "{}",
        t.why
    );
}

fn a_70b_model_without_headroom_is_too_small(r: &Report) {
    let a = find(r, "llama-70b-tp");
    assert_eq!(a.devices_now, 2);
    assert!(a.too_small);
    let t = crate::fleet::rec(a, "too_small");
    // 2 x 75 GiB x 1.2 = 180 GiB: two H200s (262.6 GiB, $7.91 each) beat
    // four H100s ($4.00 each).
    assert!(t.action.contains("2 x H200"), "{}", t.action);
    near(
        -t.saving_usd_per_month,
        (2.0 * 7.91 - 2.0 * 4.0) * H,
        "cost increase",
    );
    // The three too-small moves: 2 x H200, a second L4, an H200.
    let total = (2.0 * 7.91 - 8.0) * H + 0.805 * H + (7.91 - 4.0) * H;
    near(r.too_small_cost_increase_usd_per_month, total, "total");
}
