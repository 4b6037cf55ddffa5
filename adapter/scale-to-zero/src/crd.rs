//! The `ScaleToZeroPolicy` custom resource (`gpuscale.dev/v1alpha1`): which
//! object to park, the idle rule that parks it, the activation rule that
//! wakes it. The CRD in `deploy/adapter/` is generated from these types.

// Printer columns repeat `type_ = "string"`, which this lint misreads as
// duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use gpuscale_decide::{Phase, ReadState};

/// What a policy parks and wakes, and when.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "gpuscale.dev",
    version = "v1alpha1",
    kind = "ScaleToZeroPolicy",
    plural = "scaletozeropolicies",
    shortname = "stz",
    namespaced,
    status = "ScaleToZeroPolicyStatus",
    doc = "Parks an idle GPU workload at 0 replicas and wakes it on demand.",
    printcolumn(name = "Target", type_ = "string", json_path = ".spec.target.name"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.reason"),
    printcolumn(
        name = "Parked-From",
        type_ = "integer",
        json_path = ".status.parked.replicas",
        priority = 1
    ),
    printcolumn(
        name = "Idle",
        type_ = "string",
        json_path = ".status.idle.summary",
        priority = 1
    ),
    printcolumn(
        name = "Activation",
        type_ = "string",
        json_path = ".status.activation.summary",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ScaleToZeroPolicySpec {
    /// The object to scale; it must have a `scale` subresource. Immutable:
    /// a policy that parked one target must not let go of it by renaming.
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf",
        "message": "spec.target is immutable: delete the policy (which wakes what it parked) and create another"
    }]))]
    pub target: TargetRef,
    /// Parks the target when this rule reads idle for its whole duration.
    pub idle: IdleRule,
    /// Wakes the parked target when this rule reads active. It must mean
    /// something while the target has no pods (a gateway's pending requests,
    /// a queue's length).
    pub activation: ActivationRule,
    /// How a parked target is woken.
    #[serde(default)]
    pub wake: WakeSpec,
    /// Deprecated: `wake.replicas`, read when that is not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub wake_replicas: Option<i32>,
    /// After a wake, stay up at least this long (`30m`): models load slowly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_up_duration: Option<String>,
    /// Do nothing while true.
    #[serde(default)]
    pub paused: bool,
    /// The stage before zero: the target's Ready pods put to sleep (vLLM's
    /// sleep mode) after `sleep.after` of idle, woken when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<SleepStage>,
}

/// How a parked target is woken.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WakeSpec {
    /// Replicas to wake to (default: the minReplicas of an HPA on the same
    /// target, else 1): one request should not cold-start many GPU pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub replicas: Option<i32>,
    /// Wake to the count recorded at parking when it is larger than
    /// `replicas`.
    #[serde(default)]
    pub restore_parked: bool,
    /// Wake a target found at 0 that this controller did not park (an
    /// operator's manual scale to 0 is otherwise left alone).
    #[serde(default)]
    pub from_manual_zero: bool,
}

/// An object with a `scale` subresource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    /// e.g. `apps/v1`, `argoproj.io/v1alpha1`.
    pub api_version: String,
    /// e.g. `Deployment`, `StatefulSet`, `Rollout`.
    pub kind: String,
    pub name: String,
}

/// Where a rule's value comes from: a configured adapter metric, or a PromQL
/// template when the adapter allows them (`--scale-to-zero-allow-queries`),
/// with an optional label selector as an HPA would send it. Either is read
/// through the same poll cache as the external metrics API and KEDA.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricSource {
    /// A metric of the adapter's config or presets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// A PromQL template instead of `metric`, with the config's
    /// placeholders (`${matchers}` is required: the policy's namespace and
    /// `labelSelector`). Refused unless the adapter allows queries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Label selector applied to `metric` or `${matchers}`, e.g. `workload=chat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// Idle: the value is at or below `threshold` for `for` on every read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.metric) != has(self.query)",
    "message": "set exactly one of metric or query"
}]))]
pub struct IdleRule {
    #[serde(flatten)]
    pub source: MetricSource,
    /// Idle while the value is at or below this (default 0).
    #[serde(default)]
    pub threshold: f64,
    /// How long the rule must hold on good reads before parking (`15m`).
    #[serde(rename = "for")]
    pub duration: String,
}

/// Active: the value is above `threshold`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.metric) != has(self.query)",
    "message": "set exactly one of metric or query"
}]))]
pub struct ActivationRule {
    #[serde(flatten)]
    pub source: MetricSource,
    /// Active while the value is above this (default 0).
    #[serde(default)]
    pub threshold: f64,
    /// How long the rule may read unknown (Prometheus down or failing, the
    /// series stale or missing) before `whenUnknown` applies to a parked
    /// target (default `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_after: Option<String>,
    /// What a parked target does once the rule has read unknown for
    /// `unknownAfter`: `Wake` (fail-open, the default) or `StayParked`.
    #[serde(default)]
    pub when_unknown: WhenUnknown,
}

/// What a parked target does when its activation stays unknown.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WhenUnknown {
    /// Woken (to `wake.replicas`): a stranded service costs more than
    /// the GPU time of an unneeded wake.
    #[default]
    Wake,
    /// Left at 0 until the rule reads again.
    StayParked,
}

