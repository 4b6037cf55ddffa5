//! A round's inputs: the policy's rules, its reads from the poll cache,
//! its target as the Kubernetes API shows it (through `scale`, with the
//! HPAs on it), and what this controller remembers of it.

use std::time::{Duration, Instant};

use gpuscale_util::rfc3339;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};

use super::context::{Context, ReconcileError, Sighting};
use super::crd::{MetricSource, Phase, ReadState, ScaleToZeroPolicy, ScaleToZeroPolicyStatus};
use super::decide::{self, Memory, Observed, Read, Rules, Target};
use super::owners;
use super::ownership;
use super::target::{self, TargetError};
use super::unknown::{self, UnknownRule};
use gpuscale_signals::provider::{Provider, ProviderError};

/// The round's inputs: the rules, what was seen, what is remembered.
pub(super) struct Round {
    pub rules: Rules,
    pub seen: Observed,
    pub memory: Memory,
    /// Whether the idle rule was read (not while parked).
    pub idle_read: bool,
    /// What a parked target does when activation stays unknown.
    pub unknown: UnknownRule,
}

/// This leader's last memory of `policy`, else its status's. The count
/// recorded at parking is restored only when the policy asks
/// (`wake.restoreParked`).
fn recall<P>(ctx: &Context<P>, policy: &ScaleToZeroPolicy, annotation: Option<i32>) -> Memory {
    let legacy = ownership::legacy_parked(policy.status.as_ref(), annotation);
    let parked_from =
        ownership::recorded_replicas(policy, legacy).filter(|_| policy.spec.wake.restore_parked);
    match ctx.remembered(policy) {
        Some(m) => Memory { parked_from, ..m },
        None => {
            let status = policy.status.as_ref();
            let parked = ownership::parked_by_us(status, legacy);
            Memory {
                parked_from,
                parked,
                ..memory_of(status)
            }
        }
    }
}

fn rules_of(policy: &ScaleToZeroPolicy, wake_default: i32) -> Result<Rules, ReconcileError> {
    let spec = &policy.spec;
    let duration = |key: &str, v: &str| {
        gpuscale_util::duration::parse(v)
            .map_err(|e| ReconcileError::InvalidSpec(format!("{key}: {e}")))
    };
    let wake = spec
        .wake
        .replicas
        .or(spec.wake_replicas)
        .unwrap_or(wake_default);
    if wake < 1 {
        return Err(ReconcileError::InvalidSpec(format!(
            "wake.replicas: {wake} must be at least 1"
        )));
    }
    for (key, v) in [
        ("idle.threshold", spec.idle.threshold),
        ("activation.threshold", spec.activation.threshold),
    ] {
        if !v.is_finite() {
            return Err(ReconcileError::InvalidSpec(format!("{key} must be finite")));
        }
    }
    Ok(Rules {
        idle_threshold: spec.idle.threshold,
        idle_for: duration("idle.for", &spec.idle.duration)?,
        activation_threshold: spec.activation.threshold,
        min_up: match &spec.min_up_duration {
            Some(v) => duration("minUpDuration", v)?,
            None => Duration::ZERO,
        },
        wake_replicas: wake,
        paused: spec.paused,
    })
}

/// A rule's read: the sum of the items (as the HPA and KEDA see it), or
/// unknown. An unknown metric, a refused query or a bad selector or
/// template is the policy's error, not a read.
async fn read<P: Provider>(
    provider: &P,
    key: &'static str,
    source: &MetricSource,
    namespace: &str,
    allow_queries: bool,
) -> Result<Read, ReconcileError> {
    let selector = source.label_selector.as_deref().unwrap_or("");
    let got = match (source.metric.as_deref(), source.query.as_deref()) {
        (Some(metric), None) => provider.get(metric, namespace, selector).await,
        (None, Some(_)) if !allow_queries => return Err(ReconcileError::QueryNotAllowed(key)),
        (None, Some(query)) => provider.get_query(query, namespace, selector).await,
        _ => {
            return Err(ReconcileError::InvalidSpec(format!(
                "{key}: give exactly one of metric and query"
            )));
        }
    };
    match got {
        // One definition of unknown for every consumer: no items or a
        // non-finite sum is unknown, never idle.
        Ok(r) => Ok(match gpuscale_signals::activation::total(&r) {
            Ok(v) => Read::Value(v),
            Err(why) => Read::Unknown(why),
        }),
        Err(ProviderError::Unavailable(why)) => Ok(Read::Unknown(why)),
        Err(ProviderError::UnknownMetric(m)) => Err(ReconcileError::UnknownMetric(m)),
        Err(ProviderError::BadRequest(why)) => {
            Err(ReconcileError::InvalidSpec(format!("{key}: {why}")))
        }
    }
}

