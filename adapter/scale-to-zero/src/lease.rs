//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics: only the holder parks and wakes. Updates carry the
//! resourceVersion read, so two replicas racing for a free Lease cannot
//! both win (the loser gets a 409). A standby takes the Lease only after
//! it has seen no change of it for the lease duration on its own monotonic
//! clock ([`observe`]); the holder stops acting when it has not renewed
//! within the renew deadline, which is shorter, so the two never overlap.

mod observe;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;

use observe::{Observer, Record};

/// Whether this replica may act, readable without locking. Leadership is
/// a deadline on the monotonic clock, so a process frozen past it (SIGSTOP,
/// a stalled node) finds itself a follower the moment it resumes, before
/// its Lease loop has run.
#[derive(Debug)]
pub struct Leadership {
    base: Instant,
    /// Nanoseconds after `base` until which this replica leads; 0: not.
    until: AtomicU64,
}

impl Default for Leadership {
    fn default() -> Self {
        Self {
            base: Instant::now(),
            until: AtomicU64::new(0),
        }
    }
}

impl Leadership {
    pub fn is_leader(&self) -> bool {
        self.leads_at(Instant::now())
    }

    fn leads_at(&self, now: Instant) -> bool {
        let until = self.until.load(Ordering::Acquire);
        until != 0 && self.nanos(now) < until
    }

    fn nanos(&self, at: Instant) -> u64 {
        let n = at.saturating_duration_since(self.base).as_nanos();
        u64::try_from(n).unwrap_or(u64::MAX).max(1)
    }

    fn lead_until(&self, until: Instant) {
        self.until.store(self.nanos(until), Ordering::Release);
    }

    fn step_down(&self) {
        self.until.store(0, Ordering::Release);
    }
}

/// The Lease's timing; `duration > renew_deadline > retry_period`.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// A standby takes a Lease it has seen unchanged for this long.
    pub duration: Duration,
    /// A leader that has not renewed for this long stops acting.
    pub renew_deadline: Duration,
    /// How often the Lease is renewed or tried.
    pub retry_period: Duration,
}

impl Timing {
    /// Checks the order client-go requires, naming the flags.
    pub fn new(
        duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, String> {
        if renew_deadline >= duration {
            return Err(format!(
                "--scale-to-zero-lease-renew-deadline ({renew_deadline:?}) must be shorter than --scale-to-zero-lease-duration ({duration:?}): a leader must stop acting before a standby may take over"
            ));
        }
        if retry_period.is_zero() || retry_period >= renew_deadline {
            return Err(format!(
                "--scale-to-zero-lease-retry-period ({retry_period:?}) must be above 0 and shorter than --scale-to-zero-lease-renew-deadline ({renew_deadline:?})"
            ));
        }
        if duration.as_secs() < 1
            || duration.subsec_nanos() != 0
            || i32::try_from(duration.as_secs()).is_err()
        {
            return Err(format!(
                "--scale-to-zero-lease-duration ({duration:?}) must be whole seconds, at least 1 s"
            ));
        }
        Ok(Self {
            duration,
            renew_deadline,
            retry_period,
        })
    }

    /// Each Kubernetes call of a round gets half the renew deadline: a
    /// hung call is a failed round, and two fit before the deadline.
    fn call_timeout(&self) -> Duration {
        self.renew_deadline / 2
    }
}

/// Asks the Lease loop to release the Lease (on SIGTERM) and waits for it.
#[derive(Debug, Clone)]
pub struct Release {
    asked: Arc<watch::Sender<bool>>,
    done: Arc<watch::Sender<bool>>,
}

impl Default for Release {
    fn default() -> Self {
        Self {
            asked: Arc::new(watch::Sender::new(false)),
            done: Arc::new(watch::Sender::new(false)),
        }
    }
}

impl Release {
    /// Stops acting and clears the holder, waiting at most `within`;
    /// whether the Lease was released (or was not ours) in time.
    pub async fn release(&self, within: Duration) -> bool {
        let mut done = self.done.subscribe();
        self.asked.send_replace(true);
        tokio::time::timeout(within, done.wait_for(|d| *d))
            .await
            .is_ok()
    }
}

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    pub timing: Timing,
    pub release: Release,
}

/// Why a round could not read or write the Lease.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("{0} of the Lease timed out after {1:?}")]
    Timeout(&'static str, Duration),
}

impl RoundError {
    fn conflict(&self) -> bool {
        matches!(self, Self::Api(kube::Error::Api(s)) if s.code == 409)
    }
}

/// What one round found.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    Holding,
    HeldByOther,
}

/// The Lease API with every call bounded.
struct Calls<'a> {
    api: Api<Lease>,
    settings: &'a LeaseSettings,
}