/// The state of one rule as last read. No value and no read time: the
/// status is written only when something in it changes, and a live value
/// would change it every round (`/debug/scalers` and the self-metrics
/// carry the values).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleStatus {
    pub state: ReadState,
    /// `queue_depth ≤ 0 (idle)`, or why the read is unknown.
    pub summary: String,
}

/// `metav1.Condition`, k8s-openapi's type (its schema is [`conditions_schema`]).
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The schema of `status.conditions`: a list of `metav1.Condition` keyed by
/// `type`, as the API conventions declare it (server-side apply merges it
/// by type).
fn conditions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let string = |d: &str| serde_json::json!({"type": "string", "description": d});
    schemars::json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "description": "A standard condition (metav1.Condition).",
            "required": ["type", "status", "reason", "message", "lastTransitionTime"],
            "properties": {
                "type": string("Ready, Parked, Conflict or OwnerConflict."),
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": string("A CamelCase reason."),
                "message": string("What happened, for people."),
                "lastTransitionTime": {"type": "string", "format": "date-time",
                    "description": "When status last changed."},
                "observedGeneration": {"type": "integer", "format": "int64",
                    "description": "The policy's generation this condition describes."},
            },
        },
    })
}

/// A park this controller made: what it parked, from how many replicas,
/// when. Kept in the policy's status so a deleted policy (or an uninstall)
/// can wake its target through the `scale` subresource alone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParkRecord {
    pub target: TargetRef,
    /// Replicas the target had when parked.
    pub replicas: i32,
    /// RFC 3339 time of the park.
    pub at: String,
}

/// What the controller last saw and did. Written by server-side apply as
/// a whole: every field is sent, absent ones as null, so a field the
/// controller no longer sets is cleared.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleToZeroPolicyStatus {
    #[serde(default)]
    pub phase: Option<Phase>,
    /// The target this policy parked and has not woken since (null when none).
    #[serde(default)]
    pub parked: Option<ParkRecord>,
    #[serde(default)]
    pub idle: Option<RuleStatus>,
    #[serde(default)]
    pub activation: Option<RuleStatus>,
    /// Start of the current idle window (RFC 3339), while one is open.
    #[serde(default)]
    pub idle_since: Option<String>,
    /// The last wake (RFC 3339): `minUpDuration` counts from here.
    #[serde(default)]
    pub last_wake_time: Option<String>,
    /// Since when the activation rule has read unknown (RFC 3339), while
    /// it does: `activation.unknownAfter` counts from here.
    #[serde(default)]
    pub activation_unknown_since: Option<String>,
    /// When the phase or the reason last changed (RFC 3339).
    #[serde(default)]
    pub last_transition_time: Option<String>,
    /// Why the last decision was taken or refused (a `Reason`).
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// `Ready`, `Parked`, and `Conflict` on a policy another one outranks.
    #[serde(default)]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// The generation of the spec the status describes, errors included.
    #[serde(default)]
    pub observed_generation: Option<i64>,
    /// With `spec.sleep`: each Ready pod of the target, `Sleeping` or
    /// `Awake`, and why a pod of an idle target is awake.
    #[serde(default)]
    pub sleep: Vec<PodSleep>,
}

/// The CRD as YAML, as shipped in `deploy/adapter/`.
pub fn crd_yaml() -> Result<String, yaml_serde::Error> {
    use kube::CustomResourceExt;
    let header = "# Generated from adapter/scale-to-zero/src/crd.rs; regenerate with\n\
                  # cargo run -p gpuscale-lint\n";
    Ok(format!(
        "{header}{}",
        yaml_serde::to_string(&ScaleToZeroPolicy::crd())?
    ))
}

/// A policy `name` on Deployment `chat`, idle and activation on metrics
/// `q` and `a`, generation 1 (for tests).
#[cfg(test)]
pub(crate) fn example(name: &str) -> ScaleToZeroPolicy {
    let spec: ScaleToZeroPolicySpec = serde_json::from_value(serde_json::json!({
        "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"},
        "idle": {"metric": "q", "for": "15m"},
        "activation": {"metric": "a"},
    }))
    .expect("spec");
    let mut p = ScaleToZeroPolicy::new(name, spec);
    p.metadata.generation = Some(1);
    p
}

/// `spec.sleep`: the stage before zero.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SleepStage {
    /// Idle this long (`2m`) before the target's pods are put to sleep;
    /// shorter than `idle.for`, which parks at zero.
    pub after: String,
    /// 1: weights to host RAM (the pod needs host memory for them); 2:
    /// weights dropped, reloaded on wake.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 2))]
    pub level: u8,
    /// The pods' port of the sleep endpoints (vLLM's API port): a number,
    /// or the name of a container port.
    #[schemars(schema_with = "int_or_string")]
    pub port: IntOrString,
}

fn int_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "description": "The pods' port of the sleep endpoints (vLLM's API port): a number, or the name of a container port."
    })
}

fn one() -> u8 {
    1
}

/// One pod in `status.sleep`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSleep {
    pub pod: String,
    /// `Sleeping` or `Awake`.
    pub phase: String,
    /// Why an awake pod is not asleep although the target is idle
    /// (`RequestsInFlight`, `SleepModeNotEnabled`, `Unreachable`,
    /// `Timeout`, `NotConfirmed`, `BadAnswer`, `NoPodIP`, `NoSuchPort`), or
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
