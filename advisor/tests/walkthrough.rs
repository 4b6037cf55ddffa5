//! The local walkthrough of docs/right-sizing.md ("Try it locally"), run
//! as written: its ```` ```sh walkthrough ```` blocks in one bash, with
//! the real promtool, Prometheus and advisor. The advice it prints is
//! the worked examples' (the notebooks and the classifier share one A100;
//! an A10G, which the cluster has no node of, is printed apart).

use std::process::Command;

fn blocks(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh walkthrough") => current = Some(String::new()),
            (Some(b), "```") => {
                out.push(std::mem::take(b));
                current = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unclosed ```sh walkthrough block");
    out
}

#[test]
fn the_local_walkthrough_runs_as_written() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/right-sizing.md")).expect("the doc");
    let b = blocks(&doc);
    assert_eq!(b.len(), 2, "{b:?}");
    let script = format!(
        "set -euxo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n{}cat $W/advice.md\n",
        b.concat()
    );
    // Its `cargo build` runs as from a shell: without the variables cargo
    // sets for a test.
    let mut cmd = Command::new("timeout");
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_") && k != "CARGO_HOME" || k == "OUT_DIR" || k == "RUSTFLAGS" {
            cmd.env_remove(k.as_ref());
        }
    }
    let out = cmd
        .args(["600", "bash", "-c", &script])
        .current_dir(&root)
        .env("NO_COLOR", "1")
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the walkthrough failed:\n{text}");
    for want in [
        "ml-serve/embedder",
        "-> MIG 1g.10gb of the same H100-80GB",
        "one A100-80GB (time-slicing) for research/classifier",
        "needs: a node pool of A10G in the cluster",
        "| workload | tier | GPUs |",
        "saving per month: placement $6,153",
    ] {
        assert!(stdout.contains(want), "no {want:?} in:\n{stdout}");
    }
    // The table is for a terminal: under 120 columns, no colour codes.
    let table = stdout.split("# Right-sizing").next().unwrap_or_default();
    for line in table.lines() {
        assert!(
            line.chars().count() < 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(!text.contains('\u{1b}'), "colour codes:\n{text}");
}
