use super::*;

const MIN: i64 = 60;

/// The rules of these stories (the controller's `unknown` stories keep a
/// copy: test code is not shared across crates).
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

fn running(now: i64, idle: Read, activation: Read) -> Observed {
    Observed {
        now,
        idle,
        activation,
        target: Target {
            replicas: 2,
            ready: 2,
        },
        hpa_owns_zero: None,
    }
}

fn parked(now: i64, activation: Read) -> Observed {
    Observed {
        target: Target {
            replicas: 0,
            ready: 0,
        },
        ..running(now, Read::Value(0.0), activation)
    }
}

/// Feeds one read a minute from t=0 and returns the last decision.
fn replay(reads: &[(Read, Read)], mut memory: Memory) -> Decision {
    let mut last = None;
    for (i, (idle, act)) in reads.iter().enumerate() {
        let d = decide(
            &rules(),
            &running(i as i64 * MIN, idle.clone(), act.clone()),
            memory,
        );
        memory = d.memory;
        last = Some(d);
    }
    last.expect("at least one read")
}

fn idle() -> (Read, Read) {
    (Read::Value(0.0), Read::Value(0.0))
}

#[test]
fn parks_after_the_whole_window_on_good_reads() {
    let d = replay(&vec![idle(); 16], Memory::default());
    assert_eq!(d.action, Action::Park { from: 2 });
    assert_eq!(d.phase, Phase::Parked);
    assert_eq!(d.reason, Reason::Parked);
    assert_eq!(d.memory.parked_from, Some(2));
    assert!(d.message.contains("900s idle"), "{}", d.message);
}

#[test]
fn one_minute_short_of_the_window_does_not_park() {
    let d = replay(&vec![idle(); 15], Memory::default());
    assert_eq!(d.action, Action::Nothing);
    assert_eq!(d.reason, Reason::IdleWindowOpen);
    assert_eq!(d.memory.idle_since, Some(0));
}

#[test]
fn one_busy_sample_restarts_the_window() {
    let mut reads = vec![idle(); 8];
    reads.push((Read::Value(3.0), Read::Value(0.0)));
    reads.extend(vec![idle(); 8]);
    let d = replay(&reads, Memory::default());
    assert_eq!(d.action, Action::Nothing);
    assert_eq!(d.memory.idle_since, Some(9 * MIN));
}

#[test]
fn one_unknown_read_restarts_the_window_and_says_why() {
    let mut reads = vec![idle(); 8];
    reads.push((
        Read::Unknown("prometheus unavailable".into()),
        Read::Value(0.0),
    ));
    let d = replay(&reads, Memory::default());
    assert_eq!(d.reason, Reason::ReadUnknown);
    assert_eq!(d.memory.idle_since, None);
    assert!(
        d.message.contains("prometheus unavailable"),
        "{}",
        d.message
    );
    reads.extend(vec![idle(); 8]);
    assert_eq!(replay(&reads, Memory::default()).action, Action::Nothing);
}

#[test]
fn prometheus_down_for_the_whole_window_never_parks() {
    let down = (
        Read::Unknown("timeout".into()),
        Read::Unknown("timeout".into()),
    );
    let d = replay(&vec![down; 60], Memory::default());
    assert_eq!(d.action, Action::Nothing);
    assert_eq!(d.idle_state, ReadState::Unknown);
}

#[test]
fn an_active_activation_rule_keeps_the_target_up() {
    let d = replay(
        &vec![(Read::Value(0.0), Read::Value(1.0)); 30],
        Memory::default(),
    );
    assert_eq!(d.action, Action::Nothing);
    assert_eq!(d.reason, Reason::Busy);
}

#[test]
fn wakes_on_activation_to_the_larger_of_wake_replicas_and_the_recorded_count() {
    let memory = Memory {
        parked_from: Some(3),
        ..Memory::default()
    };
    let d = decide(&rules(), &parked(100, Read::Value(2.0)), memory);
    assert_eq!(d.action, Action::Wake { to: 3 });
    assert_eq!(d.phase, Phase::Waking);
    assert_eq!(d.memory.last_wake, Some(100));
    let r = Rules {
        wake_replicas: 4,
        ..rules()
    };
    assert_eq!(
        decide(&r, &parked(100, Read::Value(2.0)), memory).action,
        Action::Wake { to: 4 }
    );
}

