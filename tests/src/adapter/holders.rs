//! Request holders' series as their projects emit them, for the adapter's
//! holder presets: the Gateway API Inference Extension's endpoint picker
//! (and llm-d's, which renames the families and keeps the old names as a
//! deprecated mirror), the KEDA HTTP add-on's interceptor, Knative's
//! activator (OpenCensus and OpenTelemetry names) and the gpuscale activator.
//!
//! Prometheus scrapes them with `honor_labels`, so each series carries the
//! target labels a ServiceMonitor adds (`namespace`, `pod`, `job`) here:
//! the interceptor and Knative's activator run in their own namespaces and
//! name the namespace of what they hold in a label of their own.

/// The namespace of the models in the fixture.
pub const NAMESPACE: &str = "llm";

/// A Gateway API Inference Extension endpoint picker for `chat-pool`: two
/// flows (fairness ids) queued for one model, and its pool gauges.
const GATEWAY: &str = r#"# HELP inference_extension_flow_control_queue_size Current number of requests being actively managed by the EPP flow control layer.
# TYPE inference_extension_flow_control_queue_size gauge
inference_extension_flow_control_queue_size{fairness_id="tenant-a",inference_pool="chat-pool",model_name="llama-8b",priority="0",target_model_name="llama-8b",namespace="llm",pod="chat-pool-epp-5d8f9",job="chat-pool-epp"} 3
inference_extension_flow_control_queue_size{fairness_id="tenant-b",inference_pool="chat-pool",model_name="llama-8b",priority="10",target_model_name="llama-8b",namespace="llm",pod="chat-pool-epp-5d8f9",job="chat-pool-epp"} 2
# HELP inference_pool_average_queue_size The average number of requests pending in the model server queue.
# TYPE inference_pool_average_queue_size gauge
inference_pool_average_queue_size{name="chat-pool",namespace="llm",pod="chat-pool-epp-5d8f9",job="chat-pool-epp"} 2.5
# HELP inference_pool_ready_pods The number of ready pods in the inference server pool.
# TYPE inference_pool_ready_pods gauge
inference_pool_ready_pods{name="chat-pool",namespace="llm",pod="chat-pool-epp-5d8f9",job="chat-pool-epp"} 0
"#;

/// llm-d's endpoint picker for `code-pool`: every family twice, the new
/// `llm_d_epp_*` name and the deprecated mirror, counting the same
/// requests. (One target serves both pickers here, so the families the
/// first one typed are not typed twice.)
const LLM_D: &str = r#"# TYPE llm_d_epp_flow_control_queue_size gauge
llm_d_epp_flow_control_queue_size{fairness_id="default",inference_pool="code-pool",model_name="qwen-coder",priority="0",target_model_name="qwen-coder",namespace="llm",pod="code-pool-epp-7c6d4",job="code-pool-epp"} 4
inference_extension_flow_control_queue_size{fairness_id="default",inference_pool="code-pool",model_name="qwen-coder",priority="0",target_model_name="qwen-coder",namespace="llm",pod="code-pool-epp-7c6d4",job="code-pool-epp"} 4
# TYPE llm_d_epp_ready_endpoints gauge
llm_d_epp_ready_endpoints{name="code-pool",namespace="llm",pod="code-pool-epp-7c6d4",job="code-pool-epp"} 2
inference_pool_ready_pods{name="code-pool",namespace="llm",pod="code-pool-epp-7c6d4",job="code-pool-epp"} 2
"#;

/// The KEDA HTTP add-on's interceptor, two replicas in `keda`: requests in
/// flight per route (`route_name`, `route_namespace`), one route of another
/// namespace.
const KEDA_HTTP: &str = r#"# HELP interceptor_request_concurrency Concurrent requests at the interceptor proxy
# TYPE interceptor_request_concurrency gauge
interceptor_request_concurrency{route_name="llama-8b",route_namespace="llm",namespace="keda",pod="keda-add-ons-http-interceptor-6b7c9-a",job="keda-add-ons-http-interceptor-metrics"} 2
interceptor_request_concurrency{route_name="llama-8b",route_namespace="llm",namespace="keda",pod="keda-add-ons-http-interceptor-6b7c9-b",job="keda-add-ons-http-interceptor-metrics"} 1
interceptor_request_concurrency{route_name="llama-8b",route_namespace="other",namespace="keda",pod="keda-add-ons-http-interceptor-6b7c9-a",job="keda-add-ons-http-interceptor-metrics"} 7
"#;

/// Knative's activator in `knative-serving`, holding requests for a
/// revision of `llm`.
const KNATIVE: &str = r#"# HELP activator_request_concurrency Concurrent requests that are routed to Activator
# TYPE activator_request_concurrency gauge
activator_request_concurrency{configuration_name="llama-8b",container_name="activator",namespace_name="llm",pod_name="activator-7f9c8-x",revision_name="llama-8b-00001",service_name="llama-8b",namespace="knative-serving",pod="activator-7f9c8-x",job="activator-service"} 4
"#;

/// Knative's activator since its OpenTelemetry metrics: the instrument
/// `kn.revision.request.concurrency` with `k8s.namespace.name` and
/// `kn.{service,configuration,revision}.name`, as the Prometheus exporter
/// writes them.
const KNATIVE_OTEL: &str = r#"# HELP kn_revision_request_concurrency Concurrent requests that are routed to Activator
# TYPE kn_revision_request_concurrency gauge
kn_revision_request_concurrency{k8s_namespace_name="llm",kn_configuration_name="llama-8b",kn_revision_name="llama-8b-00001",kn_service_name="llama-8b",namespace="knative-serving",pod="activator-7f9c8-x",job="activator-service"} 6
"#;

/// The gpuscale activator, two replicas; its ServiceMonitor keeps the
/// model's `namespace` (`honorLabels: true`).
const GPUSCALE: &str = r#"# HELP gpuscale_activator_pending_requests Requests held now, waiting for a Ready endpoint.
# TYPE gpuscale_activator_pending_requests gauge
gpuscale_activator_pending_requests{namespace="llm",route="llama-8b",pod="gpuscale-activator-5f6d7-a",job="gpuscale-activator"} 1
gpuscale_activator_pending_requests{namespace="llm",route="llama-8b",pod="gpuscale-activator-5f6d7-b",job="gpuscale-activator"} 2
gpuscale_activator_pending_requests{namespace="llm",route="qwen-coder",pod="gpuscale-activator-5f6d7-a",job="gpuscale-activator"} 0
"#;

/// Every holder's exposition, one scrape target.
pub fn exposition() -> String {
    [GATEWAY, LLM_D, KEDA_HTTP, KNATIVE, KNATIVE_OTEL, GPUSCALE].concat()
}
