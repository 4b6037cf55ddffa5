//! `kubectl explain` reads a custom resource's schema from the simulated
//! cluster's OpenAPI v3, as from a real server: the shipped
//! ScaleToZeroPolicy CRD's field descriptions and types.

use std::path::Path;
use std::process::Command;

use gpuscale_sim::kubeapi::{Cluster, KubeFake};

#[test]
fn kubectl_explain_reads_the_crds_schema() {
    let fake = KubeFake::start_bare(Cluster::default()).expect("start");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("kubeconfig");
    fake.write_kubeconfig(&config).expect("kubeconfig");
    let kubectl = |args: &[&str]| {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&config)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(args)
            .env("HOME", dir.path())
            .output()
            .expect("run kubectl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let crd =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/adapter/scaletozeropolicy-crd.yaml");
    kubectl(&["apply", "-f", &crd.display().to_string()]);
    let spec = kubectl(&["explain", "scaletozeropolicy.spec"]);
    for want in [
        "KIND:       ScaleToZeroPolicy",
        "GROUP:      gpuscale.dev",
        "FIELD: spec <Object>",
        "idle",
        "activation",
        "target",
    ] {
        assert!(spec.contains(want), "{want} missing from:\n{spec}");
    }
    let idle = kubectl(&["explain", "stz.spec.idle.for"]);
    assert!(idle.contains("FIELD: for <string>"), "{idle}");
}
