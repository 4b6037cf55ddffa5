//! Built-in metrics, served when no `--config` is given and selectable from
//! a config file with `presets: [...]` (or `presets: all`).

use std::time::Duration;

use crate::metric_def::{EmptyPolicy, MetricDef, PodMetadata};
use crate::objects::ObjectKind;

/// Names of the presets, in documentation order.
pub const NAMES: &[&str] = &[
    "vllm_queue_depth",
    "vllm_kv_cache_usage",
    "vllm_request_activity",
    "vllm_ttft_p95_seconds",
    "vllm_e2e_latency_p95_seconds",
    "tgi_queue_size",
    "triton_queue_time_avg_seconds",
    "gpu_pressure",
    "gateway_flow_control_queue_size",
    "gateway_pool_average_queue_size",
    "gateway_pool_ready_pods",
    "keda_http_pending_requests",
    "knative_activator_request_concurrency",
    "knative_revision_request_concurrency",
    "activator_pending_requests",
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
        namespace_label: crate::metric_def::DEFAULT_NAMESPACE_LABEL.into(),
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
        // Scale-to-zero's idle rule: `num_requests_waiting` is 0 whenever
        // vLLM has free batch slots, so a service with light steady traffic
        // reads idle on it. In flight (running + waiting) plus completions
        // over the window is 0 only when the server did nothing. A server
        // not scraped has no running series: empty, unknown, never idle.
        "vllm_request_activity" => def(
            name,
            "sum((vllm:num_requests_running{${series_matchers}} + vllm:num_requests_waiting{${series_matchers}}) * on (namespace, pod) group_left () ${pods}) + (sum(rate(vllm:request_success_total{${series_matchers}}[2m]) * on (namespace, pod) group_left () ${pods}) or vector(0))",
            120,
            "Requests in flight (running and waiting) plus requests completed per second over 2 minutes, summed over the matched pods: 0 only when vLLM served nothing in the window.",
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
        _ => return holder(name),
    })
}

/// Presets for request holders: gateways and activators that queue
/// requests in front of a model, in the shape those projects emit. All stay
/// `empty: error`: each family appears only once its holder has seen the
/// route (or the pool) and vanishes when the holder is not scraped, so no
/// series is never known to mean no request.
fn holder(name: &str) -> Option<MetricDef> {
    Some(match name {
        // llm-d's endpoint picker emits `llm_d_epp_*` and keeps the Gateway
        // API Inference Extension name as a deprecated mirror: read the new
        // one, fall back to the old (never both: they count the same requests).
        "gateway_flow_control_queue_size" => def(
            name,
            "sum(llm_d_epp_flow_control_queue_size{${matchers}}) or sum(inference_extension_flow_control_queue_size{${matchers}})",
            60,
            "Requests queued by the endpoint picker's flow control (Gateway API Inference Extension, llm-d), summed over the matched flows.",
        ),
        "gateway_pool_average_queue_size" => def(
            name,
            "avg(inference_pool_average_queue_size{${matchers}})",
            60,
            "Average queue size of the InferencePool's model servers, as the endpoint picker reports it (label `name`: the pool).",
        ),
        "gateway_pool_ready_pods" => def(
            name,
            "sum(llm_d_epp_ready_endpoints{${matchers}}) or sum(inference_pool_ready_pods{${matchers}})",
            60,
            "Ready pods of the InferencePool, as the endpoint picker reports it (label `name`: the pool).",
        ),
        "keda_http_pending_requests" => with_namespace_label(
            def(
                name,
                "sum(interceptor_request_concurrency{${matchers}})",
                60,
                "Requests in flight at the KEDA HTTP add-on's interceptor for the matched routes (label `route_name`).",
            ),
            "route_namespace",
        ),
        "knative_activator_request_concurrency" => with_namespace_label(
            def(
                name,
                "sum(activator_request_concurrency{${matchers}})",
                60,
                "Requests held or proxied by Knative's activator for the matched revisions.",
            ),
            "namespace_name",
        ),
        // Knative's OpenTelemetry metrics (`kn.revision.request.concurrency`,
        // attributes `k8s.namespace.name`, `kn.*.name`) replaced the
        // OpenCensus family above; both are served, each in its own shape.
        "knative_revision_request_concurrency" => with_namespace_label(
            def(
                name,
                "sum(kn_revision_request_concurrency{${matchers}})",
                60,
                "Requests routed to Knative's activator for the matched revisions, in Knative's OpenTelemetry names.",
            ),
            "k8s_namespace_name",
        ),
        "activator_pending_requests" => def(
            name,
            "sum(gpuscale_activator_pending_requests{${matchers}})",
            60,
            "Requests the gpuscale activator holds for the matched routes (label `route`), waiting for a Ready endpoint.",
        ),
        _ => return None,
    })
}

