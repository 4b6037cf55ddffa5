//! The local walkthroughs of docs/scale-to-zero.md and docs/activator.md,
//! run as written: each doc's ```` ```sh walkthrough ```` blocks in one
//! bash, with the real `gpuscale-sim`, exporter, adapter, activator,
//! Prometheus and kubectl. The blocks assert for themselves (`kubectl
//! wait`, `grep` on `/metrics`). Scale to zero: the policy parks the
//! Deployment and its GPU goes unallocated, the
//! `sim.gpuscale.dev/pending-requests` annotation wakes it and a Ready pod
//! holds a GPU again, and the metrics APIs answer through `kubectl get
//! --raw`. The activator: a held request wakes the parked Deployment and is
//! answered by the pod's fake vLLM once the simulated cluster's own
//! EndpointSlice lists the pod Ready, at the pod's loopback address.

use std::process::Command;

use gpuscale_e2e::bins::repo_root;

/// The walkthrough's commands, in order.
fn walkthrough_blocks(doc: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh walkthrough") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), l) => {
                block.push_str(l);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unclosed ```sh walkthrough block");
    blocks
}

/// Runs the ```` ```sh walkthrough ```` blocks of `doc` (under docs/) in
/// one bash from the repository's root; their output, or a panic with it.
fn run_walkthrough(doc: &str, min_blocks: usize) -> String {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("docs").join(doc)).expect("read the doc");
    let blocks = walkthrough_blocks(&text);
    assert!(
        blocks.len() >= min_blocks,
        "{doc}: walkthrough blocks missing: {blocks:?}"
    );
    // Background servers end with the script, pass or fail.
    let script = format!(
        "set -euxo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n{}",
        blocks.concat()
    );
    // Its `cargo build` runs as from a shell (see `bins::without_test_env`).
    let mut cmd = Command::new("timeout");
    let out = gpuscale_e2e::bins::without_test_env(&mut cmd)
        .args(["600", "bash", "-c", &script])
        .current_dir(&root)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run bash");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the {doc} walkthrough failed:\n{text}"
    );
    text
}

#[test]
fn local_scale_to_zero_walkthrough_runs_as_written() {
    let text = run_walkthrough("scale-to-zero.md", 4);
    for want in [
        "Parked",
        "\"kind\":\"ExternalMetricValueList\"",
        "\"kind\":\"MetricValueList\"",
    ] {
        assert!(
            text.contains(want),
            "no {want} in the walkthrough's output:\n{text}"
        );
    }
}

/// docs/activator.md's: the Service's EndpointSlice lists its pod at a
/// loopback address of its own and the targetPort; a request held for the
/// parked Deployment wakes it and is answered once the new pod is Ready,
/// counted as one wake, one forward and one observed cold start.
#[test]
fn local_activator_walkthrough_runs_as_written() {
    let text = run_walkthrough("activator.md", 4);
    let endpoint = text.lines().find(|l| {
        l.strip_suffix(":8000")
            .and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok())
            .is_some_and(|ip| ip.is_loopback() && ip.octets()[1] > 1)
    });
    assert!(
        endpoint.is_some(),
        "no pod address of the slice (127.x.y.z:8000) in the walkthrough's output:\n{text}"
    );
    assert!(
        !text.contains("EndpointSlice created")
            && !text.contains("endpointslice.discovery.k8s.io/"),
        "the walkthrough wrote a slice by hand:\n{text}"
    );
    for want in [
        "gpuscale_activator_pending_requests{namespace=\"default\",route=\"vllm\"} 1",
        "\"Qwen/Qwen2.5-0.5B-Instruct\"",
        " HTTP 200 after ",
        "gpuscale_activator_wakes_total{namespace=\"default\",result=\"patched\",route=\"vllm\"} 1",
        "gpuscale_activator_forwarded_total{namespace=\"default\",route=\"vllm\"} 1",
        "gpuscale_activator_cold_start_seconds_count{namespace=\"default\",route=\"vllm\"} 1",
    ] {
        assert!(
            text.contains(want),
            "no {want} in the walkthrough's output:\n{text}"
        );
    }
}
