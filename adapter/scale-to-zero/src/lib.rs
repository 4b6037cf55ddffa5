//! gpuscale's own scale-to-zero controller: parks idle GPU workloads at 0
//! replicas through the `scale` subresource and wakes them on activation,
//! for clusters without KEDA or the HPA's `minReplicas: 0`.
//!
//! It reads the signals through the `Provider` seam of `gpuscale-signals`
//! only (never Prometheus or the metrics APIs directly), so the binary
//! hands it the same poll cache every other reader shares.
//!
//! [`crd`] is the `ScaleToZeroPolicy` resource; [`decide`] (the
//! `gpuscale-decide` crate, kube-free) the pure decisions over one round's
//! reads; [`reconcile`] runs a round: `inputs`
//! gathers the reads, `apply` parks or wakes, `status` says what happened;
//! [`context`] is what rounds share; `activation_watch` wakes parked
//! policies; [`ownership`] and [`release`] give back what a policy parked;
//! [`lease`] makes one replica of several act; [`report`] is what it tells
//! people (self-metrics, `/debug/scalers`).

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod activation_watch;
mod apply;
mod bounded;
pub mod context;
pub mod crd;
mod events;
mod inputs;
pub mod invalid;
pub mod lease;
pub mod owners;
pub mod ownership;
pub mod reconcile;
pub mod release;
pub mod report;
pub mod sleep;
mod status;
pub mod target;
pub mod unknown;

pub use gpuscale_decide as decide;

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use context::{Context, Settings};
use crd::ScaleToZeroPolicy;
use gpuscale_signals::provider::Provider;
use invalid::Invalid;
use lease::{Leadership, LeaseSettings};
use report::Report;

/// Runs the Lease loop and the controller until the process ends.
pub async fn run<P: Provider>(
    client: Client,
    provider: Arc<P>,
    lease: LeaseSettings,
    settings: Settings,
    report: Arc<Report>,
) {
    let leadership = Arc::new(Leadership::default());
    tokio::spawn(lease::run(
        client.clone(),
        lease.clone(),
        leadership.clone(),
    ));
    tokio::spawn(mirror_leadership(leadership.clone(), report.clone()));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "gpuscale-scale-to-zero".into(),
            instance: Some(lease.identity.clone()),
        },
    );
    // Read as plain objects and decoded one by one: one policy that does
    // not decode is reported (`invalid`), never the end of the watch.
    let resource = ApiResource::erase::<ScaleToZeroPolicy>(&());
    let policies: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let invalid = Arc::new(Invalid::new(
        report.clone(),
        recorder.clone(),
        leadership.clone(),
    ));
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let (store, writer) = reflector::store();
    // Status writes do not reconcile again: only a new generation (a spec
    // edit), a finalizer added or a deletion does; the rounds' own requeues
    // and the activation watch do the rest.
    let edits = watcher(policies, watcher::Config::default())
        .default_backoff()
        .filter_map({
            let invalid = invalid.clone();
            move |ev| {
                let invalid = invalid.clone();
                async move {
                    match ev {
                        Ok(ev) => invalid.event(ev).await.map(Ok),
                        Err(e) => Some(Err(e)),
                    }
                }
            }
        })
        .modify(forget_bookkeeping)
        .reflect(writer)
        .applied_objects()
        .predicate_filter(spec_or_lifecycle, Default::default());
    let controller = Controller::for_stream(edits, store)
        .with_config(controller::Config::default().concurrency(settings.concurrency))
        .reconcile_on(woken);
    let ctx = Arc::new(Context::new(
        client,
        provider,
        leadership,
        report,
        recorder,
        settings,
        controller.store(),
    ));
    tokio::spawn(invalid.keep_publishing());
    tokio::spawn(activation_watch::watch_parked(ctx.clone(), wake));
    tokio::spawn(release::repair_orphans(ctx.clone()));
    tokio::spawn(forget_deleted(controller.store(), ctx.clone()));
    controller
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|_| std::future::ready(()))
        .await;
}

/// Drops what other clients keep on a policy for themselves before it is
/// stored: `managedFields` (a few KB per policy on a real API server) and
/// kubectl's copy of the last applied manifest. The controller reads
/// neither, and the store holds every policy for the process's life.
fn forget_bookkeeping(p: &mut ScaleToZeroPolicy) {
    p.managed_fields_mut().clear();
    p.annotations_mut()
        .remove("kubectl.kubernetes.io/last-applied-configuration");
}

/// What reconciles a policy when it changes: its generation, its
/// finalizers, whether it is being deleted (an API server bumps the
/// generation then, not every one does).
fn spec_or_lifecycle(p: &ScaleToZeroPolicy) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let meta = p.meta();
    (
        meta.generation,
        &meta.finalizers,
        meta.deletion_timestamp.is_some(),
    )
        .hash(&mut h);
    Some(h.finish())
}

/// Drops deleted policies from the report and this term's memory: the
/// controller does not reconcile what is gone, and a deleted policy must
/// not stay "Waking".
async fn forget_deleted<P>(store: Store<ScaleToZeroPolicy>, ctx: Arc<Context<P>>) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        if store.wait_until_ready().await.is_err() {
            return;
        }
        let exists = |ns: &str, name: &str| store.get(&ObjectRef::new(name).within(ns)).is_some();
        ctx.report.retain(exists);
        ctx.retain(&store.state());
    }
}

/// Keeps the leader gauge in step with the Lease.
async fn mirror_leadership(leadership: Arc<Leadership>, report: Arc<Report>) {
    loop {
        report.set_leader(leadership.is_leader());
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crd::ScaleToZeroPolicyStatus;

    #[test]
    fn a_status_write_does_not_reconcile_a_spec_edit_or_a_deletion_does() {
        let p = crd::example("chat");
        let mut written = p.clone();
        written.status = Some(ScaleToZeroPolicyStatus {
            reason: Some("Parked".into()),
            ..ScaleToZeroPolicyStatus::default()
        });
        assert_eq!(spec_or_lifecycle(&p), spec_or_lifecycle(&written));
        let mut edited = p.clone();
        edited.meta_mut().generation = Some(2);
        assert_ne!(spec_or_lifecycle(&p), spec_or_lifecycle(&edited));
        let mut finalized = p.clone();
        finalized.meta_mut().finalizers = Some(vec![ownership::FINALIZER.into()]);
        assert_ne!(spec_or_lifecycle(&p), spec_or_lifecycle(&finalized));
        let mut deleted = p.clone();
        deleted.meta_mut().deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert_ne!(spec_or_lifecycle(&p), spec_or_lifecycle(&deleted));
    }

    #[test]
    fn the_store_keeps_no_bookkeeping_of_other_clients() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let mut p = crd::example("chat");
        p.meta_mut().managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..ManagedFieldsEntry::default()
        }]);
        let last = "kubectl.kubernetes.io/last-applied-configuration";
        p.annotations_mut().insert(last.into(), "{}".into());
        p.annotations_mut().insert("team".into(), "ml".into());
        forget_bookkeeping(&mut p);
        assert!(p.managed_fields().is_empty());
        assert_eq!(p.annotations().keys().collect::<Vec<_>>(), ["team"]);
        assert_eq!(p.spec, crd::example("chat").spec, "the spec is kept");
    }
}
