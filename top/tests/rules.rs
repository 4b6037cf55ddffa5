//! The workload view from a Prometheus loaded with the rules of `alerts/`:
//! a real Prometheus scrapes the simulated node (priced with
//! `--gpu-price`), a vLLM server's token counters and the scale-to-zero
//! controller's gauges (both as exposition text on the wire, as vLLM and
//! the adapter serve them), and `gpuscale-top` shows each workload's
//! bottleneck class, cost per hour and per million tokens and its parked,
//! waking or sleeping state as the recording rules give them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gpuscale_e2e::alerts::http::{Response, Server};
use gpuscale_e2e::alerts::stack::Prometheus;
use gpuscale_e2e::exporter::Exporter;
use serde_json::Value;

/// vLLM's `/metrics`: counters growing by 800 prompt and 200 generated
/// tokens a second, with the
/// pod's namespace and name as Prometheus' Kubernetes discovery gives them.
fn vllm() -> Server {
    let start = Instant::now();
    Server::start(move |_| {
        let t = start.elapsed().as_secs_f64() + 100.0;
        let who = r#"namespace="inference",pod="chat-5d8f7b9c4-abcde",model_name="llama""#;
        Response::text(format!(
            "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{who}}} {}\n\
             # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{who}}} {}\n",
            t * 800.0,
            t * 200.0
        ))
    })
}

/// The adapter's scale-to-zero gauges: `chat` with one of its two pods
/// asleep, `rerank` asleep, `search/embeddings` awake (none of its pods
/// asleep), `whisper` woken and not Ready yet, `serve/qwen` parked (it
/// holds no GPU).
fn controller() -> Server {
    Server::start(|_| {
        Response::text(
            "# TYPE gpuscale_scale_to_zero_parked gauge\n\
             gpuscale_scale_to_zero_parked{namespace=\"inference\",target=\"Deployment/chat\"} 0\n\
             gpuscale_scale_to_zero_parked{namespace=\"inference\",target=\"Deployment/whisper\"} 0\n\
             gpuscale_scale_to_zero_parked{namespace=\"serve\",target=\"Deployment/qwen\"} 1\n\
             gpuscale_scale_to_zero_parked{namespace=\"inference\",target=\"Deployment/rerank\"} 0\n\
             gpuscale_scale_to_zero_parked{namespace=\"search\",target=\"Deployment/embeddings\"} 0\n\
             # TYPE gpuscale_scale_to_zero_sleeping_pods gauge\n\
             gpuscale_scale_to_zero_sleeping_pods{namespace=\"inference\",target=\"Deployment/chat\"} 1\n\
             gpuscale_scale_to_zero_sleeping_pods{namespace=\"inference\",target=\"Deployment/rerank\"} 1\n\
             gpuscale_scale_to_zero_sleeping_pods{namespace=\"search\",target=\"Deployment/embeddings\"} 0\n\
             # TYPE gpuscale_scale_to_zero_waking_since_seconds gauge\n\
             gpuscale_scale_to_zero_waking_since_seconds{namespace=\"inference\",target=\"Deployment/whisper\"} 1.7e9\n"
                .into(),
        )
    })
}

fn config(targets: &[(&str, String)]) -> String {
    let alerts = concat!(env!("CARGO_MANIFEST_DIR"), "/../alerts");
    let mut s = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n  - {alerts}/recording.rules.yml\n  - {alerts}/rightsizing.rules.yml\n\
         scrape_configs:\n"
    );
    for (job, addr) in targets {
        s += &format!("  - job_name: {job}\n    static_configs:\n      - targets: ['{addr}']\n");
    }
    s
}

fn top(prom: &Prometheus, extra: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args(["--once", "-o", "json", "--prometheus", &prom.url])
        .args(extra)
        .output()
        .expect("run gpuscale-top");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Prometheus' own answer for a workload family: value by (namespace/workload[, bottleneck]).
fn rule(prom: &Prometheus, family: &str) -> BTreeMap<String, f64> {
    let series = prom.query(family).unwrap_or_default();
    series
        .iter()
        .filter_map(|s| {
            let m = &s["metric"];
            let mut key = format!("{}/{}", m["namespace"].as_str()?, m["workload"].as_str()?);
            if let Some(b) = m["bottleneck"].as_str() {
                key += &format!(" {b}");
            }
            Some((key, s["value"][1].as_str()?.parse().ok()?))
        })
        .collect()
}

fn workload<'a>(snap: &'a Value, name: &str) -> &'a Value {
    let list = snap["workloads"].as_array().expect("workloads");
    list.iter()
        .find(|w| {
            format!(
                "{}/{}",
                w["namespace"].as_str().unwrap_or(""),
                w["workload"].as_str().unwrap_or("")
            ) == name
        })
        .unwrap_or_else(|| panic!("{name} not in {snap}"))
}