#[test]
fn a_parked_target_stays_parked_below_the_threshold_or_on_unknown() {
    let r = Rules {
        activation_threshold: 5.0,
        ..rules()
    };
    let d = decide(&r, &parked(0, Read::Value(5.0)), Memory::default());
    assert_eq!((d.action, d.reason), (Action::Nothing, Reason::StillIdle));
    let d = decide(
        &r,
        &parked(0, Read::Unknown("NaN".into())),
        Memory::default(),
    );
    assert_eq!(
        (d.action, d.reason),
        (Action::Nothing, Reason::ActivationUnknown)
    );
    assert_eq!(d.phase, Phase::Parked);
}

#[test]
fn never_parks_inside_min_up_duration_after_a_wake() {
    let memory = Memory {
        idle_since: Some(0),
        last_wake: Some(0),
        ..Memory::default()
    };
    let d = decide(
        &rules(),
        &running(16 * MIN, Read::Value(0.0), Read::Value(0.0)),
        memory,
    );
    assert_eq!(d.action, Action::Park { from: 2 }, "16 min > 10 min up");
    let r = Rules {
        min_up: Duration::from_secs(30 * 60),
        ..rules()
    };
    let d = decide(
        &r,
        &running(16 * MIN, Read::Value(0.0), Read::Value(0.0)),
        memory,
    );
    assert_eq!(
        (d.action, d.reason),
        (Action::Nothing, Reason::MinUpDuration)
    );
}

#[test]
fn never_parks_while_pods_are_not_ready() {
    let mut seen = running(20 * MIN, Read::Value(0.0), Read::Value(0.0));
    seen.target.ready = 1;
    let memory = Memory {
        idle_since: Some(0),
        ..Memory::default()
    };
    let d = decide(&rules(), &seen, memory);
    assert_eq!(
        (d.action, d.reason),
        (Action::Nothing, Reason::PodsNotReady)
    );
    assert_eq!(d.memory.idle_since, Some(0), "the window stays open");
}

#[test]
fn paused_does_nothing_parked_or_running() {
    let r = Rules {
        paused: true,
        ..rules()
    };
    let memory = Memory {
        idle_since: Some(0),
        ..Memory::default()
    };
    let d = decide(
        &r,
        &running(60 * MIN, Read::Value(0.0), Read::Value(0.0)),
        memory,
    );
    assert_eq!((d.action, d.reason), (Action::Nothing, Reason::Paused));
    let d = decide(&r, &parked(0, Read::Value(9.0)), memory);
    assert_eq!(d.action, Action::Nothing);
}

#[test]
fn an_hpa_owning_zero_refuses_with_its_name() {
    let mut seen = running(20 * MIN, Read::Value(0.0), Read::Value(0.0));
    seen.hpa_owns_zero = Some("chat".into());
    let memory = Memory {
        idle_since: Some(0),
        ..Memory::default()
    };
    let d = decide(&rules(), &seen, memory);
    assert_eq!((d.action, d.reason), (Action::Nothing, Reason::HpaOwnsZero));
    assert!(d.message.contains("chat"));
}

#[test]
fn a_woken_target_without_ready_pods_is_waking() {
    let mut seen = running(MIN, Read::Value(0.0), Read::Value(1.0));
    seen.target.ready = 0;
    let memory = Memory {
        last_wake: Some(0),
        waking: true,
        ..Memory::default()
    };
    let d = decide(&rules(), &seen, memory);
    assert_eq!(d.phase, Phase::Waking);
    assert!(d.memory.waking, "still waking next round");
    seen.target.ready = 1;
    let d = decide(&rules(), &seen, d.memory);
    assert_eq!(d.phase, Phase::Active);
    seen.target.ready = 0;
    let d = decide(&rules(), &seen, d.memory);
    assert_eq!(
        d.phase,
        Phase::Active,
        "a target that was Ready once is not waking when it loses its pods"
    );
}

