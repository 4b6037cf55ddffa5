//! What every reconcile shares: the settings, the clients, this term's
//! memory of each policy, and the errors that end a round.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpuscale_util::backoff;
use kube::runtime::events::Recorder;
use kube::runtime::finalizer;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use super::crd::{ScaleToZeroPolicy, TargetRef};
use super::decide::Memory;
use super::lease::Leadership;
use super::report::Report;
use super::target::{self, Kinds, TargetError};

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How often a parked target's activation is checked (from the cache).
    pub wake_interval: Duration,
    /// How often a running target's idle window is advanced.
    pub check_interval: Duration,
    /// How long a round that changes nothing may trust the target as last
    /// read from the Kubernetes API (a park, a wake or a Waking target
    /// always reads it afresh).
    pub resync_interval: Duration,
    /// Longest wait after repeated failures (targets missing, API errors).
    pub max_backoff: Duration,
    /// Whether policies may give a PromQL `query` (it cannot be confined to
    /// the policy's namespace, so a cluster admin opts in).
    pub allow_queries: bool,
    /// Most rounds at once: a bound on the controller's API connections
    /// and memory after a resync of every policy, and on its burst of
    /// calls to the API server.
    pub concurrency: u16,
}

/// What every reconcile shares.
pub struct Context<P> {
    pub client: Client,
    pub provider: Arc<P>,
    pub leadership: Arc<Leadership>,
    pub report: Arc<Report>,
    pub recorder: Recorder,
    pub settings: Settings,
    pub kinds: Kinds,
    /// Failures in a row per policy (namespace, name), for the error
    /// policy's backoff: the controller keeps no count of its own.
    failures: Mutex<HashMap<(String, String), u32>>,
    /// The last decision's memory per policy uid. The status holds it too,
    /// but the store's copy of a policy can lag behind the status just
    /// written: a window restarted by a busy read must not reopen at its
    /// old start, a wake must not be taken for someone else's. Cleared
    /// when leadership is lost (a new term starts from the status), pruned
    /// when a policy goes.
    memory: Mutex<HashMap<String, Memory>>,
    /// The target as last read per policy uid. Targets are not watched (any
    /// kind with `/scale`, in any namespace), so no store holds them: a
    /// round whose decision changes nothing needs only the poll cache, and
    /// 500 policies cost the API a few reads a second instead of hundreds.
    sightings: Mutex<HashMap<String, Sighting>>,
    /// Every policy (the controller's store): who owns a target.
    pub policies: Store<ScaleToZeroPolicy>,
}

/// What the Kubernetes API said of a policy's target.
#[derive(Debug, Clone)]
pub(super) struct Sighting {
    pub target: TargetRef,
    pub read: target::TargetRead,
    /// HPAs on the target: (name, minReplicas).
    pub hpas: Vec<(String, i32)>,
    pub at: Instant,
}

impl<P> Context<P> {
    pub fn new(
        client: Client,
        provider: Arc<P>,
        leadership: Arc<Leadership>,
        report: Arc<Report>,
        recorder: Recorder,
        settings: Settings,
        policies: Store<ScaleToZeroPolicy>,
    ) -> Self {
        Self {
            client,
            provider,
            leadership,
            report,
            recorder,
            settings,
            kinds: Kinds::default(),
            failures: Mutex::new(HashMap::new()),
            memory: Mutex::new(HashMap::new()),
            sightings: Mutex::new(HashMap::new()),
            policies,
        }
    }

    /// A new term (or none): forget what this replica saw and did.
    pub(super) fn forget_term(&self) {
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.sightings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The last sighting of `policy`'s target, if recent enough to trust
    /// and all its pods were Ready.
    pub(super) fn sighting(&self, policy: &ScaleToZeroPolicy) -> Option<Sighting> {
        let uid = identity(policy);
        let map = self.sightings.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&uid)
            .filter(|s| s.target == policy.spec.target)
            .filter(|s| s.at.elapsed() < self.settings.resync_interval)
            // A target with pods not Ready yet is read again every round:
            // readiness follows the pods, not the resync.
            .filter(|s| s.read.ready >= s.read.replicas)
            .cloned()
    }