/// A status time; one that does not parse is forgotten, and said so.
fn parse_time(s: Option<&String>) -> Option<i64> {
    rfc3339::parse(s?)
        .inspect_err(|e| tracing::warn!(error = %e, "ignoring an unreadable status time"))
        .ok()
}

/// The memory a status holds (whether this controller parked the target
/// is [`ownership::parked_by_us`]).
fn memory_of(status: Option<&ScaleToZeroPolicyStatus>) -> Memory {
    Memory {
        idle_since: status.and_then(|s| parse_time(s.idle_since.as_ref())),
        last_wake: status.and_then(|s| parse_time(s.last_wake_time.as_ref())),
        parked_from: None,
        waking: status.and_then(|s| s.phase) == Some(Phase::Waking),
        parked: false,
        activation_unknown_since: status
            .and_then(|s| parse_time(s.activation_unknown_since.as_ref())),
    }
}

/// This round's read of a rule, from the poll cache.
pub(super) async fn read_rule<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    key: &'static str,
    source: &MetricSource,
) -> Result<Read, ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let allow = ctx.settings.allow_queries;
    read(ctx.provider.as_ref(), key, source, &ns, allow).await
}

/// The idle rule's read, or `None` while the target is parked: a parked
/// target has no load to measure, and not asking keeps its key out of the
/// poll cache (it expires after `--idle-expiry`).
pub(super) async fn read_idle<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    s: &Sighting,
) -> Result<Option<Read>, ReconcileError> {
    if s.read.replicas == 0 {
        return Ok(None);
    }
    read_rule(policy, ctx, "idle", &policy.spec.idle.source)
        .await
        .map(Some)
}

/// The target's API object through the resolved kind.
pub(super) async fn target_api<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
) -> Result<Api<DynamicObject>, ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let ar = ctx.kinds.resolve(&ctx.client, &policy.spec.target).await?;
    Ok(Api::namespaced_with(ctx.client.clone(), &ns, &ar))
}

/// Read the target from the Kubernetes API.
pub(super) async fn sight<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    activation: &Read,
) -> Result<Sighting, ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let spec = &policy.spec;
    let api = target_api(policy, ctx).await?;
    let scale = target::scale_of(&api, &spec.target).await?;
    let replicas = scale.replicas;
    // A parked target that activation does not wake needs no HPAs or other
    // owners: they matter only to a park or a wake (another autoscaler on
    // the target is an error: the policy acts on nothing). Its parked-from annotation is still
    // read: a first memory built without it would take a park by an
    // earlier version for a manual zero and never wake it.
    let wakes =
        decide::activation_state(activation, spec.activation.threshold) == ReadState::Active;
    let (read, hpas) = if replicas == 0 && !wakes {
        (target::read(&api, &spec.target, &scale).await?, Vec::new())
    } else {
        let owners = owners::read(&ctx.client, &ns, &spec.target)
            .await
            .map_err(TargetError::Api)?;
        owners.check(&spec.target, replicas)?;
        (target::read(&api, &spec.target, &scale).await?, owners.hpas)
    };
    Ok(Sighting {
        target: spec.target.clone(),
        read,
        hpas,
        at: Instant::now(),
    })
}

pub(super) fn round_of<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    (idle, activation): (Option<Read>, Read),
    s: &Sighting,
    now: i64,
) -> Result<Round, ReconcileError> {
    let idle_read = idle.is_some();
    let idle = idle.unwrap_or_else(|| Read::Unknown("not read while the target is parked".into()));
    let wake_default = s.hpas.iter().map(|(_, min)| *min).max().unwrap_or(1).max(1);
    Ok(Round {
        rules: rules_of(policy, wake_default)?,
        seen: Observed {
            now,
            idle,
            activation,
            target: Target {
                replicas: s.read.replicas,
                ready: s.read.ready,
            },
            hpa_owns_zero: s
                .hpas
                .iter()
                .find(|(_, min)| *min == 0)
                .map(|(n, _)| n.clone()),
        },
        memory: recall(ctx, policy, s.read.legacy_parked_from),
        idle_read,
        unknown: unknown::rule_of(&policy.spec.activation)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_through_the_status() {
        let s = rfc3339::format(1_790_000_000);
        assert_eq!(parse_time(Some(&s)), Some(1_790_000_000));
    }
}
