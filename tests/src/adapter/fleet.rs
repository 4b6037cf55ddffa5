//! The scripted cluster the adapter tests read: inference servers exposing
//! only their own labels (Prometheus adds `namespace`, `pod`, `container`,
//! `endpoint`, `instance` and `job` from discovery, as a PodMonitor does),
//! the exporter's series including `gpu_pod_info`, kube-state-metrics' pod
//! metadata, gateway Services scraped as a ServiceMonitor gives them
//! (`namespace`, `service`, `pod`, …), and an edge gateway that labels the
//! queues it holds for scaled-to-zero services by backend. Counters grow by a fixed step per scrape, so rates, ratios
//! and quantiles are exact whatever the scrape timing.

/// One inference server pod.
pub struct Pod {
    pub namespace: &'static str,
    pub name: &'static str,
    pub container: &'static str,
    /// The scrape job, as prometheus-operator names a PodMonitor's.
    pub job: &'static str,
    pub workload: &'static str,
    pub kind: &'static str,
    /// The pod's controller as kube-state-metrics reports it.
    pub owner: (&'static str, &'static str),
    /// Holds a GPU, so the exporter knows it.
    pub on_gpu: bool,
}

const fn pod(
    namespace: &'static str,
    name: &'static str,
    container: &'static str,
    job: &'static str,
    workload: &'static str,
    owner: (&'static str, &'static str),
    on_gpu: bool,
) -> Pod {
    let kind = match owner.0.as_bytes() {
        b"ReplicaSet" => "Deployment",
        _ => owner.0,
    };
    Pod {
        namespace,
        name,
        container,
        job,
        workload,
        kind,
        owner,
        on_gpu,
    }
}

const VLLM: &str = "inference/vllm";
const CHAT_RS: (&str, &str) = ("ReplicaSet", "chat-7d9f8b6c5");

/// vLLM chat = 3 + 4 waiting, embed = 10; `other` has its own chat with 100
/// and ghost-0 with 50 (a pod name with no series in `inference`);
/// chat-cpu-0 (1000 waiting) runs on a CPU node the exporter does not see.
pub const PODS: &[Pod] = &[
    pod(
        "inference",
        "chat-7d9f8b6c5-a1b2c",
        "vllm",
        VLLM,
        "chat",
        CHAT_RS,
        true,
    ),
    pod(
        "inference",
        "chat-7d9f8b6c5-d3e4f",
        "vllm",
        VLLM,
        "chat",
        CHAT_RS,
        true,
    ),
    pod(
        "inference",
        "embed-0",
        "vllm",
        VLLM,
        "embed",
        ("StatefulSet", "embed"),
        true,
    ),
    pod(
        "inference",
        "chat-cpu-0",
        "vllm",
        VLLM,
        "chat-cpu",
        ("StatefulSet", "chat-cpu"),
        false,
    ),
    pod(
        "other",
        "chat-7d9f8b6c5-a1b2c",
        "vllm",
        "other/vllm",
        "chat",
        CHAT_RS,
        true,
    ),
    pod(
        "other",
        "ghost-0",
        "vllm",
        "other/vllm",
        "ghost",
        ("StatefulSet", "ghost"),
        true,
    ),
    pod(
        "broken",
        "x-0",
        "vllm",
        "broken/vllm",
        "nan",
        ("StatefulSet", "nan"),
        true,
    ),
    pod(
        "broken",
        "y-0",
        "vllm",
        "broken/vllm",
        "inf",
        ("StatefulSet", "inf"),
        true,
    ),
    pod(
        "inference",
        "tgi-0",
        "tgi",
        "inference/tgi",
        "tgi",
        ("StatefulSet", "tgi"),
        true,
    ),
    pod(
        "inference",
        "triton-0",
        "triton",
        "inference/triton",
        "triton",
        ("StatefulSet", "triton"),
        true,
    ),
];

pub const CHAT_0: &str = "chat-7d9f8b6c5-a1b2c";
pub const CHAT_1: &str = "chat-7d9f8b6c5-d3e4f";