impl Calls<'_> {
    async fn bounded<T>(
        &self,
        what: &'static str,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, RoundError> {
        let limit = self.settings.timing.call_timeout();
        match tokio::time::timeout(limit, call).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(RoundError::Timeout(what, limit)),
        }
    }

    async fn get(&self) -> Result<Option<Lease>, RoundError> {
        self.bounded("get", self.api.get_opt(&self.settings.name))
            .await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, RoundError> {
        let pp = PostParams::default();
        self.bounded("update", self.api.replace(&self.settings.name, &pp, lease))
            .await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, RoundError> {
        self.bounded("create", self.api.create(&PostParams::default(), lease))
            .await
    }
}

fn spec(settings: &LeaseSettings, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
    let now = MicroTime(Timestamp::now());
    LeaseSpec {
        holder_identity: Some(settings.identity.clone()),
        lease_duration_seconds: i32::try_from(settings.timing.duration.as_secs()).ok(),
        acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
        renew_time: Some(now),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

/// client-go's tryAcquireOrRenew: create the Lease, renew ours, or take
/// one that is free or has not changed for its duration.
async fn round(calls: &Calls<'_>, seen: &mut Observer) -> Result<Round, RoundError> {
    let settings = calls.settings;
    let Some(mut lease) = calls.get().await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(settings.name.clone()),
                namespace: Some(settings.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec(settings, None, 0)),
        };
        let created = calls.create(&lease).await?;
        seen.observe(Record::of(&created), Instant::now());
        return Ok(Round::Holding);
    };
    let record = Record::of(&lease);
    seen.observe(record.clone(), Instant::now());
    let mine = record.holder.as_deref() == Some(settings.identity.as_str());
    if !mine && !seen.takeable(Instant::now(), settings.timing.duration) {
        return Ok(Round::HeldByOther);
    }
    let (acquired, transitions) = if mine {
        (record.acquire_time, record.transitions)
    } else {
        (None, record.transitions + 1)
    };
    lease.spec = Some(spec(settings, acquired, transitions));
    let written = calls.replace(&lease).await?;
    seen.observe(Record::of(&written), Instant::now());
    Ok(Round::Holding)
}

/// client-go's ReleaseOnCancel: stop acting, then clear the holder with a
/// one-second duration so a standby takes over at its next retry.
async fn release(calls: &Calls<'_>, seen: &Observer, leadership: &Leadership) {
    let held = leadership.is_leader();
    leadership.step_down();
    let ours = seen.last().and_then(|r| r.holder.as_deref()) == Some(&calls.settings.identity);
    if !held || !ours {
        return;
    }
    let result = async {
        let Some(mut lease) = calls.get().await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(calls.settings.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        calls.replace(&lease).await.map(|_| ())
    }
    .await;
    match result {
        Ok(()) => tracing::info!(lease = %calls.settings.name, "scale-to-zero Lease released"),
        Err(e) => {
            tracing::warn!(error = %e, lease = %calls.settings.name, "could not release the scale-to-zero Lease; a standby takes it after the lease duration")
        }
    }
}

/// Renews or tries the Lease every retry period until asked to release
/// it. A successful round started at `t` makes this replica lead until
/// `t` + renew deadline; another holder or a conflict ends it at once.
pub async fn run(client: Client, settings: LeaseSettings, leadership: Arc<Leadership>) {
    let calls = Calls {
        api: Api::namespaced(client, &settings.namespace),
        settings: &settings,
    };
    let timing = settings.timing;
    let mut seen = Observer::default();
    let mut asked = settings.release.asked.subscribe();
    let mut was_leader = false;
    loop {
        let started = Instant::now();
        match round(&calls, &mut seen).await {
            Ok(Round::Holding) => leadership.lead_until(started + timing.renew_deadline),
            Ok(Round::HeldByOther) => leadership.step_down(),
            Err(e) if e.conflict() => leadership.step_down(),
            // Leadership lapses by itself at the renew deadline.
            Err(e) => {
                tracing::warn!(error = %e, lease = %settings.name, "scale-to-zero Lease round failed")
            }
        }
        was_leader = log_change(was_leader, &leadership, &seen);
        tokio::select! {
            () = tokio::time::sleep(timing.retry_period) => {}
            _ = asked.wait_for(|a| *a) => break,
        }
    }
    release(&calls, &seen, &leadership).await;
    settings.release.done.send_replace(true);
}

fn log_change(was: bool, leadership: &Leadership, seen: &Observer) -> bool {
    let now = leadership.is_leader();
    if now != was {
        let holder = seen
            .last()
            .and_then(|r| r.holder.clone())
            .unwrap_or_default();
        tracing::info!(leader = now, %holder, "scale-to-zero leadership changed");
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leadership_ends_at_its_deadline_on_the_monotonic_clock() {
        let l = Leadership::default();
        let t0 = Instant::now();
        assert!(!l.leads_at(t0));
        l.lead_until(t0 + Duration::from_secs(10));
        assert!(l.leads_at(t0 + Duration::from_secs(9)));
        assert!(!l.leads_at(t0 + Duration::from_secs(10)), "frozen past it");
        l.step_down();
        assert!(!l.leads_at(t0));
    }

    #[test]
    fn timing_must_be_duration_over_deadline_over_retry() {
        let s = Duration::from_secs;
        assert!(Timing::new(s(15), s(10), s(2)).is_ok());
        let e = Timing::new(s(10), s(10), s(2)).expect_err("deadline = duration");
        assert!(e.contains("--scale-to-zero-lease-renew-deadline"), "{e}");
        let e = Timing::new(s(15), s(10), s(10)).expect_err("retry = deadline");
        assert!(e.contains("--scale-to-zero-lease-retry-period"), "{e}");
        assert!(Timing::new(s(15), s(10), Duration::ZERO).is_err());
        assert!(
            Timing::new(
                Duration::from_millis(900),
                Duration::from_millis(500),
                Duration::from_millis(100)
            )
            .is_err()
        );
    }
}
