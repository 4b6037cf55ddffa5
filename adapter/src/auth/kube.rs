//! The Kubernetes API calls the adapter makes: the authentication
//! ConfigMap, TokenReview, SubjectAccessReview and the pod lists behind
//! per-pod custom metrics.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};

use super::{Attributes, Review, User};

/// A failed call to the Kubernetes API.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("kubeconfig: {0}")]
    Config(String),
    #[error("kubernetes API: {0}")]
    Api(#[from] kube::Error),
}

/// The Kubernetes API client used for authentication and authorization.
#[derive(Clone)]
pub struct KubeAuthApi {
    client: kube::Client,
}

/// The client configuration from `--kubeconfig`, else the usual inference
/// (in-cluster, $KUBECONFIG).
pub async fn client_config(kubeconfig: Option<&Path>) -> Result<kube::Config, KubeError> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| KubeError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| KubeError::Config(e.to_string()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| KubeError::Config(e.to_string()))?,
    })
}

impl KubeAuthApi {
    /// From `--kubeconfig`, else the usual inference (in-cluster, $KUBECONFIG).
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Self, KubeError> {
        let config = client_config(kubeconfig).await?;
        let client = kube::Client::try_from(config).map_err(KubeError::Api)?;
        Ok(Self { client })
    }

    /// The client, for the scale-to-zero controller.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Data of `kube-system/extension-apiserver-authentication`.
    pub async fn auth_configmap(&self) -> Result<BTreeMap<String, String>, KubeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let cm = api.get("extension-apiserver-authentication").await?;
        Ok(cm.data.unwrap_or_default())
    }

    /// Names of the pods in `namespace` matching `selector` that are not
    /// finished (Succeeded or Failed pods no longer serve).
    pub async fn pod_names(
        &self,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<String>, KubeError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let list = api.list(&ListParams::default().labels(selector)).await?;
        let mut names: Vec<String> = list
            .items
            .into_iter()
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// Ask who a bearer token belongs to; `None` when not authenticated.
    pub async fn token_review(&self, token: &str) -> Result<Option<User>, KubeError> {
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let out = api.create(&PostParams::default(), &review).await?;
        let Some(status) = out.status else {
            return Ok(None);
        };
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        Ok(status.user.map(|u| User {
            name: u.username.unwrap_or_default(),
            uid: u.uid.unwrap_or_default(),
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default(),
        }))
    }

    /// Ask whether `user` may do `attrs`.
    pub async fn access_review(
        &self,
        user: &User,
        attrs: &Attributes,
    ) -> Result<Review, KubeError> {
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let (resource_attributes, non_resource_attributes) = match attrs {
            Attributes::Resource {
                group,
                version,
                namespace,
                resource,
                name,
                verb,
            } => (
                Some(ResourceAttributes {
                    group: Some(group.to_string()),
                    version: Some(version.to_string()),
                    resource: Some(resource.clone()),
                    namespace: Some(namespace.clone()),
                    name: (!name.is_empty()).then(|| name.clone()),
                    verb: Some(verb.clone()),
                    ..Default::default()
                }),
                None,
            ),
            Attributes::NonResource { path, verb } => (
                None,
                Some(NonResourceAttributes {
                    path: Some(path.clone()),
                    verb: Some(verb.clone()),
                }),
            ),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                resource_attributes,
                non_resource_attributes,
            },
            ..Default::default()
        };
        let out = api.create(&PostParams::default(), &review).await?;
        let status = out.status.unwrap_or_default();
        if status.allowed && status.denied != Some(true) {
            return Ok(Review::Allowed);
        }
        Ok(Review::Denied {
            reason: status.reason.unwrap_or_default(),
        })
    }
}