    pub(super) fn sighted(&self, policy: &ScaleToZeroPolicy, s: Option<Sighting>) {
        let uid = identity(policy);
        let mut map = self.sightings.lock().unwrap_or_else(|e| e.into_inner());
        match s {
            Some(s) => map.insert(uid, s),
            None => map.remove(&uid),
        };
    }

    /// Exponential backoff per policy: 2 s doubling to `max_backoff`, jittered.
    pub(super) fn backoff(&self, key: &(String, String)) -> Duration {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = f.entry(key.clone()).or_default();
        *n = n.saturating_add(1);
        let step = backoff::step(Duration::from_secs(2), self.settings.max_backoff, *n);
        backoff::jitter(step)
    }

    pub(super) fn remember(&self, policy: &ScaleToZeroPolicy, memory: Memory) {
        let uid = identity(policy);
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid, memory);
    }

    pub(super) fn succeeded(&self, key: &(String, String)) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// This leader's last memory of `policy`, if it has one.
    pub(super) fn remembered(&self, policy: &ScaleToZeroPolicy) -> Option<Memory> {
        let uid = identity(policy);
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&uid)
            .copied()
    }

    /// Forget the policies that are gone (`live` holds the rest).
    pub fn retain(&self, live: &[Arc<ScaleToZeroPolicy>]) {
        let uids: std::collections::HashSet<String> = live.iter().map(|p| identity(p)).collect();
        let keys: std::collections::HashSet<(String, String)> = live
            .iter()
            .map(|p| (p.namespace().unwrap_or_default(), p.name_any()))
            .collect();
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|uid, _| uids.contains(uid));
        self.sightings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|uid, _| uids.contains(uid));
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| keys.contains(k));
    }
}

/// A policy's uid: a policy deleted and created again under the same name
/// starts afresh (namespace/name where a server gives no uid).
fn identity(policy: &ScaleToZeroPolicy) -> String {
    policy.uid().unwrap_or_else(|| {
        format!(
            "{}/{}",
            policy.namespace().unwrap_or_default(),
            policy.name_any()
        )
    })
}

/// Errors that end a round early; each becomes a `Ready=False` condition.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    #[error("unknown metric {0:?}: not in the adapter's config or presets")]
    UnknownMetric(String),
    #[error(
        "{0}.query: PromQL queries are off in this adapter (--scale-to-zero-allow-queries); use a configured metric"
    )]
    QueryNotAllowed(&'static str),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("writing status: {0}")]
    Status(kube::Error),
    #[error("{target} is owned by policy {owner} (the oldest on it): this one acts on nothing")]
    Conflict { owner: String, target: String },
    #[error("{0}")]
    TargetChanged(String),
    /// Another autoscaler scales the target, or whether one does is unknown.
    #[error(transparent)]
    Owners(#[from] super::owners::OwnersError),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<ReconcileError>>),
    #[error("the round took longer than {0:?} (a Kubernetes call that does not answer)")]
    Deadline(Duration),
}

impl ReconcileError {
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::InvalidSpec(_) => "InvalidSpec",
            ReconcileError::UnknownMetric(_) => "UnknownMetric",
            ReconcileError::QueryNotAllowed(_) => "QueryNotAllowed",
            ReconcileError::Target(e) => e.reason(),
            ReconcileError::Status(_)
            | ReconcileError::Finalizer(_)
            | ReconcileError::Deadline(_) => "KubernetesAPIError",
            ReconcileError::Conflict { .. } => "Conflict",
            ReconcileError::TargetChanged(_) => "TargetChanged",
            ReconcileError::Owners(e) => e.reason(),
        }
    }

    /// The kind of what keeps a policy from acting, for the conflicts
    /// metric: an older policy on the same target, or another autoscaler.
    pub fn owner_kind(&self) -> Option<&'static str> {
        match self {
            ReconcileError::Conflict { .. } => Some("ScaleToZeroPolicy"),
            ReconcileError::Owners(e) => e.owner_kind(),
            _ => None,
        }
    }

    /// The condition that is True while this holds: `Conflict` (an older
    /// policy owns the target) or `OwnerConflict` (another autoscaler).
    pub fn conflict_condition(&self) -> Option<&'static str> {
        match self {
            ReconcileError::Conflict { .. } => Some("Conflict"),
            ReconcileError::Owners(super::owners::OwnersError::Conflict { .. }) => {
                Some("OwnerConflict")
            }
            _ => None,
        }
    }
}
