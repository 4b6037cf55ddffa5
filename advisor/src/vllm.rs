//! vLLM's memory preallocation seen through: vLLM reserves
//! `--gpu-memory-utilization` (0.9 by default) of the GPU at start, fills
//! it with the weights and a KV-cache pool, and so reads ~90 % VRAM
//! whatever it serves. What it needs is its weights plus the KV cache it
//! actually uses (docs/right-sizing.md, "vLLM").

use serde::Serialize;

use crate::history::Kv;

/// vLLM's default `--gpu-memory-utilization`.
pub const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;

/// What a vLLM workload reserves and what it needs, per GPU (GiB).
#[derive(Debug, Clone, Serialize)]
pub struct Vllm {
    /// `vLLM` or `SGLang`: whose flags the advice names.
    pub engine: &'static str,
    pub served_model: String,
    /// Parameters (billions) and bytes per parameter, from the model name.
    pub parameters_billion: f64,
    pub bytes_per_parameter: f64,
    /// Weights on one GPU (tensor-parallel GPUs split them).
    pub weights_gib: f64,
    pub gpu_memory_utilization: f64,
    /// `--gpu-memory-utilization` × the device: what vLLM took.
    pub reserved_gib: f64,
    /// The reservation less the weights: the KV pool (and activations).
    pub kv_pool_gib: f64,
    pub kv_usage_p99: f64,
    /// Weights + the KV pool's p99 use + what the process holds beyond
    /// its reservation (CUDA context).
    pub need_gib: f64,
    /// Tokens the KV pool holds (`num_gpu_blocks` × `block_size`).
    pub kv_tokens: Option<f64>,
}

/// Parameters (billions) and bytes per parameter from a model name:
/// the last `<number>B` (`Llama-3.1-8B-Instruct`: 8; `Mixtral-8x7B`: 56),
/// 1 byte for FP8/INT8 names, 0.5 for AWQ/GPTQ/INT4, else 2 (FP16/BF16).
pub fn parameters(name: &str) -> Option<(f64, f64)> {
    let lower = name.to_ascii_lowercase();
    let bytes = if ["fp8", "int8", "w8a8"].iter().any(|q| lower.contains(q)) {
        1.0
    } else if ["awq", "gptq", "int4", "4bit", "w4a16"]
        .iter()
        .any(|q| lower.contains(q))
    {
        0.5
    } else {
        2.0
    };
    let parts: Vec<&str> = lower.split(['-', '_', '/', ' ', ':']).collect();
    let count = parts.iter().rev().find_map(|p| {
        let n = p.strip_suffix('b')?;
        match n.split_once('x') {
            Some((e, each)) => Some(e.parse::<f64>().ok()? * each.parse::<f64>().ok()?),
            None => n.parse::<f64>().ok(),
        }
    })?;
    (count.is_finite() && count > 0.0).then_some((count, bytes))
}

/// What it needs, or why that cannot be said.
pub fn see_through(kv: &Kv, device_gib: f64, peak_gib: f64, gpus: u32) -> Result<Vllm, String> {
    let usage = kv
        .usage_p99
        .ok_or("no vllm:gpu_cache_usage_perc or vllm:kv_cache_usage_perc series")?;
    let model = kv
        .served_model
        .clone()
        .ok_or("no model_name on its vLLM series: weights unknown")?;
    let (params, bytes) = parameters(&model)
        .ok_or_else(|| format!("model_name {model:?} names no parameter count: weights unknown"))?;
    // SGLang publishes no --mem-fraction-static: what it holds is taken
    // for its reservation (an upper bound: it counts activations too).
    let f = match (kv.gpu_memory_utilization, kv.sglang) {
        (Some(f), _) => f,
        (None, true) => (peak_gib / device_gib).min(1.0),
        (None, false) => DEFAULT_GPU_MEMORY_UTILIZATION,
    };
    let weights = params * 1e9 * bytes / f64::from(gpus.max(1)) / (1u64 << 30) as f64;
    let reserved = f * device_gib;
    let pool = reserved - weights;
    if pool <= 0.0 {
        return Err(format!(
            "weights {weights:.1} GiB ({params} B parameters x {bytes} bytes) exceed the {reserved:.1} GiB reservation: the name's count does not fit"
        ));
    }
    let beyond = (peak_gib - reserved).max(0.0);
    Ok(Vllm {
        engine: if kv.sglang { "SGLang" } else { "vLLM" },
        served_model: model,
        parameters_billion: params,
        bytes_per_parameter: bytes,
        weights_gib: weights,
        gpu_memory_utilization: f,
        reserved_gib: reserved,
        kv_pool_gib: pool,
        kv_usage_p99: usage,
        need_gib: weights + usage * pool + beyond,
        kv_tokens: kv
            .num_gpu_blocks
            .zip(kv.block_size)
            .map(|(n, b)| n * b)
            .or(kv.pool_tokens),
    })
}

/// The flags to run it with on a device of `device_gib` (a GPU or a MIG
/// slice), reserving `share` of it (1: alone on it; less when
/// time-sliced with others).
pub fn flags(v: &Vllm, device_gib: f64, share: f64) -> String {
    let f = (v.gpu_memory_utilization * share * 100.0).floor() / 100.0;
    let pool = f * device_gib - v.weights_gib;
    let tokens = v.kv_tokens.map(|t| (t * pool / v.kv_pool_gib).floor());
    let (flag, max_len) = match v.engine {
        "SGLang" => ("--mem-fraction-static", "--context-length"),
        _ => ("--gpu-memory-utilization", "--max-model-len"),
    };
    let len = tokens.map_or(String::new(), |t| {
        format!(
            " holding {t:.0} tokens (today {:.0}): {max_len} at most {t:.0}",
            v.kv_tokens.unwrap_or(0.0)
        )
    });
    format!(
        "{} {flag} {f:.2}: reserves {:.1} of {device_gib:.1} GiB, weights {:.1} GiB, KV pool {pool:.1} GiB{len}; its p99 KV use is {:.1} GiB",
        v.engine,
        f * device_gib,
        v.weights_gib,
        v.kv_usage_p99 * v.kv_pool_gib
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_from_names() {
        assert_eq!(
            parameters("meta-llama/Llama-3.1-8B-Instruct"),
            Some((8.0, 2.0))
        );
        assert_eq!(parameters("mistralai/Mixtral-8x7B-v0.1"), Some((56.0, 2.0)));
        assert_eq!(parameters("Qwen2.5-7B-Instruct-AWQ"), Some((7.0, 0.5)));
        assert_eq!(parameters("llama-3-70b-fp8"), Some((70.0, 1.0)));
        assert_eq!(parameters("my-chat-model"), None);
    }

    #[test]
    fn a_7b_model_at_0_9_with_6_percent_kv_needs_a_fifth_of_an_h100() {
        let kv = Kv {
            usage_p99: Some(0.06),
            gpu_memory_utilization: Some(0.9),
            served_model: Some("Qwen2-7B".into()),
            ..Kv::default()
        };
        let v = see_through(&kv, 79.6, 71.64, 1).unwrap();
        let w = 7e9 * 2.0 / (1u64 << 30) as f64;
        assert!((v.weights_gib - w).abs() < 1e-9);
        assert!((v.need_gib - (w + 0.06 * (0.9 * 79.6 - w))).abs() < 1e-9);
    }
}
