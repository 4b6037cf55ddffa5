//! A fake kubelet: the pod-resources v1 gRPC service on a unix socket, with
//! the same protocol and the same socket lifecycle as the real one (the
//! socket file disappears when it stops and is recreated when it starts).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::net::UnixListener;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

use super::proto::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};
use super::proto::{
    AllocatableResourcesRequest, AllocatableResourcesResponse, GetPodResourcesRequest,
    GetPodResourcesResponse, ListPodResourcesRequest, ListPodResourcesResponse,
};

/// What the fake kubelet answers.
#[derive(Debug, Clone, Default)]
pub struct KubeletData {
    pub list: ListPodResourcesResponse,
    pub allocatable: AllocatableResourcesResponse,
}

#[derive(Clone)]
struct Service(Arc<Mutex<KubeletData>>);

impl Service {
    fn data(&self) -> KubeletData {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[tonic::async_trait]
impl PodResourcesLister for Service {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        Ok(Response::new(self.data().list))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        Ok(Response::new(self.data().allocatable))
    }

    async fn get(
        &self,
        req: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        let req = req.into_inner();
        self.data()
            .list
            .pod_resources
            .into_iter()
            .find(|p| p.name == req.pod_name && p.namespace == req.pod_namespace)
            .map(|p| {
                Response::new(GetPodResourcesResponse {
                    pod_resources: Some(p),
                })
            })
            .ok_or_else(|| {
                Status::not_found(format!(
                    "pod {}/{} not found",
                    req.pod_namespace, req.pod_name
                ))
            })
    }
}

pub struct FakeKubelet {
    path: PathBuf,
    data: Arc<Mutex<KubeletData>>,
    stop: Option<oneshot::Sender<()>>,
    rt: tokio::runtime::Handle,
}

impl FakeKubelet {
    /// Serves `data` on a new socket at `path`.
    pub fn start(
        path: &Path,
        data: KubeletData,
        rt: &tokio::runtime::Handle,
    ) -> std::io::Result<Self> {
        let mut kubelet = Self {
            path: path.to_owned(),
            data: Arc::new(Mutex::new(data)),
            stop: None,
            rt: rt.clone(),
        };
        kubelet.resume()?;
        Ok(kubelet)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn set(&self, data: KubeletData) {
        *self.data.lock().unwrap_or_else(|e| e.into_inner()) = data;
    }

    pub fn update(&self, f: impl FnOnce(&mut KubeletData)) {
        f(&mut self.data.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn is_running(&self) -> bool {
        self.stop.is_some()
    }

    /// Like a kubelet going down: connections closed, socket file removed.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = std::fs::remove_file(&self.path);
    }

    /// Like a kubelet (re)starting: a fresh socket at the same path.
    pub fn resume(&mut self) -> std::io::Result<()> {
        if self.stop.is_some() {
            return Ok(());
        }
        let _ = std::fs::remove_file(&self.path);
        let _guard = self.rt.enter();
        let listener = UnixListener::bind(&self.path)?;
        let (tx, rx) = oneshot::channel::<()>();
        let incoming = futures::stream::unfold(listener, |l| async move {
            let conn = l.accept().await.map(|(stream, _)| stream);
            Some((conn, l))
        });
        let service = PodResourcesListerServer::new(Service(self.data.clone()));
        self.rt.spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "simulated kubelet stopped");
            }
        });
        self.stop = Some(tx);
        Ok(())
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.stop();
    }
}
