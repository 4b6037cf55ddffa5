//! May this user do this: SubjectAccessReview, cached with a TTL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::kube::KubeAuthApi;
use super::{Attributes, AuthError, Review, User};

/// A cached review and when it was made.
struct Decision {
    at: Instant,
    review: Review,
}

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

/// Reviews kept at most; past this the cache starts over (a flood of
/// distinct users cannot grow it without bound).
const MAX_CACHED: usize = 10_000;

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
        let review = match self.cached(&key) {
            Some(review) => review,
            None => self.review(key).await?,
        };
        match review {
            Review::Allowed => Ok(()),
            Review::Denied { reason } => Err(forbidden(user, attrs, &reason)),
        }
    }

    /// A review still within its TTL (allowed and denied ones have their own).
    fn cached(&self, key: &(User, Attributes)) -> Option<Review> {
        let c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let d = c.get(key)?;
        let ttl = match d.review {
            Review::Allowed => self.allowed_ttl,
            Review::Denied { .. } => self.denied_ttl,
        };
        (d.at.elapsed() < ttl).then(|| d.review.clone())
    }

    /// Ask the Kubernetes API and remember the answer.
    async fn review(&self, key: (User, Attributes)) -> Result<Review, AuthError> {
        let review = self.kube.access_review(&key.0, &key.1).await.map_err(|e| {
            tracing::warn!(error = %e, "SubjectAccessReview failed");
            AuthError::Unavailable("SubjectAccessReview failed".into())
        })?;
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if c.len() > MAX_CACHED {
            c.clear();
        }
        let at = Instant::now();
        c.insert(
            key,
            Decision {
                at,
                review: review.clone(),
            },
        );
        Ok(review)
    }
}

/// The 403 message Kubernetes itself gives, with the authorizer's reason.
fn forbidden(user: &User, attrs: &Attributes, reason: &str) -> AuthError {
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
    AuthError::Forbidden(if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    })
}