/// What a pod's server exposes at scrape `n`: its own labels only.
pub fn server_exposition(namespace: &str, name: &str, n: u64) -> Option<String> {
    let mut s = String::new();
    let gauge = |s: &mut String, metric: &str, labels: &str, v: &str| {
        s.push_str(&format!(
            "# TYPE {metric} gauge\n{metric}{{{labels}}} {v}\n"
        ));
    };
    let llama = "model_name=\"llama-3-8b\",engine=\"0\"";
    match (namespace, name) {
        ("inference", CHAT_0) => {
            gauge(&mut s, "vllm:num_requests_waiting", llama, "3");
            gauge(&mut s, "vllm:num_requests_running", llama, "2");
            gauge(&mut s, "vllm:kv_cache_usage_perc", llama, "0.5");
            // No completion since the first scrape: a rate of exactly 0.
            s.push_str(&format!(
                "# TYPE vllm:request_success_total counter\nvllm:request_success_total{{{llama},finished_reason=\"stop\"}} 40\n"
            ));
            // TTFT: per scrape +5 ≤0.1 s, +8 ≤0.25, +9 ≤0.5, +10 ≤1 → p95 = 0.75 s.
            let ttft = [("0.1", 5), ("0.25", 8), ("0.5", 9), ("1", 10), ("+Inf", 10)];
            histogram(&mut s, "vllm:time_to_first_token_seconds", llama, n, &ttft);
            // E2E: per scrape +2 ≤1 s, +6 ≤2.5, +9 ≤5, +10 ≤10 → p95 = 7.5 s.
            let e2e = [("1", 2), ("2.5", 6), ("5", 9), ("10", 10), ("+Inf", 10)];
            histogram(&mut s, "vllm:e2e_request_latency_seconds", llama, n, &e2e);
        }
        ("inference", CHAT_1) => {
            gauge(&mut s, "vllm:num_requests_waiting", llama, "4");
            gauge(&mut s, "vllm:num_requests_running", llama, "0");
            gauge(&mut s, "vllm:kv_cache_usage_perc", llama, "0.7");
        }
        ("inference", "embed-0") => gauge(
            &mut s,
            "vllm:num_requests_waiting",
            "model_name=\"bge-m3\",engine=\"0\"",
            "10",
        ),
        ("inference", "chat-cpu-0") => gauge(&mut s, "vllm:num_requests_waiting", llama, "1000"),
        ("other", CHAT_0) => gauge(&mut s, "vllm:num_requests_waiting", llama, "100"),
        ("other", "ghost-0") => gauge(&mut s, "vllm:num_requests_waiting", llama, "50"),
        ("broken", "x-0") => gauge(&mut s, "vllm:num_requests_waiting", llama, "NaN"),
        ("broken", "y-0") => gauge(&mut s, "vllm:num_requests_waiting", llama, "+Inf"),
        ("inference", "tgi-0") => s.push_str("# TYPE tgi_queue_size gauge\ntgi_queue_size 5\n"),
        ("inference", "triton-0") => {
            // +50 000 µs of queue time per 10 successes → 5 ms.
            let l = "model=\"resnet\",version=\"1\"";
            s.push_str(&format!(
                "# TYPE nv_inference_queue_duration_us counter\nnv_inference_queue_duration_us{{{l}}} {}\n",
                50_000 * n
            ));
            s.push_str(&format!(
                "# TYPE nv_inference_request_success counter\nnv_inference_request_success{{{l}}} {}\n",
                10 * n
            ));
        }
        _ => return None,
    }
    Some(s)
}

/// A Service scraped through a ServiceMonitor: the server exposes the bare
/// series; Prometheus adds `namespace`, `service`, `pod`, `container`,
/// `endpoint`, `instance` and `job` (the Service's name).
pub struct Service {
    pub namespace: &'static str,
    pub name: &'static str,
    pub pod: &'static str,
    pub container: &'static str,
    /// `gateway_requests_pending`: requests the gateway holds for the
    /// Service's backends.
    pub pending: &'static str,
}

/// The per-namespace gateway: 12 pending in `inference`, 99 in `other`.
pub const SERVICES: &[Service] = &[
    Service {
        namespace: "inference",
        name: "gateway",
        pod: "gateway-6c8d7f9b4-k2l3m",
        container: "gateway",
        pending: "12",
    },
    Service {
        namespace: "other",
        name: "gateway",
        pod: "gateway-6c8d7f9b4-n4p5q",
        container: "gateway",
        pending: "99",
    },
];