/// Waits until the rules have series for the chat workload's cost per
/// million tokens and every allocated workload's bottleneck.
fn wait_for_rules(prom: &Prometheus) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mtok = rule(
            prom,
            "namespace_workload:gpu_cost_usd_per_million_tokens:ratio",
        );
        let classes = rule(prom, "namespace_workload:gpu_bottleneck:sum");
        if mtok.contains_key("inference/chat")
            && classes.keys().any(|k| k.starts_with("inference/chat "))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the rules never gave chat a cost per token: {mtok:?} {classes:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The stack of the story: the priced node, vLLM, the controller's gauges
/// and Prometheus with the rules, once the rules have series.
struct Stack {
    _exporter: Exporter,
    _vllm: Server,
    _controller: Server,
    _dir: tempfile::TempDir,
    prom: Prometheus,
}

fn stack() -> Stack {
    let e = Exporter::spawn(&[
        "--simulate",
        "--collect-interval",
        "1s",
        "--gpu-price",
        "NVIDIA H100 80GB HBM3=4.00",
    ]);
    e.wait_ready();
    let (v, c) = (vllm(), controller());
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(&[
        ("gpuscale-exporter", format!("127.0.0.1:{}", e.port)),
        ("vllm", v.addr()),
        ("gpuscale-adapter", c.addr()),
    ]);
    let prom = Prometheus::start(dir.path(), &cfg, gpuscale_e2e::free_port());
    wait_for_rules(&prom);
    Stack {
        _exporter: e,
        _vllm: v,
        _controller: c,
        _dir: dir,
        prom,
    }
}

type Rule = BTreeMap<String, f64>;

/// top's snapshot and the rules' cost per hour, per million tokens and
/// classes, as Prometheus answered them around it (one evaluation may fall
/// between: read until both sides agree).
fn read_together(prom: &Prometheus) -> (Value, Rule, Rule, Rule) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mtok = "namespace_workload:gpu_cost_usd_per_million_tokens:ratio";
    loop {
        let before = rule(prom, mtok);
        let snap = top(prom, &[]);
        let cost = rule(prom, "namespace_workload:gpu_cost_usd_per_hour:sum");
        let classes = rule(prom, "namespace_workload:gpu_bottleneck:sum");
        let after = rule(prom, mtok);
        if before == after {
            return (snap, cost, after, classes);
        }
        assert!(Instant::now() < deadline, "the rules never held still");
    }
}

/// Every workload holding a GPU has the class the rules give most of its GPUs.
fn classes_agree(snap: &Value, classes: &Rule) {
    for w in snap["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["devices"].as_u64() > Some(0))
    {
        let name = format!(
            "{}/{}",
            w["namespace"].as_str().unwrap_or(""),
            w["workload"].as_str().unwrap_or("")
        );
        let top_class = classes
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{name} ")))
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, _)| k[name.len() + 1..].to_string());
        assert_eq!(
            w["bottleneck"].as_str().map(str::to_string),
            top_class,
            "{name}"
        );
        assert!(w["bottleneck"].is_string(), "{name} has no class: {w}");
    }
}

#[test]
fn workloads_show_bottleneck_cost_per_token_and_scale_to_zero_state_from_the_rules() {
    let st = stack();
    let (snap, cost, mtok, classes) = read_together(&st.prom);
    let chat = workload(&snap, "inference/chat");
    // The same figure (to the last digits: two evaluations may differ there).
    let shown = chat["cost_usd_per_million_tokens"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let want = mtok["inference/chat"];
    assert!((shown - want).abs() <= want * 1e-9, "{chat} vs {want}");
    // The shared GPU's $4.00/h is the chat Deployment's alone (both pods),
    // over the tokens its vLLM counted.
    assert_eq!(
        chat["cost_usd_per_hour"].as_f64(),
        Some(cost["inference/chat"]),
        "{chat}"
    );
    assert!((cost["inference/chat"] - 4.0).abs() < 1e-9, "{cost:?}");
    assert!(mtok["inference/chat"] > 0.0, "{mtok:?}");
    classes_agree(&snap, &classes);
    // A workload serving no tokens has no cost per token (not 0, not inf).
    assert_eq!(
        workload(&snap, "ml-train/llama-train")["cost_usd_per_million_tokens"],
        Value::Null
    );
    assert_eq!(chat["state"], "sleeping 1/2");
    assert_eq!(workload(&snap, "inference/rerank")["state"], "sleeping");
    assert_eq!(workload(&snap, "search/embeddings")["state"], "awake");
    assert_eq!(workload(&snap, "inference/whisper")["state"], "waking");
    let qwen = workload(&snap, "serve/qwen");
    assert_eq!(
        (qwen["state"].as_str(), qwen["devices"].as_u64()),
        (Some("parked"), Some(0))
    );
    assert_eq!(
        snap["missing"],
        serde_json::json!(["gpu_xid_errors_total"]),
        "{snap}"
    );
    text_has_the_columns(&st.prom, mtok["inference/chat"]);
}

fn text_has_the_columns(prom: &Prometheus, mtok: f64) {
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args([
            "--once",
            "--prometheus",
            &prom.url,
            "--namespace",
            "inference",
        ])
        .output()
        .expect("run gpuscale-top");
    let text = String::from_utf8_lossy(&text.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("inference/chat "))
        .unwrap_or_else(|| panic!("{text}"));
    for want in ["BOTTLENECK", "USD/MTOK", "STATE"] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
    // NAMESPACE/WORKLOAD KIND PODS DEVICES ACTIVITY BOTTLENECK USD/H USD/MTOK STATE
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells.len(), 10, "{line}");
    assert_eq!(cells[6], "4.00", "{line}");
    let shown: f64 = cells[7].parse().unwrap_or_else(|_| panic!("{line}"));
    // The rate under the rule grows as its window fills: the same order.
    assert!(
        shown > mtok / 10.0 && shown < mtok * 10.0,
        "{line} vs {mtok}"
    );
    assert_eq!(cells[8..], ["sleeping", "1/2"], "{line}");
    let rerank = text
        .lines()
        .find(|l| l.starts_with("inference/rerank "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(rerank.ends_with(" sleeping"), "{rerank}");
}