/// The holder's series name the namespace of what they hold in their own
/// label; the holder's pod runs elsewhere, so `namespace` is its own.
fn with_namespace_label(mut d: MetricDef, label: &str) -> MetricDef {
    d.namespace_label = label.into();
    d
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

    fn rendered(name: &str, selector: &str) -> String {
        let def = get(name).unwrap();
        let reqs = crate::selector::parse(selector).unwrap();
        crate::prometheus::join::render(&def, "llm", &reqs).unwrap()
    }

    #[test]
    fn holder_presets_render_the_upstream_series_shapes() {
        assert_eq!(
            rendered(
                "gateway_flow_control_queue_size",
                "inference_pool=chat-pool,target_model_name=llama-8b"
            ),
            r#"sum(llm_d_epp_flow_control_queue_size{namespace="llm",inference_pool="chat-pool",target_model_name="llama-8b"}) or sum(inference_extension_flow_control_queue_size{namespace="llm",inference_pool="chat-pool",target_model_name="llama-8b"})"#
        );
        assert_eq!(
            rendered("gateway_pool_average_queue_size", "name=chat-pool"),
            r#"avg(inference_pool_average_queue_size{namespace="llm",name="chat-pool"})"#
        );
        assert_eq!(
            rendered("gateway_pool_ready_pods", "name=chat-pool"),
            r#"sum(llm_d_epp_ready_endpoints{namespace="llm",name="chat-pool"}) or sum(inference_pool_ready_pods{namespace="llm",name="chat-pool"})"#
        );
        assert_eq!(
            rendered("keda_http_pending_requests", "route_name=llama-8b"),
            r#"sum(interceptor_request_concurrency{route_namespace="llm",route_name="llama-8b"})"#
        );
        assert_eq!(
            rendered(
                "knative_activator_request_concurrency",
                "configuration_name=llama-8b"
            ),
            r#"sum(activator_request_concurrency{namespace_name="llm",configuration_name="llama-8b"})"#
        );
        assert_eq!(
            rendered(
                "knative_revision_request_concurrency",
                "kn_configuration_name=llama-8b"
            ),
            r#"sum(kn_revision_request_concurrency{k8s_namespace_name="llm",kn_configuration_name="llama-8b"})"#
        );
        assert_eq!(
            rendered("activator_pending_requests", "route=llama-8b"),
            r#"sum(gpuscale_activator_pending_requests{namespace="llm",route="llama-8b"})"#
        );
    }

    #[test]
    fn a_holders_namespace_label_cannot_be_chosen_by_the_selector() {
        for (name, label) in [
            ("keda_http_pending_requests", "route_namespace"),
            ("knative_activator_request_concurrency", "namespace_name"),
            ("knative_revision_request_concurrency", "k8s_namespace_name"),
        ] {
            let def = get(name).unwrap();
            let reqs = crate::selector::parse(&format!("{label}=other")).unwrap();
            let err = crate::prometheus::join::render(&def, "llm", &reqs).unwrap_err();
            assert!(err.to_string().contains("reserved"), "{name}: {err}");
        }
    }

    #[test]
    fn every_holder_preset_refuses_an_empty_result() {
        for name in &NAMES[NAMES
            .iter()
            .position(|n| *n == "gateway_flow_control_queue_size")
            .unwrap()..]
        {
            assert_eq!(get(name).unwrap().empty, EmptyPolicy::Error, "{name}");
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
