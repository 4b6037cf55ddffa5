//! The simulated cluster's node economics (`gpuscale-sim --node-economics`)
//! through real `kubectl`: PodDisruptionBudgets are listed, applied and
//! deleted as on a real API server, and the node carries its instance and
//! capacity type.

use std::process::{Command, Stdio};

use gpuscale_sim::kubeapi::{Cluster, KubeFake};
use gpuscale_sim::node::economics;

fn kubectl(fake: &KubeFake, dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> String {
    let config = dir.join("kubeconfig");
    fake.write_kubeconfig(&config).expect("write kubeconfig");
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&config)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--request-timeout=10s")
        .args(args)
        .env("HOME", dir)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::io::Write::write_all(&mut pipe, text.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("kubectl output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

const PDB: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: { name: notebook, namespace: ml }
spec:
  maxUnavailable: 0
  selector: { matchLabels: { app: notebook } }
";

#[test]
fn kubectl_lists_applies_and_deletes_the_budgets_that_keep_a_node() {
    let fake = KubeFake::start_bare(Cluster::default()).expect("start");
    let dir = tempfile::tempdir().expect("tempdir");
    fake.put(
        &gpuscale_sim::kubeapi::core("nodes"),
        serde_json::json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "gpu-1" } }),
    );
    economics::apply(&fake, "gpu-1");
    let run = |args: &[&str], stdin| kubectl(&fake, dir.path(), args, stdin);

    let listed = run(&["get", "pdb", "-A"], None);
    let header = listed.lines().next().unwrap_or("");
    assert!(
        header.contains("MAX UNAVAILABLE") && header.contains("ALLOWED DISRUPTIONS"),
        "{listed}"
    );
    let frontend = listed
        .lines()
        .find(|l| l.contains("frontend"))
        .unwrap_or("");
    let cells: Vec<&str> = frontend.split_whitespace().collect();
    assert_eq!(
        cells.get(..5),
        Some(&["web", "frontend", "<none>", "0", "0"][..]),
        "{listed}"
    );

    run(&["apply", "-f", "-"], Some(PDB));
    assert!(run(&["get", "poddisruptionbudgets", "-n", "ml"], None).contains("notebook"));
    run(&["delete", "pdb", "-n", "web", "frontend"], None);
    assert!(!run(&["get", "pdb", "-A"], None).contains("frontend"));

    let labels = run(&["get", "node", "gpu-1", "--show-labels"], None);
    for (k, v) in economics::NODE_LABELS {
        assert!(labels.contains(&format!("{k}={v}")), "{labels}");
    }
    let pods = run(
        &[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "spec.nodeName=gpu-1",
        ],
        None,
    );
    assert_eq!(
        pods.lines().count() - 1,
        economics::cpu_pods().len(),
        "{pods}"
    );
}
