use super::*;
use crate::crd::ReadState;
use crate::crd::{ActivationRule, IdleRule, MetricSource, Phase, ScaleToZeroPolicySpec, WakeSpec};
use crate::decide::Memory;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn target(name: &str) -> TargetRef {
    TargetRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: name.into(),
    }
}

fn policy(name: &str, on: &str, created: i64) -> ScaleToZeroPolicy {
    let source = MetricSource {
        metric: Some("m".into()),
        query: None,
        label_selector: None,
    };
    let mut p = ScaleToZeroPolicy::new(
        name,
        ScaleToZeroPolicySpec {
            target: target(on),
            idle: IdleRule {
                source: source.clone(),
                threshold: 0.0,
                duration: "1m".into(),
            },
            activation: ActivationRule {
                source,
                threshold: 0.0,
                unknown_after: None,
                when_unknown: Default::default(),
            },
            wake: WakeSpec::default(),
            wake_replicas: None,
            min_up_duration: None,
            paused: false,
            sleep: None,
        },
    );
    p.metadata.namespace = Some("ns".into());
    p.metadata.creation_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(created).expect("time"),
    ));
    p
}

#[test]
fn the_oldest_policy_on_a_target_owns_it_then_the_first_name() {
    let a = policy("a", "chat", 100);
    let b = policy("b", "chat", 50);
    let c = policy("c", "chat", 50);
    let other = policy("z", "other", 1);
    let all = [a.clone(), b.clone(), c.clone(), other.clone()];
    assert_eq!(other_owner(&a, &all), Some("b".into()));
    assert_eq!(other_owner(&c, &all), Some("b".into()));
    assert_eq!(other_owner(&b, &all), None);
    assert_eq!(other_owner(&other, &all), None);
    // Not yet in the store: still judged against those that are.
    assert_eq!(other_owner(&a, std::slice::from_ref(&b)), Some("b".into()));
}

#[test]
fn a_policy_being_deleted_owns_nothing() {
    let a = policy("a", "chat", 100);
    let mut b = policy("b", "chat", 50);
    b.metadata.deletion_timestamp = b.metadata.creation_timestamp.clone();
    assert_eq!(other_owner(&a, &[a.clone(), b]), None);
}

fn decision(action: Action, memory: Memory) -> Decision {
    Decision {
        action,
        phase: Phase::Waking,
        reason: Reason::Woken,
        message: "woken".into(),
        memory,
        idle_state: ReadState::Unknown,
        activation_state: ReadState::Active,
    }
}

#[test]
fn park_records_follow_the_target() {
    let t = target("chat");
    let parked = Memory {
        parked: true,
        ..Memory::default()
    };
    let park = decision(Action::Park { from: 3 }, parked);
    let rec = next_record(None, &t, &park, 1_790_000_000).expect("recorded");
    assert_eq!((rec.replicas, rec.target.name.as_str()), (3, "chat"));
    let stay = decision(Action::Nothing, parked);
    assert_eq!(next_record(Some(&rec), &t, &stay, 0), Some(rec.clone()));
    let woken = decision(Action::Wake { to: 1 }, Memory::default());
    assert_eq!(next_record(Some(&rec), &t, &woken, 0), None);
    let manual = decision(Action::Nothing, Memory::default());
    assert_eq!(next_record(Some(&rec), &t, &manual, 0), None);
}

#[test]
fn parked_by_us_is_the_record_or_the_old_annotation_while_parked() {
    let mut status = ScaleToZeroPolicyStatus::default();
    assert!(!parked_by_us(Some(&status), None), "manual zero");
    let stale = legacy_parked(None, Some(2));
    assert_eq!(stale, None, "annotation, no status: a stale one, not ours");
    assert_eq!(
        legacy_parked(Some(&status), Some(2)),
        None,
        "annotation, status not Parked (woken since)"
    );
    status.phase = Some(Phase::Parked);
    let legacy = legacy_parked(Some(&status), Some(2));
    assert_eq!(legacy, Some(2), "parked by an earlier version");
    assert!(parked_by_us(Some(&status), legacy));
    assert!(
        !parked_by_us(Some(&status), None),
        "Parked, nothing recorded"
    );
    status.parked = Some(ParkRecord {
        target: target("chat"),
        replicas: 2,
        at: "2026-12-01T00:00:00Z".into(),
    });
    assert!(parked_by_us(Some(&status), None));
    assert_eq!(
        legacy_parked(Some(&status), Some(5)),
        None,
        "the record wins over an annotation"
    );
}

#[test]
fn a_manual_zero_is_not_woken_unless_asked() {
    let mut p = policy("a", "chat", 1);
    let wake = decision(Action::Wake { to: 1 }, Memory::default());
    let d = refuse_manual_zero(&p, &Memory::default(), wake.clone());
    assert_eq!((d.action, d.reason), (Action::Nothing, Reason::ManualZero));
    let ours = Memory {
        parked: true,
        ..Memory::default()
    };
    assert_eq!(refuse_manual_zero(&p, &ours, wake.clone()), wake);
    p.spec.wake.from_manual_zero = true;
    assert_eq!(
        refuse_manual_zero(&p, &Memory::default(), wake.clone()),
        wake
    );
}

#[test]
fn the_recorded_count_is_the_status_record_else_the_annotation() {
    let mut p = policy("a", "chat", 1);
    assert_eq!(recorded_replicas(&p, Some(4)), Some(4));
    p.status = Some(ScaleToZeroPolicyStatus {
        parked: Some(ParkRecord {
            target: target("chat"),
            replicas: 2,
            at: "2026-12-01T00:00:00Z".into(),
        }),
        ..ScaleToZeroPolicyStatus::default()
    });
    assert_eq!(recorded_replicas(&p, Some(4)), Some(2));
    p.spec.target = target("other");
    assert_eq!(
        recorded_replicas(&p, None),
        None,
        "a record of another target"
    );
}
