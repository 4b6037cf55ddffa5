//! May this user do this: SubjectAccessReview, cached with a TTL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::kube::KubeAuthApi;
use super::{AuthError, User};

/// What a request does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attributes {
    /// `verb` on `resource` (an external metric, or `<kind>/<metric>` of a
    /// custom one) of `group`/`version` in `namespace`; `name` is the object
    /// (empty for a list).
    Resource {
        group: &'static str,
        version: &'static str,
        namespace: String,
        resource: String,
        name: String,
        verb: String,
    },
    /// A discovery path.
    NonResource { path: String, verb: String },
}

/// A cached review: when, allowed, reason.
type Decision = (Instant, bool, String);

/// Authorizes through SubjectAccessReview.
pub struct Authorizer {
    kube: Arc<KubeAuthApi>,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: Mutex<HashMap<(User, Attributes), Decision>>,
}

/// Members of this group are allowed without a review, as in Kubernetes'
/// delegated authorization.
pub const PRIVILEGED_GROUP: &str = "system:masters";

impl Authorizer {
    pub fn new(kube: Arc<KubeAuthApi>, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        Self {
            kube,
            allowed_ttl,
            denied_ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub async fn authorize(&self, user: &User, attrs: &Attributes) -> Result<(), AuthError> {
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Ok(());
        }
        let key = (user.clone(), attrs.clone());
        let cached = {
            let c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            c.get(&key).and_then(|(at, ok, reason)| {
                let ttl = if *ok {
                    self.allowed_ttl
                } else {
                    self.denied_ttl
                };
                (at.elapsed() < ttl).then(|| (*ok, reason.clone()))
            })
        };
        let (ok, reason) = match cached {
            Some(v) => v,
            None => {
                let v = self.kube.access_review(user, attrs).await.map_err(|e| {
                    tracing::warn!(error = %e, "SubjectAccessReview failed");
                    AuthError::Unavailable("SubjectAccessReview failed".into())
                })?;
                let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                if c.len() > 10_000 {
                    c.clear();
                }
                c.insert(key, (Instant::now(), v.0, v.1.clone()));
                v
            }
        };
        if ok {
            return Ok(());
        }
        let what = match attrs {
            Attributes::Resource {
                group,
                namespace,
                resource,
                verb,
                ..
            } => format!(
                "{resource}.{group} is forbidden: User {:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {namespace:?}",
                user.name,
            ),
            Attributes::NonResource { path, verb } => {
                format!(
                    "forbidden: User {:?} cannot {verb} path {path:?}",
                    user.name
                )
            }
        };
        Err(AuthError::Forbidden(if reason.is_empty() {
            what
        } else {
            format!("{what}: {reason}")
        }))
    }
}
