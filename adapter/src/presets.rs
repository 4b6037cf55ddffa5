//! Built-in metrics, served when no `--config` is given and selectable from
//! a config file with `presets: [...]` (or `presets: all`).

use std::time::Duration;

use crate::metric_def::{EmptyPolicy, MetricDef, PodMetadata};
use crate::objects::ObjectKind;

/// Names of the presets, in documentation order.
pub const NAMES: &[&str] = &[
    "vllm_queue_depth",
    "vllm_kv_cache_usage",
    "vllm_ttft_p95_seconds",
    "vllm_e2e_latency_p95_seconds",
    "tgi_queue_size",
    "triton_queue_time_avg_seconds",
    "gpu_pressure",
];

/// GPU pressure per pod: the largest of SM utilization, DRAM bandwidth
/// activity and memory fullness of the GPUs the pod holds alone, and the
/// pod's own SM utilization (which also covers shared GPUs and MIG
/// instances); averaged over pods.
pub const GPU_PRESSURE_QUERY: &str = r#"avg(max by (namespace, pod) (label_replace(gpu_utilization_ratio{${matchers}}, "signal", "utilization", "", "") or label_replace(gpu_dram_active_ratio{${matchers}}, "signal", "dram", "", "") or label_replace(gpu_memory_used_bytes{${matchers}} / gpu_memory_total_bytes{${matchers}}, "signal", "memory", "", "") or label_replace(gpu_pod_sm_utilization_ratio{${matchers}}, "signal", "pod_sm", "", "")))"#;

/// GPU pressure of each pod: the same per-pod maximum that
/// [`GPU_PRESSURE_QUERY`] averages.
pub const GPU_PRESSURE_PER_POD_QUERY: &str = r#"max by (namespace, pod) (label_replace(gpu_utilization_ratio{${matchers}}, "signal", "utilization", "", "") or label_replace(gpu_dram_active_ratio{${matchers}}, "signal", "dram", "", "") or label_replace(gpu_memory_used_bytes{${matchers}} / gpu_memory_total_bytes{${matchers}}, "signal", "memory", "", "") or label_replace(gpu_pod_sm_utilization_ratio{${matchers}}, "signal", "pod_sm", "", ""))"#;

/// The per-pod query (custom metrics API, `pods/<name>`) of a preset.
fn per_pod(name: &str) -> Option<&'static str> {
    Some(match name {
        "vllm_queue_depth" => "sum by (namespace, pod) (vllm:num_requests_waiting{${matchers}})",
        "vllm_kv_cache_usage" => "avg by (namespace, pod) (vllm:kv_cache_usage_perc{${matchers}})",
        "gpu_pressure" => GPU_PRESSURE_PER_POD_QUERY,
        _ => return None,
    })
}

fn def(name: &str, query: &str, window: u64, description: &str) -> MetricDef {
    let objects = per_pod(name)
        .map(|q| (ObjectKind::Pods, q.to_string()))
        .into_iter()
        .collect();
    MetricDef {
        objects,
        name: name.into(),
        query: query.into(),
        empty: EmptyPolicy::Error,
        freshness: Duration::from_secs(30),
        window: Duration::from_secs(window),
        description: description.into(),
        activation: crate::metric_def::DEFAULT_ACTIVATION,
        pod_metadata: PodMetadata::default(),
    }
}

/// One preset by name.
pub fn get(name: &str) -> Option<MetricDef> {
    Some(match name {
        "vllm_queue_depth" => def(
            name,
            "sum(vllm:num_requests_waiting{${series_matchers}} * on (namespace, pod) group_left () ${pods})",
            60,
            "Requests waiting in vLLM's queue, summed over the matched pods.",
        ),
        "vllm_kv_cache_usage" => def(
            name,
            "avg(vllm:kv_cache_usage_perc{${series_matchers}} * on (namespace, pod) group_left () ${pods})",
            60,
            "vLLM KV-cache usage (0-1), averaged over the matched pods.",
        ),
        "vllm_ttft_p95_seconds" => def(
            name,
            "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{${series_matchers}}[2m]) * on (namespace, pod) group_left () ${pods}))",
            120,
            "p95 time to first token over 2 minutes, seconds.",
        ),
        "vllm_e2e_latency_p95_seconds" => def(
            name,
            "histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{${series_matchers}}[2m]) * on (namespace, pod) group_left () ${pods}))",
            120,
            "p95 end-to-end request latency over 2 minutes, seconds.",
        ),
        "tgi_queue_size" => def(
            name,
            "sum(tgi_queue_size{${series_matchers}} * on (namespace, pod) group_left () ${pods})",
            60,
            "Requests waiting in TGI's queue, summed over the matched pods.",
        ),
        "triton_queue_time_avg_seconds" => def(
            name,
            "sum(rate(nv_inference_queue_duration_us{${series_matchers}}[2m]) * on (namespace, pod) group_left () ${pods}) / sum(rate(nv_inference_request_success{${series_matchers}}[2m]) * on (namespace, pod) group_left () ${pods}) / 1e6",
            120,
            "Triton average queue time per successful request over 2 minutes, seconds.",
        ),
        "gpu_pressure" => def(
            name,
            GPU_PRESSURE_QUERY,
            60,
            "max(utilization, DRAM active, memory used/total) per pod, averaged over the matched pods (0-1).",
        ),
        _ => return None,
    })
}

/// All presets.
pub fn all() -> Vec<MetricDef> {
    NAMES.iter().filter_map(|n| get(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MetricsConfig;

    #[test]
    fn every_preset_is_a_valid_config_entry() {
        assert_eq!(all().len(), NAMES.len());
        let c = MetricsConfig::parse("presets: all\n").unwrap();
        for m in c.metrics() {
            let text = format!(
                "metrics:\n  - name: {}\n    query: '{}'\n",
                m.name,
                m.query.replace('\'', "''")
            );
            MetricsConfig::parse(&text).unwrap();
        }
    }

    #[test]
    fn per_pod_gpu_pressure_is_what_the_external_one_averages() {
        assert_eq!(
            GPU_PRESSURE_QUERY,
            format!("avg({GPU_PRESSURE_PER_POD_QUERY})")
        );
        let c = MetricsConfig::presets();
        let pods: Vec<&str> = c
            .metrics()
            .iter()
            .filter(|m| m.objects.contains_key(&ObjectKind::Pods))
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(
            pods,
            ["vllm_queue_depth", "vllm_kv_cache_usage", "gpu_pressure"]
        );
    }
}
