//! The Kubernetes API calls the adapter makes: the authentication
//! ConfigMap, TokenReview and SubjectAccessReview.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

use super::User;
use super::authz::Attributes;

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

impl KubeAuthApi {
    /// From `--kubeconfig`, else the usual inference (in-cluster, $KUBECONFIG).
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Self, KubeError> {
        let config = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| KubeError::Config(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(
                    kc,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| KubeError::Config(e.to_string()))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| KubeError::Config(e.to_string()))?,
        };
        let client = kube::Client::try_from(config).map_err(KubeError::Api)?;
        Ok(Self { client })
    }

    /// Data of `kube-system/extension-apiserver-authentication`.
    pub async fn auth_configmap(&self) -> Result<BTreeMap<String, String>, KubeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let cm = api.get("extension-apiserver-authentication").await?;
        Ok(cm.data.unwrap_or_default())
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

    /// Ask whether `user` may do `attrs`: (allowed, reason).
    pub async fn access_review(
        &self,
        user: &User,
        attrs: &Attributes,
    ) -> Result<(bool, String), KubeError> {
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let (resource_attributes, non_resource_attributes) = match attrs {
            Attributes::Resource {
                namespace,
                resource,
                verb,
            } => (
                Some(ResourceAttributes {
                    group: Some(crate::api::GROUP.into()),
                    version: Some(crate::api::VERSION.into()),
                    resource: Some(resource.clone()),
                    namespace: Some(namespace.clone()),
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
        let reason = status.reason.unwrap_or_default();
        Ok((status.allowed && status.denied != Some(true), reason))
    }
}
