//! Leader election on a `coordination.k8s.io/v1` Lease: only the holder
//! parks and wakes. Updates carry the resourceVersion read, so two replicas
//! racing for an expired lease cannot both win (the loser gets a 409).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// Who holds leadership, readable without locking.
#[derive(Debug, Default)]
pub struct Leadership {
    leader: AtomicBool,
}

impl Leadership {
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }

    fn set(&self, leader: bool) {
        if self.leader.swap(leader, Ordering::AcqRel) != leader {
            tracing::info!(leader, "scale-to-zero leadership changed");
        }
    }
}

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// A holder that has not renewed for this long has lost the lease.
    pub duration: Duration,
}

/// What one round found.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    Holding,
    HeldByOther,
}

fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let secs = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    renewed.0.as_second() + secs < now.as_second()
}

fn spec(
    settings: &LeaseSettings,
    now: Timestamp,
    acquired: Option<MicroTime>,
    transitions: i32,
) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(settings.identity.clone()),
        lease_duration_seconds: i32::try_from(settings.duration.as_secs()).ok(),
        acquire_time: Some(acquired.unwrap_or(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

async fn round(api: &Api<Lease>, settings: &LeaseSettings) -> Result<Round, kube::Error> {
    let now = Timestamp::now();
    let Some(mut lease) = api.get_opt(&settings.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(settings.name.clone()),
                namespace: Some(settings.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec(settings, now, None, 0)),
        };
        api.create(&PostParams::default(), &lease).await?;
        return Ok(Round::Holding);
    };
    let current = lease.spec.clone().unwrap_or_default();
    let mine = current.holder_identity.as_deref() == Some(settings.identity.as_str());
    if !mine && !expired(&current, now) {
        return Ok(Round::HeldByOther);
    }
    let (acquired, transitions) = if mine {
        (current.acquire_time, current.lease_transitions.unwrap_or(0))
    } else {
        (None, current.lease_transitions.unwrap_or(0) + 1)
    };
    lease.spec = Some(spec(settings, now, acquired, transitions));
    api.replace(&settings.name, &PostParams::default(), &lease)
        .await?;
    Ok(Round::Holding)
}

/// Renews or takes the lease every third of its duration, forever. Leadership
/// ends at once when another holder is seen or an update conflicts, and when
/// renewals have failed for a whole lease duration.
pub async fn run(client: Client, settings: LeaseSettings, leadership: Arc<Leadership>) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let period = settings.duration / 3;
    let mut last_renewed = None::<tokio::time::Instant>;
    loop {
        match round(&api, &settings).await {
            Ok(Round::Holding) => {
                last_renewed = Some(tokio::time::Instant::now());
                leadership.set(true);
            }
            Ok(Round::HeldByOther) => leadership.set(false),
            Err(kube::Error::Api(s)) if s.code == 409 => leadership.set(false),
            Err(e) => {
                tracing::warn!(error = %e, lease = %settings.name, "lease renewal failed");
                let stale = last_renewed.is_none_or(|t| t.elapsed() >= settings.duration);
                if stale {
                    leadership.set(false);
                }
            }
        }
        tokio::time::sleep(period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(renewed: i64, secs: i32) -> LeaseSpec {
        LeaseSpec {
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            lease_duration_seconds: Some(secs),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_expires_after_its_duration_without_renewal() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert!(!expired(&lease(990, 15), now));
        assert!(expired(&lease(980, 15), now));
        assert!(expired(&LeaseSpec::default(), now), "never renewed");
    }
}
