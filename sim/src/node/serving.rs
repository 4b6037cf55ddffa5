//! What the simulated node runs inside a workload's pod. A container of
//! vLLM's image (`vllm/vllm-openai`, any registry or tag) runs the fake vLLM
//! ([`super::vllm`]) on the pod's address and the port vLLM listens on
//! (`--port`, default 8000), serving the model of its command line
//! (`vllm serve MODEL`, `--model`, `--served-model-name`), with sleep mode
//! when started as vLLM needs it (`--enable-sleep-mode` and
//! `VLLM_SERVER_DEV_MODE=1`). It starts when the pod turns Ready (vLLM
//! listens once its model is loaded) and stops with the pod. Other images
//! run nothing: a server the user starts on the pod's address stands in for
//! them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::Value;

use super::vllm::{Config, FakeVllm};

/// vLLM's default `--port`.
const VLLM_PORT: u16 = 8000;
/// vLLM's default `--model`.
const VLLM_MODEL: &str = "facebook/opt-125m";
/// How long the fake engine takes to wake from a level-1 sleep.
const WAKE: Duration = Duration::from_secs(1);

/// Whether `image` is vLLM's OpenAI-compatible server image.
fn is_vllm(image: &str) -> bool {
    let no_digest = image.split('@').next().unwrap_or(image);
    let repo = match no_digest.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => no_digest,
    };
    repo == "vllm/vllm-openai" || repo.ends_with("/vllm/vllm-openai")
}

/// The container's command line, command then args.
fn words(container: &Value) -> Vec<&str> {
    ["command", "args"]
        .iter()
        .flat_map(|k| container[*k].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect()
}

/// The value of `--flag V` or `--flag=V`.
fn flag<'a>(words: &[&'a str], name: &str) -> Option<&'a str> {
    words.iter().enumerate().find_map(|(i, w)| {
        if *w == name {
            words.get(i + 1).copied()
        } else {
            w.strip_prefix(name).and_then(|r| r.strip_prefix('='))
        }
    })
}

/// The model given as `vllm serve MODEL`, or as the first argument (the
/// image's entrypoint is `vllm serve`).
fn positional<'a>(words: &[&'a str]) -> Option<&'a str> {
    let after_serve = words.iter().position(|w| *w == "serve").map(|i| i + 1);
    let first = words.get(after_serve.unwrap_or(0)).copied()?;
    (!first.starts_with('-') && first != "vllm" && !first.starts_with("python")).then_some(first)
}

fn env_is(container: &Value, name: &str, value: &str) -> bool {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["name"] == name && e["value"] == value)
}

/// The fake vLLM a container runs, and where: none for another image; an
/// error names a port that is not one.
pub fn vllm_of(container: &Value, ip: IpAddr) -> Result<Option<(Config, SocketAddr)>, String> {
    if !container["image"].as_str().is_some_and(is_vllm) {
        return Ok(None);
    }
    let words = words(container);
    let port = match flag(&words, "--port") {
        None => VLLM_PORT,
        Some(p) => p
            .parse()
            .map_err(|_| format!("--port {p}: not a port number"))?,
    };
    let model = flag(&words, "--model")
        .or_else(|| positional(&words))
        .unwrap_or(VLLM_MODEL);
    let served = flag(&words, "--served-model-name").unwrap_or(model);
    let cfg = Config {
        sleep_mode: words.contains(&"--enable-sleep-mode")
            && env_is(container, "VLLM_SERVER_DEV_MODE", "1"),
        ..Config::new(served, WAKE)
    };
    Ok(Some((cfg, SocketAddr::new(ip, port))))
}

/// Starts what the pod's containers run on its address `ip`; an error
/// says what could not start (the pod is not Ready until it does).
pub fn start(
    containers: &[Value],
    ip: Option<&str>,
    rt: &tokio::runtime::Handle,
) -> Result<Vec<FakeVllm>, String> {
    let Some(ip) = ip.and_then(|ip| ip.parse::<IpAddr>().ok()) else {
        return Ok(Vec::new());
    };
    let mut servers = Vec::new();
    for c in containers {
        let name = c["name"].as_str().unwrap_or("");
        let Some((cfg, addr)) = vllm_of(c, ip).map_err(|e| format!("container {name}: {e}"))?
        else {
            continue;
        };
        let model = cfg.model.clone();
        let server = FakeVllm::start_at(cfg, addr, rt)
            .map_err(|e| format!("container {name}: fake vLLM not listening on {addr}: {e}"))?;
        tracing::info!(container = name, %addr, model, "fake vLLM serving");
        servers.push(server);
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ip() -> IpAddr {
        IpAddr::from([127, 9, 0, 2])
    }

    #[test]
    fn a_vllm_container_serves_its_model_on_vllms_port() {
        let c = json!({"name": "vllm", "image": "vllm/vllm-openai:latest",
            "args": ["--model", "Qwen/Qwen2.5-0.5B-Instruct"]});
        let (cfg, addr) = vllm_of(&c, ip()).ok().flatten().expect("a vLLM");
        assert_eq!(
            (
                cfg.model.as_str(),
                addr.to_string().as_str(),
                cfg.sleep_mode
            ),
            ("Qwen/Qwen2.5-0.5B-Instruct", "127.9.0.2:8000", false)
        );
        let c = json!({"name": "v", "image": "docker.io/vllm/vllm-openai@sha256:ab",
            "command": ["vllm", "serve", "m"], "args": ["--port=8001",
            "--served-model-name", "chat", "--enable-sleep-mode"],
            "env": [{"name": "VLLM_SERVER_DEV_MODE", "value": "1"}]});
        let (cfg, addr) = vllm_of(&c, ip()).ok().flatten().expect("a vLLM");
        assert_eq!(
            (cfg.model.as_str(), addr.port(), cfg.sleep_mode),
            ("chat", 8001, true)
        );
        let c = json!({"name": "x", "image": "nginx:1.27", "args": ["--port", "80"]});
        assert_eq!(vllm_of(&c, ip()).map(|v| v.is_none()), Ok(true));
        let c = json!({"name": "v", "image": "vllm/vllm-openai", "args": ["--port", "http"]});
        assert_eq!(
            vllm_of(&c, ip()).err().as_deref(),
            Some("--port http: not a port number")
        );
        assert!(is_vllm("registry.local:5000/vllm/vllm-openai:v0.11.0"));
        assert!(!is_vllm("vllm/vllm-openai-rocm:latest"));
    }
}
