use super::*;

fn running(reason: &str, at: i64) -> ScaleToZeroPolicyStatus {
    ScaleToZeroPolicyStatus {
        phase: Some(Phase::Active),
        reason: Some(reason.into()),
        last_transition_time: Some(rfc3339::format(at)),
        idle: Some(RuleStatus {
            state: ReadState::Inactive,
            summary: "q ≤ 0: idle".into(),
        }),
        conditions: vec![condition(
            "Ready",
            true,
            "TargetScalable",
            "ok",
            at,
            Some(1),
        )],
        observed_generation: Some(1),
        ..ScaleToZeroPolicyStatus::default()
    }
}

#[test]
fn a_round_that_changes_only_times_writes_nothing() {
    let old = running("IdleWindowOpen", 100);
    assert_eq!(settled(&old, running("IdleWindowOpen", 200)), None);
}

#[test]
fn a_change_keeps_the_transition_times_of_what_held() {
    let old = running("IdleWindowOpen", 100);
    let new = settled(&old, running("Busy", 200)).expect("a new reason is written");
    assert_eq!(new.last_transition_time, Some(rfc3339::format(200)));
    assert_eq!(new.conditions[0].last_transition_time, time(100));
}

#[test]
fn a_live_value_is_not_in_the_status() {
    let a = rule_status(Rule::Idle, &Read::Value(3.0), ReadState::Active, "q", 0.0);
    let b = rule_status(Rule::Idle, &Read::Value(7.0), ReadState::Active, "q", 0.0);
    assert_eq!(a, b);
    assert_eq!(a.summary, "q > 0: busy");
}

#[test]
fn an_error_keeps_the_conditions_and_moves_the_generation() {
    let mut policy = crate::crd::example("chat");
    let mut old = running("Parked", 100);
    old.conditions
        .push(condition("Parked", true, "Parked", "parked", 100, Some(1)));
    policy.status = Some(old);
    policy.meta_mut().generation = Some(2);
    let e = ReconcileError::InvalidSpec("idle.for: bad".into());
    let s = error_status(&policy, &e, 300);
    assert_eq!(s.observed_generation, Some(2));
    let types: Vec<_> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Ready", "Parked"]);
    assert_eq!(s.conditions[0].status, "False");
    assert_eq!(s.conditions[0].reason, "InvalidSpec");
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(2))
    );
    assert_eq!(s.phase, Some(Phase::Active), "the last good round's phase");
}