/// What a Service's endpoint exposes: its own series, no labels.
pub fn service_exposition(namespace: &str, name: &str) -> Option<String> {
    let svc = SERVICES
        .iter()
        .find(|s| s.namespace == namespace && s.name == name)?;
    Some(format!(
        "# TYPE gateway_requests_pending gauge\ngateway_requests_pending {}\n",
        svc.pending
    ))
}

/// The edge gateway in front of services that may be at zero replicas: it
/// holds their requests and labels each queue with the backend's
/// `namespace` and `service` (scraped with honor_labels; it runs in its own
/// namespace, so the backend's namespace gets no pod from it). `idle` has a
/// chat service with 5 requests waiting and no pods at all.
pub fn edge_gateway_exposition() -> String {
    "# TYPE gateway_requests_waiting gauge\ngateway_requests_waiting{namespace=\"idle\",service=\"chat\"} 5\n"
        .to_string()
}

fn histogram(s: &mut String, name: &str, labels: &str, n: u64, buckets: &[(&str, u64)]) {
    s.push_str(&format!("# TYPE {name} histogram\n"));
    for (le, step) in buckets {
        s.push_str(&format!(
            "{name}_bucket{{{labels},le=\"{le}\"}} {}\n",
            step * n
        ));
    }
    let count = buckets.last().map_or(0, |b| b.1) * n;
    s.push_str(&format!("{name}_sum{{{labels}}} {count}\n"));
    s.push_str(&format!("{name}_count{{{labels}}} {count}\n"));
}

/// The exporter's pod labels, as it writes them.
fn pod_labels(namespace: &str, pod: &str, workload: &str, kind: &str) -> String {
    format!(
        "namespace=\"{namespace}\",pod=\"{pod}\",workload=\"{workload}\",workload_kind=\"{kind}\",label_app_kubernetes_io_name=\"{workload}\""
    )
}

/// The exporter (scraped with honor_labels): `gpu_pod_info` for every GPU
/// pod, and the device and per-pod series `gpu_pressure` reads.
pub fn exporter_exposition() -> String {
    let mut s = String::from("# TYPE gpu_pod_info gauge\n");
    for p in PODS.iter().filter(|p| p.on_gpu) {
        s.push_str(&format!(
            "gpu_pod_info{{node=\"sim-node\",{}}} 1\n",
            pod_labels(p.namespace, p.name, p.workload, p.kind)
        ));
    }
    // The tts pods time-slice GPU 2: metadata and per-pod usage only.
    for tts in ["tts-0", "tts-1"] {
        s.push_str(&format!(
            "gpu_pod_info{{node=\"sim-node\",{}}} 1\n",
            pod_labels("inference", tts, "tts", "StatefulSet")
        ));
    }
    // chat-0 max(0.9, 0.4, 40/80) = 0.9; chat-1 max(0.3, 0.2, 60/80) = 0.75
    // → average 0.825. `other`'s chat: max(0.6, 0.3, 20/80) = 0.6.
    for (ns, gpu, pod, util, dram, used) in [
        ("inference", "0", CHAT_0, "0.9", "0.4", "40"),
        ("inference", "1", CHAT_1, "0.3", "0.2", "60"),
        ("other", "3", CHAT_0, "0.6", "0.3", "20"),
    ] {
        let l = format!(
            "node=\"sim-node\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}\",{},container=\"vllm\"",
            pod_labels(ns, pod, "chat", "Deployment")
        );
        s.push_str(&format!("gpu_utilization_ratio{{{l}}} {util}\n"));
        s.push_str(&format!("gpu_dram_active_ratio{{{l}}} {dram}\n"));
        s.push_str(&format!("gpu_memory_used_bytes{{{l}}} {used}e9\n"));
        s.push_str(&format!("gpu_memory_total_bytes{{{l}}} 80e9\n"));
    }
    // Per-pod SM utilization: equal to the device's for a GPU held alone;
    // the tts pods share GPU 2 at 0.35 and 0.45.
    for (gpu, pod, wl, kind, util) in [
        ("0", CHAT_0, "chat", "Deployment", "0.9"),
        ("1", CHAT_1, "chat", "Deployment", "0.3"),
        ("2", "tts-0", "tts", "StatefulSet", "0.35"),
        ("2", "tts-1", "tts", "StatefulSet", "0.45"),
    ] {
        s.push_str(&format!(
            "gpu_pod_sm_utilization_ratio{{node=\"sim-node\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}\",{}}} {util}\n",
            pod_labels("inference", pod, wl, kind)
        ));
    }
    // A shared GPU carries no pod labels on device series; it must never
    // count for a namespace.
    s.push_str("gpu_utilization_ratio{node=\"sim-node\",gpu=\"2\",uuid=\"GPU-2\"} 1\n");
    s
}

