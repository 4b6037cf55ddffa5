//! Authentication and authorization as an aggregated API server.
//!
//! - `authn`: request-header client certificates (front proxy), client-CA
//!   certificates, bearer tokens through TokenReview;
//! - `authz`: SubjectAccessReview with a TTL cache;
//! - `kube`: the only module that talks to the Kubernetes API.

pub mod authn;
pub mod authz;
pub mod kube;
pub mod sources;
pub mod x509;

use std::collections::BTreeMap;

pub use authn::Authenticator;
pub use authz::Authorizer;
pub use kube::KubeAuthApi;
pub use sources::{CertSources, RequestHeaderConfig, SharedSources, SourceFlags};

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

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

/// What a SubjectAccessReview answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    Allowed,
    /// Not allowed (denied, or no authorizer had an opinion), with the
    /// authorizer's reason (may be empty).
    Denied {
        reason: String,
    },
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// 401.
    #[error("Unauthorized: {0}")]
    Unauthorized(String),
    /// 403.
    #[error("{0}")]
    Forbidden(String),
    /// 503: the Kubernetes API could not be asked.
    #[error("authorization unavailable: {0}")]
    Unavailable(String),
}
