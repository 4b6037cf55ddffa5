use super::*;
use serde_json::json;

fn target() -> TargetRef {
    TargetRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "chat".into(),
    }
}

#[test]
fn references_compare_by_group_not_version() {
    let t = target();
    assert!(same_target(Some("apps/v1"), "Deployment", "chat", &t));
    assert!(same_target(Some("apps/v1beta2"), "Deployment", "chat", &t));
    assert!(same_target(None, "Deployment", "chat", &t));
    assert!(!same_target(
        Some("argoproj.io/v1alpha1"),
        "Deployment",
        "chat",
        &t
    ));
    assert!(!same_target(Some("apps/v1"), "StatefulSet", "chat", &t));
    assert!(!same_target(Some("apps/v1"), "Deployment", "other", &t));
}

#[test]
fn a_scaled_object_reference_defaults_to_an_apps_deployment() {
    let t = target();
    assert!(names_target(&json!({"name": "chat"}), &t));
    assert!(names_target(
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}),
        &t
    ));
    assert!(!names_target(
        &json!({"kind": "StatefulSet", "name": "chat"}),
        &t
    ));
    assert!(!names_target(&json!({}), &t));
}

#[test]
fn an_hpa_is_kedas_by_its_label_or_owner() {
    let mut h = HorizontalPodAutoscaler::default();
    h.metadata.name = Some("keda-hpa-chat".into());
    assert_eq!(keda_managed(&h), None, "a plain HPA does not fight");
    h.metadata.labels = Some([(KEDA_HPA_LABEL.to_string(), "chat".to_string())].into());
    assert_eq!(
        keda_managed(&h).map(|o| o.kind),
        Some("HorizontalPodAutoscaler")
    );
    h.metadata.labels = None;
    h.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "keda.sh/v1alpha1".into(),
            kind: "ScaledObject".into(),
            name: "chat".into(),
            ..Default::default()
        },
    ]);
    assert!(keda_managed(&h).is_some());
}

#[test]
fn a_fight_acts_on_nothing_and_an_unknown_one_refuses_only_a_park() {
    let t = target();
    let owner = Owner {
        kind: "ScaledObject",
        name: "chat".into(),
    };
    let fight = Owners {
        hpas: Vec::new(),
        fight: Ok(Some(owner)),
    };
    for replicas in [0, 2] {
        let e = fight.check(&t, replicas).unwrap_err();
        assert_eq!(e.reason(), "OwnerConflict");
        assert!(e.to_string().contains("KEDA ScaledObject chat"), "{e}");
    }
    let unknown = Owners {
        hpas: Vec::new(),
        fight: Err("503".into()),
    };
    assert_eq!(unknown.check(&t, 2).unwrap_err().reason(), "OwnersUnknown");
    assert!(unknown.check(&t, 0).is_ok(), "a wake is not refused");
    let none = Owners {
        hpas: Vec::new(),
        fight: Ok(None),
    };
    assert!(none.check(&t, 2).is_ok());
}
