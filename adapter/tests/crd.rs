//! The shipped CRD is the one the Rust types generate.

use std::path::PathBuf;

use gpuscale_adapter::scale_to_zero::crd::crd_yaml;

fn shipped() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/adapter/scaletozeropolicy-crd.yaml")
}

#[test]
fn deploy_crd_matches_the_rust_types() {
    let generated = crd_yaml().expect("serialize the CRD");
    let file =
        std::fs::read_to_string(shipped()).expect("read deploy/adapter/scaletozeropolicy-crd.yaml");
    assert!(
        file == generated,
        "deploy/adapter/scaletozeropolicy-crd.yaml differs from the Rust types; regenerate it \
         (and every other generated file) with: cargo run -p gpuscale-lint"
    );
}

#[test]
fn crd_names_printer_columns_and_status_subresource() {
    let generated = crd_yaml().expect("serialize the CRD");
    let crd: serde_json::Value = yaml_serde::from_str(&generated).expect("parse");
    assert_eq!(crd["spec"]["group"], "gpuscale.dev");
    assert_eq!(crd["spec"]["names"]["plural"], "scaletozeropolicies");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert!(version["subresources"]["status"].is_object());
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .expect("printer columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    // Wide-only columns (priority 1) follow the default ones.
    assert_eq!(
        columns,
        [
            "Target",
            "Phase",
            "Reason",
            "Parked-From",
            "Idle",
            "Activation",
            "Age"
        ]
    );
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    for rule in ["idle", "activation"] {
        assert_eq!(
            spec["properties"][rule]["x-kubernetes-validations"][0]["rule"],
            "has(self.metric) != has(self.query)",
            "{rule}: one of metric or query"
        );
    }
    assert_eq!(
        spec["properties"]["wake"]["properties"]["replicas"]["minimum"],
        1.0
    );
    let required: Vec<&str> = spec["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    assert_eq!(required, ["activation", "idle", "target"]);
}
