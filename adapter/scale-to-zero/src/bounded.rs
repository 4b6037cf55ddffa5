//! Every Kubernetes call of the controller but the Lease's (which has its
//! own deadlines) runs under one timeout: its own module, so the modules
//! that make calls and the controller's context do not import each other.

use std::time::Duration;

/// The longest any Kubernetes call of the controller may take (the Lease
/// has its own deadlines): a call that hangs fails the round, which is
/// retried with backoff, instead of freezing the policy's reconcile.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);

/// `call`, failed with a timeout error after [`API_TIMEOUT`].
pub async fn bounded<T>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, kube::Error> {
    match tokio::time::timeout(API_TIMEOUT, call).await {
        Ok(r) => r,
        Err(_) => Err(kube::Error::Service(
            format!("{what}: no answer from the Kubernetes API within {API_TIMEOUT:?}").into(),
        )),
    }
}
