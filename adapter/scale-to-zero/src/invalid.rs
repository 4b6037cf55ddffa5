//! Policies the controller cannot read. The watch reads policies as plain
//! objects and decodes each one itself, so one undecodable policy (a
//! misspelt field, a value of no known kind, a CRD older than the
//! controller) neither stops the watch of every other policy nor goes
//! unseen: it gets a Warning Event naming the field and the error, a log
//! line, and counts in `gpuscale_scale_to_zero_invalid_policies` until it
//! is fixed or deleted. It is not acted on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::bounded::bounded;
use crate::crd::ScaleToZeroPolicy;
use crate::lease::Leadership;
use crate::report::Report;

/// The Event reason of a policy that cannot be read.
pub const REASON: &str = "InvalidPolicy";

/// One policy that does not decode.
struct Entry {
    why: String,
    reference: ObjectReference,
    /// Its Event is out (by this replica, while it led).
    published: bool,
}

type Seen = BTreeMap<(String, String), Entry>;

/// Each policy that does not decode, by (namespace, name).
pub struct Invalid {
    seen: Mutex<Seen>,
    report: Arc<Report>,
    recorder: Recorder,
    leadership: Arc<Leadership>,
}

/// `obj` as a policy, or where and why it does not decode
/// (`spec.whenUnknown: unknown variant ...`).
pub fn decode(obj: &DynamicObject) -> Result<ScaleToZeroPolicy, String> {
    let value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        }
    })
}

impl Invalid {
    pub fn new(report: Arc<Report>, recorder: Recorder, leadership: Arc<Leadership>) -> Self {
        Self {
            seen: Mutex::default(),
            report,
            recorder,
            leadership,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Seen) -> R) -> R {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut seen);
        self.report.set_invalid(seen.len());
        out
    }

    /// One watch event of plain objects as one of policies: what decodes
    /// passes, what does not is reported and left out.
    pub async fn event(
        &self,
        ev: watcher::Event<DynamicObject>,
    ) -> Option<watcher::Event<ScaleToZeroPolicy>> {
        use watcher::Event as E;
        match ev {
            E::Init => {
                self.with(BTreeMap::clear);
                Some(E::Init)
            }
            E::InitDone => Some(E::InitDone),
            E::Apply(obj) => self.read(&obj).await.map(E::Apply),
            E::InitApply(obj) => self.read(&obj).await.map(E::InitApply),
            E::Delete(obj) => {
                self.forget(&obj);
                decode(&obj).ok().map(E::Delete)
            }
        }
    }

    async fn read(&self, obj: &DynamicObject) -> Option<ScaleToZeroPolicy> {
        match decode(obj) {
            Ok(p) => {
                self.forget(obj);
                Some(p)
            }
            Err(why) => {
                self.report_invalid(obj, why).await;
                None
            }
        }
    }

    fn forget(&self, obj: &DynamicObject) {
        let key = (obj.namespace().unwrap_or_default(), obj.name_any());
        self.with(|seen| seen.remove(&key));
    }

    /// Logged and counted on every replica, once per distinct error; the
    /// Event waits for [`Invalid::publish`].
    async fn report_invalid(&self, obj: &DynamicObject, why: String) {
        let key = (obj.namespace().unwrap_or_default(), obj.name_any());
        let resource = ApiResource::erase::<ScaleToZeroPolicy>(&());
        let reference = obj.object_ref(&resource);
        let new = self.with(|seen| {
            let same = seen.get(&key).is_some_and(|e| e.why == why);
            if !same {
                let published = false;
                let why = why.clone();
                seen.insert(
                    key.clone(),
                    Entry {
                        why,
                        reference,
                        published,
                    },
                );
            }
            !same
        });
        if new {
            tracing::warn!(namespace = %key.0, policy = %key.1, error = %why, "ScaleToZeroPolicy cannot be read; it is not acted on until fixed");
            if self.leadership.is_leader() {
                self.publish().await;
            }
        }
    }

    /// Publishes, while this replica leads, the Warning Event of each
    /// unreadable policy that has none yet from it: at once for a policy
    /// seen while leading, within a second of taking the Lease for one
    /// seen before.
    pub async fn keep_publishing(self: Arc<Self>) {
        loop {
            if self.leadership.is_leader() {
                self.publish().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn publish(&self) {
        let pending: Vec<((String, String), String, ObjectReference)> = self.with(|seen| {
            seen.iter()
                .filter(|(_, e)| !e.published)
                .map(|(k, e)| (k.clone(), e.why.clone(), e.reference.clone()))
                .collect()
        });
        for (key, why, reference) in pending {
            let ev = Event {
                type_: EventType::Warning,
                reason: REASON.into(),
                note: Some(format!(
                    "cannot read the policy: {why}; it is not acted on until fixed"
                )),
                action: "Read".into(),
                secondary: None,
            };
            let publish = self.recorder.publish(&ev, &reference);
            match bounded("publishing an Event", publish).await {
                Ok(()) => self.with(|seen| {
                    if let Some(e) = seen.get_mut(&key).filter(|e| e.why == why) {
                        e.published = true;
                    }
                }),
                Err(e) => {
                    tracing::warn!(error = %e, policy = %key.1, "event not recorded; retried")
                }
            }
        }
    }
}