/// kube-state-metrics (scraped with honor_labels, started with
/// `--metric-labels-allowlist=pods=[app.kubernetes.io/name]`): every pod,
/// the CPU-only one included.
pub fn kube_state_metrics_exposition() -> String {
    let mut labels = String::from("# TYPE kube_pod_labels gauge\n");
    let mut owners = String::from("# TYPE kube_pod_owner gauge\n");
    let mut replicasets = String::from("# TYPE kube_replicaset_owner gauge\n");
    for (i, p) in PODS.iter().enumerate() {
        let id = format!(
            "namespace=\"{}\",pod=\"{}\",uid=\"0000000{i}-aaaa-4bbb-8ccc-dddddddddddd\"",
            p.namespace, p.name
        );
        labels.push_str(&format!(
            "kube_pod_labels{{{id},label_app_kubernetes_io_name=\"{}\"}} 1\n",
            p.workload
        ));
        owners.push_str(&format!(
            "kube_pod_owner{{{id},owner_kind=\"{}\",owner_name=\"{}\",owner_is_controller=\"true\"}} 1\n",
            p.owner.0, p.owner.1
        ));
        let rs = format!(
            "kube_replicaset_owner{{namespace=\"{}\",replicaset=\"{}\",owner_kind=\"Deployment\",owner_name=\"{}\",owner_is_controller=\"true\"}} 1\n",
            p.namespace, p.owner.1, p.workload
        );
        if p.owner.0 == "ReplicaSet" && !replicasets.contains(&rs) {
            replicasets.push_str(&rs);
        }
    }
    labels + &owners + &replicasets
}

/// Scrape jobs for Prometheus: the exporter, kube-state-metrics and the
/// edge gateway with honor_labels, one target per server pod with the
/// labels a PodMonitor gives it, and one per Service with the labels a
/// ServiceMonitor gives it.
pub fn scrape_configs(port: u16) -> String {
    let mut s = String::from("scrape_configs:\n");
    for (job, path) in [
        ("gpuscale-exporter", "/exporter"),
        ("kube-state-metrics", "/kube-state-metrics"),
        ("edge-gateway", "/edge-gateway"),
    ] {
        s.push_str(&format!(
            "  - job_name: {job}\n    honor_labels: true\n    metrics_path: {path}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ));
    }
    let mut jobs: Vec<&str> = PODS.iter().map(|p| p.job).collect();
    jobs.sort_unstable();
    jobs.dedup();
    for job in jobs {
        s.push_str(&format!("  - job_name: {job}\n    static_configs:\n"));
        for (i, p) in PODS.iter().enumerate().filter(|(_, p)| p.job == job) {
            s.push_str(&format!(
                "      - targets: ['127.0.0.1:{port}']\n        labels: {{__metrics_path__: /pods/{}/{}, namespace: {}, pod: {}, container: {}, endpoint: metrics, instance: '10.0.1.{}:8000'}}\n",
                p.namespace, p.name, p.namespace, p.name, p.container, 10 + i
            ));
        }
    }
    let mut services: Vec<&str> = SERVICES.iter().map(|v| v.name).collect();
    services.sort_unstable();
    services.dedup();
    for job in services {
        s.push_str(&format!(
            "  - job_name: serviceMonitor/{job}\n    static_configs:\n"
        ));
        for (i, v) in SERVICES.iter().enumerate().filter(|(_, v)| v.name == job) {
            s.push_str(&format!(
                "      - targets: ['127.0.0.1:{port}']\n        labels: {{__metrics_path__: /services/{}/{}, job: {}, namespace: {}, service: {}, pod: {}, container: {}, endpoint: metrics, instance: '10.0.2.{}:9090'}}\n",
                v.namespace, v.name, v.name, v.namespace, v.name, v.pod, v.container, 10 + i
            ));
        }
    }
    s
}
