//! The local scale-to-zero walkthrough of docs/scale-to-zero.md, run as
//! written: its ```` ```sh walkthrough ```` blocks in one bash, with the
//! real `gpuscale-sim`, exporter, adapter, Prometheus and kubectl. The
//! blocks assert for themselves (`kubectl wait`, `grep` on `/metrics`): the
//! policy parks the Deployment and its GPU goes unallocated, the
//! `sim.gpuscale.dev/pending-requests` annotation wakes it and a Ready pod
//! holds a GPU again, and the metrics APIs answer through `kubectl get --raw`.

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

#[test]
fn local_scale_to_zero_walkthrough_runs_as_written() {
    let root = repo_root();
    let doc = std::fs::read_to_string(root.join("docs/scale-to-zero.md")).expect("read the doc");
    let blocks = walkthrough_blocks(&doc);
    assert!(blocks.len() >= 4, "walkthrough blocks missing: {blocks:?}");
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
    assert!(out.status.success(), "the walkthrough failed:\n{text}");
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
