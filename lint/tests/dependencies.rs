//! The crates of the adapter keep their roles apart in their dependency
//! trees, not only in their imports: the what-if replay runs the
//! controller's own decisions (`gpuscale-decide`) without linking the
//! Kubernetes client, gRPC or TLS. Read with `cargo tree`, which resolves
//! each package's features (its tests' dependencies included).

use std::process::Command;

use gpuscale_lint::repo_root;

/// The packages `root` reaches, one `name vX.Y.Z` a line, each once.
fn tree(root: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(repo_root())
        .args(["tree", "--offline", "-p", root, "-e", "normal,build,dev"])
        .args(["--prefix", "none", "--no-dedupe", "--format", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {root}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split(' ').next().unwrap_or("").to_string())
        .filter(|n| !n.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn assert_reaches_none(root: &str, forbidden: &[&str]) {
    let reached = tree(root);
    assert!(reached.iter().any(|n| n == root), "{root}: no tree");
    let found: Vec<&String> = reached
        .iter()
        .filter(|n| forbidden.contains(&n.as_str()))
        .collect();
    assert!(
        found.is_empty(),
        "{root} reaches {found:?}: `cargo tree -p {root} -i <name>` shows through what"
    );
}

/// The Kubernetes client, gRPC and TLS.
const HEAVY: [&str; 5] = ["kube", "k8s-openapi", "tonic", "rustls", "hyper-rustls"];

#[test]
fn replay_links_no_kubernetes_client_grpc_or_tls() {
    assert_reaches_none("gpuscale-replay", &HEAVY);
}

#[test]
fn the_decisions_and_the_signal_seam_link_no_kubernetes_client_grpc_or_tls() {
    assert_reaches_none("gpuscale-decide", &HEAVY);
    assert_reaches_none("gpuscale-signals", &HEAVY);
}

#[test]
fn the_scale_to_zero_controller_links_no_grpc_and_not_the_adapter() {
    assert_reaches_none("gpuscale-scale-to-zero", &["tonic", "gpuscale-adapter"]);
}

#[test]
fn the_keda_scaler_links_no_kubernetes_client_and_not_the_poll_cache() {
    assert_reaches_none(
        "gpuscale-keda",
        &[
            "kube",
            "k8s-openapi",
            "gpuscale-adapter",
            "gpuscale-scale-to-zero",
        ],
    );
}

/// The DCGM ABI is linked by both sides of the library boundary (the
/// reader, the image's exporter included, and the simulator): it brings
/// nothing else along.
#[test]
fn the_dcgm_abi_depends_on_nothing() {
    assert_eq!(tree("gpuscale-dcgm-abi"), ["gpuscale-dcgm-abi"]);
}
