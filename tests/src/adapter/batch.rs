//! The batched re-read fixture: thirty vLLM server pods and three queries
//! over their queue (a vector, a scalar, and one the engine refuses for a
//! single key), shared by the Prometheus and VictoriaMetrics suites.

pub const NS: &str = "serving";
pub const SERVERS: usize = 30;
/// `queue_depth` is the vLLM queue of the selected pods; `queue_scalar` the
/// same as a scalar (read alone); `queue_paired` adds each pod's queue to
/// itself by `on (pod)`, which Prometheus refuses for a selector that
/// matches two series of one pod (a query that fails for one key only).
pub const CONFIG: &str = "metrics:
  - name: queue_depth
    query: sum(vllm:num_requests_waiting{${matchers}})
  - name: queue_scalar
    query: scalar(sum(vllm:num_requests_waiting{${matchers}}))
  - name: queue_paired
    query: sum(vllm:num_requests_waiting{${matchers}} + on (pod) vllm:num_requests_waiting{${matchers}})
";

/// One queue per server pod (`s{i}-0`, waiting `i * scale`) as vLLM
/// exposes it, with the labels a real scrape gives it; pod `twin-0` is
/// served by two model servers (two series, one pod).
pub fn exposition(scale: usize) -> String {
    let mut s = String::from("# TYPE vllm:num_requests_waiting gauge\n");
    for i in 0..SERVERS {
        s.push_str(&format!(
            "vllm:num_requests_waiting{{namespace=\"{NS}\",pod=\"s{i}-0\",model_name=\"llama\"}} {}\n",
            i * scale
        ));
    }
    for model in ["llama", "mistral"] {
        s.push_str(&format!(
            "vllm:num_requests_waiting{{namespace=\"{NS}\",pod=\"twin-0\",model_name=\"{model}\"}} 1\n"
        ));
    }
    s
}
