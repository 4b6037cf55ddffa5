//! What a vLLM workload's own series say of its KV cache: how full it is
//! at p99 (`vllm:gpu_cache_usage_perc`, renamed `vllm:kv_cache_usage_perc`
//! in later versions: both are read), how it was sized
//! (`vllm:cache_config_info`), the model it serves (`model_name` of its
//! usage gauge) and its preemptions.

use serde::Serialize;

use super::{Bound, History, KEY, Key, Window};
use crate::Error;
use crate::prom::Prometheus;

/// A vLLM workload's KV cache, from its pods' series.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Kv {
    /// KV-cache usage p99 over the range (0-1), the busiest pod.
    pub usage_p99: Option<f64>,
    /// `--gpu-memory-utilization` it runs with (`cache_config_info`).
    pub gpu_memory_utilization: Option<f64>,
    /// KV blocks vLLM allocated, and tokens per block.
    pub num_gpu_blocks: Option<f64>,
    pub block_size: Option<f64>,
    /// `model_name` of its vLLM series.
    pub served_model: Option<String>,
    /// `vllm:num_preemptions_total` increase over the range.
    pub preemptions: Option<f64>,
    /// `vllm:num_requests_waiting` p95 over the range, the busiest pod.
    pub waiting_p95: Option<f64>,
    /// It serves SGLang (`sglang:max_total_num_tokens`), not vLLM.
    pub sglang: bool,
    /// Tokens its KV pool holds where it says so directly (SGLang).
    pub pool_tokens: Option<f64>,
}

/// The KV usage gauges, under either name.
const USAGE: &str =
    "{__name__=~\"vllm:gpu_cache_usage_perc|vllm:kv_cache_usage_perc|sglang:token_usage\"}";
/// Requests evicted for lack of KV blocks: vLLM's preemptions, SGLang's
/// retractions.
const PREEMPTED: &str =
    "{__name__=~\"vllm:num_preemptions_total|sglang:num_retracted_requests_total\"}";
/// Requests waiting in the queue.
const WAITING: &str = "{__name__=~\"vllm:num_requests_waiting|sglang:num_queue_reqs\"}";

/// A pod-level expression summed up to its workload through `gpu_pod_info`.
fn to_workload(inner: &str, keep: &str, r: &str) -> String {
    let by = if keep.is_empty() {
        KEY.to_string()
    } else {
        format!("{KEY}, {keep}")
    };
    format!(
        "max by ({by}) ({inner} * on (cluster, namespace, pod) group_left (workload_kind, workload) \
         max by (cluster, namespace, pod, workload_kind, workload) (max_over_time(gpu_pod_info[{r}])))"
    )
}

fn parse(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0)
}

impl History {
    pub(super) fn read_serving(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let (r, st) = (&w.range, &w.step);
        let usage = self.keyed(
            p,
            "vLLM KV-cache usage p99",
            Bound::Ratio,
            &to_workload(
                &format!(
                    "quantile_over_time(0.99, (max by (cluster, namespace, pod) ({USAGE}))[{r}:{st}])"
                ),
                "",
                r,
            ),
        )?;
        let pre = self.keyed(
            p,
            "vllm:num_preemptions_total",
            Bound::NonNegative,
            &to_workload(
                &format!("sum by (cluster, namespace, pod) (increase({PREEMPTED}[{r}]))"),
                "",
                r,
            ),
        )?;
        let waiting = self.keyed(
            p,
            "vllm:num_requests_waiting p95",
            Bound::NonNegative,
            &to_workload(
                &format!(
                    "quantile_over_time(0.95, (max by (cluster, namespace, pod) ({WAITING}))[{r}:{st}])"
                ),
                "",
                r,
            ),
        )?;
        let keep = "gpu_memory_utilization, num_gpu_blocks, block_size";
        let config = p.query(&to_workload(
            &format!("max by (cluster, namespace, pod, {keep}) (last_over_time(vllm:cache_config_info[{r}]))"),
            keep,
            r,
        ))?;
        let models = p.query(&to_workload(
            &format!("max by (cluster, namespace, pod, model_name) (last_over_time({USAGE}[{r}]))"),
            "model_name",
            r,
        ))?;
        for (k, f) in &mut self.workloads {
            let kv = Kv {
                usage_p99: usage.get(k).copied(),
                preemptions: pre.get(k).copied(),
                waiting_p95: waiting.get(k).copied(),
                ..Kv::default()
            };
            if kv.usage_p99.is_some() || kv.preemptions.is_some() || kv.waiting_p95.is_some() {
                f.kv = Some(kv);
            }
        }
        for s in config {
            if let Some(f) = self.workloads.get_mut(&Key::of(&s)) {
                let kv = f.kv.get_or_insert_with(Kv::default);
                kv.gpu_memory_utilization = parse(s.label("gpu_memory_utilization"))
                    .filter(|u| *u <= 1.0)
                    .or(kv.gpu_memory_utilization);
                kv.num_gpu_blocks = parse(s.label("num_gpu_blocks")).or(kv.num_gpu_blocks);
                kv.block_size = parse(s.label("block_size")).or(kv.block_size);
            }
        }
        for s in models {
            if let Some(kv) = self
                .workloads
                .get_mut(&Key::of(&s))
                .and_then(|f| f.kv.as_mut())
            {
                kv.served_model = Some(s.label("model_name").to_string());
            }
        }
        Ok(())
    }
}