#[test]
fn the_wake_itself_starts_waking() {
    let memory = Memory {
        parked_from: Some(1),
        ..Memory::default()
    };
    let d = decide(&rules(), &parked(5 * MIN, Read::Value(1.0)), memory);
    assert_eq!((d.phase, d.memory.waking), (Phase::Waking, true));
    assert_eq!(d.memory.last_wake, Some(5 * MIN));
}

/// Parks after the whole window, then returns the memory of the park.
fn parked_memory() -> Memory {
    let d = replay(&vec![idle(); 16], Memory::default());
    assert_eq!(d.action, Action::Park { from: 2 });
    assert!(d.memory.parked);
    d.memory
}

#[test]
fn a_scale_by_someone_else_while_parked_counts_as_a_wake() {
    let memory = parked_memory();
    let woke_at = 40 * MIN;
    let d = decide(
        &rules(),
        &running(woke_at, Read::Value(0.0), Read::Value(0.0)),
        memory,
    );
    assert_eq!(d.action, Action::Nothing);
    assert_eq!(d.reason, Reason::ExternallyWoken);
    assert_eq!(d.reason.as_str(), "ExternallyWoken");
    assert_eq!(d.phase, Phase::Active);
    assert_eq!(d.memory.last_wake, Some(woke_at));
    assert_eq!(d.memory.idle_since, None);
    assert!(!d.memory.parked);
    assert!(d.message.contains("someone else"), "{}", d.message);
}

#[test]
fn min_up_duration_counts_from_an_external_wake() {
    let mut memory = parked_memory();
    let woke_at = 40 * MIN;
    // Idle from the external wake on: the window restarts after the wake
    // (its first idle read a minute later) and holds 15 minutes.
    let mut last = None;
    for m in 0..=16 {
        let d = decide(
            &rules(),
            &running(woke_at + m * MIN, Read::Value(0.0), Read::Value(0.0)),
            memory,
        );
        memory = d.memory;
        last = Some((m, d));
        if last
            .as_ref()
            .is_some_and(|(_, d)| d.action != Action::Nothing)
        {
            break;
        }
    }
    let (m, d) = last.expect("rounds ran");
    assert_eq!(d.action, Action::Park { from: 2 });
    assert_eq!(m, 16, "parks one whole window after the external wake");

    // With minUpDuration longer than the window, the park waits for it.
    let long = Rules {
        min_up: Duration::from_secs(20 * 60),
        ..rules()
    };
    let mut memory = parked_memory();
    for m in 0..20 {
        let d = decide(
            &long,
            &running(woke_at + m * MIN, Read::Value(0.0), Read::Value(0.0)),
            memory,
        );
        assert_eq!(d.action, Action::Nothing, "minute {m}: {}", d.message);
        if m > 15 {
            assert_eq!(d.reason, Reason::MinUpDuration, "minute {m}");
        }
        memory = d.memory;
    }
    let d = decide(
        &long,
        &running(woke_at + 20 * MIN, Read::Value(0.0), Read::Value(0.0)),
        memory,
    );
    assert_eq!(d.action, Action::Park { from: 2 });
}

#[test]
fn an_external_wake_without_ready_pods_is_waking_and_our_own_wake_is_not_external() {
    let d = decide(
        &rules(),
        &Observed {
            target: Target {
                replicas: 1,
                ready: 0,
            },
            ..running(40 * MIN, Read::Value(0.0), Read::Value(0.0))
        },
        parked_memory(),
    );
    assert_eq!(
        (d.reason, d.phase),
        (Reason::ExternallyWoken, Phase::Waking)
    );
    assert!(d.memory.waking);

    let woken = decide(
        &rules(),
        &parked(40 * MIN, Read::Value(3.0)),
        parked_memory(),
    );
    assert_eq!(woken.action, Action::Wake { to: 2 });
    assert!(!woken.memory.parked);
    let next = decide(
        &rules(),
        &running(41 * MIN, Read::Value(1.0), Read::Value(0.0)),
        woken.memory,
    );
    assert_eq!(next.reason, Reason::Busy);
}
