//! Every semantic problem is reported at once, each located.

use super::*;
use crate::scenario::limits::MAX_REPORTED;

#[test]
fn three_independent_problems_are_all_named() {
    let text = format!(
        "{GPU}    architecture: ada\n    pcie: {{ generation: 9, width: 16 }}\n    mig:\n      - {{ uuid: MIG-1, profile: 1g.10gb, gpu_instance_id: 1, memory_mib: 9856 }}\npods:\n  - namespace: a\n    name: b\n    uid: c\n    containers:\n      - {{ name: x, id: nothex }}\n"
    );
    let e = err(&text);
    let found: Vec<_> = e
        .problems()
        .iter()
        .map(|p| (p.path().unwrap_or(""), p.position().map(|(l, _)| l)))
        .collect();
    assert_eq!(
        found,
        [
            ("gpus[0].pcie.generation", Some(7)),
            ("gpus[0].mig", Some(9)),
            ("pods[0].containers[0].id", Some(15)),
        ],
        "{e}"
    );
    let shown = e.to_string();
    assert!(
        shown.starts_with("t.yaml: 3 problems:\n  t.yaml:7:"),
        "{shown}"
    );
    for msg in ["must be 1..=6", "ada GPUs have no MIG", "64 lowercase hex"] {
        assert!(shown.contains(msg), "{msg} missing from {shown}");
    }
}

#[test]
fn one_problem_reads_as_before() {
    let e = err(&format!("{GPU}    nvlinks: 19\n"));
    assert_eq!(e.problems().len(), 1);
    assert!(
        e.to_string()
            .starts_with("t.yaml:6:14: gpus[0].nvlinks: at most 18"),
        "{e}"
    );
}

#[test]
fn beyond_the_reported_problems_the_rest_are_counted() {
    let mut text = String::from("pods:\n");
    for i in 0..MAX_REPORTED + 5 {
        text.push_str(&format!("  - {{ namespace: a, name: p{i}, uid: '' }}\n"));
    }
    let e = err(&text);
    assert_eq!(e.problems().len(), MAX_REPORTED);
    let shown = e.to_string();
    assert!(shown.starts_with("t.yaml: 25 problems:"), "{shown}");
    assert!(shown.ends_with("\n  … and 5 more"), "{shown}");
}

#[test]
fn a_default_power_limit_must_be_positive() {
    let e = err(&format!("{GPU}    power_limit_default_watts: 0\n"));
    assert_eq!(e.problems().len(), 1);
    assert!(
        e.to_string()
            .contains("gpus[0].power_limit_default_watts: must be > 0"),
        "{e}"
    );
}
