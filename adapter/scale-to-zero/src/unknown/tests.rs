use super::*;
use crate::crd::MetricSource;
use crate::decide::{Target, decide};

const MIN: i64 = 60;

/// The rules of the decision stories (`gpuscale-decide`'s tests).
fn rules() -> Rules {
    Rules {
        idle_threshold: 0.0,
        idle_for: Duration::from_secs(15 * 60),
        activation_threshold: 0.0,
        min_up: Duration::from_secs(10 * 60),
        wake_replicas: 1,
        paused: false,
    }
}

fn parked(now: i64, activation: Read) -> Observed {
    Observed {
        now,
        idle: Read::Unknown("not read while parked".into()),
        activation,
        target: Target {
            replicas: 0,
            ready: 0,
        },
        hpa_owns_zero: None,
    }
}

fn ours() -> Memory {
    Memory {
        parked: true,
        ..Memory::default()
    }
}

/// One round a minute from t=0, as the reconciler chains them; the last
/// decision.
fn rounds(rule: &UnknownRule, reads: &[Read], mut memory: Memory) -> Decision {
    let mut last = None;
    for (i, read) in reads.iter().enumerate() {
        let seen = parked(i as i64 * MIN, read.clone());
        let d = decide(&rules(), &seen, memory);
        let mut d = fail_open(rule, &rules(), &seen, &memory, d);
        d.memory.activation_unknown_since = since(&seen, &memory);
        memory = d.memory;
        last = Some(d);
    }
    last.expect("a round")
}

fn down() -> Read {
    Read::Unknown("Prometheus unreachable".into())
}

#[test]
fn a_long_unknown_activation_wakes_a_parked_target_by_default() {
    let rule = rule_of(&activation(None, WhenUnknown::default())).unwrap();
    assert_eq!(rule.after, DEFAULT_AFTER);
    let d = rounds(&rule, &vec![down(); 10], ours());
    assert_eq!(d.action, Action::Nothing, "9 minutes: still parked");
    assert_eq!(d.reason, Reason::ActivationUnknown);
    assert_eq!(d.memory.activation_unknown_since, Some(0));
    let d = rounds(&rule, &vec![down(); 11], ours());
    assert_eq!(
        d.action,
        Action::Wake { to: 1 },
        "10 minutes: woken to wake.replicas"
    );
    assert_eq!(d.reason, Reason::ActivationUnknownTooLong);
    assert!(d.message.contains("fail-open"), "{}", d.message);
    assert!(!d.memory.parked && d.memory.waking);
}

#[test]
fn stay_parked_keeps_it_parked_and_says_so() {
    let rule = rule_of(&activation(Some("2m"), WhenUnknown::StayParked)).unwrap();
    let d = rounds(&rule, &vec![down(); 30], ours());
    assert_eq!(d.action, Action::Nothing);
    assert!(d.message.contains("StayParked"), "{}", d.message);
}

#[test]
fn a_good_read_restarts_the_clock() {
    let rule = rule_of(&activation(Some("5m"), WhenUnknown::Wake)).unwrap();
    let mut reads = vec![down(); 4];
    reads.push(Read::Value(0.0));
    reads.extend(vec![down(); 4]);
    let d = rounds(&rule, &reads, ours());
    assert_eq!(d.action, Action::Nothing);
    assert_eq!(d.memory.activation_unknown_since, Some(5 * MIN));
    let d = rounds(&rule, &[Read::Value(0.0)], ours());
    assert_eq!(d.memory.activation_unknown_since, None);
}

#[test]
fn a_bad_duration_is_the_policys_error() {
    let e = rule_of(&activation(Some("10"), WhenUnknown::Wake)).unwrap_err();
    assert!(e.to_string().contains("activation.unknownAfter"), "{e}");
}

fn activation(after: Option<&str>, when: WhenUnknown) -> ActivationRule {
    ActivationRule {
        source: MetricSource {
            metric: Some("m".into()),
            query: None,
            label_selector: None,
        },
        threshold: 0.0,
        unknown_after: after.map(str::to_string),
        when_unknown: when,
    }
}
