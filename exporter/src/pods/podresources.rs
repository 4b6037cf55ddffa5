//! kubelet pod-resources API v1 client over its unix socket: which pod and
//! container holds which device.

use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

/// Code generated from `proto/podresources_v1.proto` by build.rs.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("v1");
}

use proto::pod_resources_lister_client::PodResourcesListerClient;

/// Resource names read by default; `nvidia.com/mig-*` covers every MIG profile.
pub const DEFAULT_RESOURCES: [&str; 2] = ["nvidia.com/gpu", "nvidia.com/mig-*"];

/// Which device-plugin resources are GPUs. A trailing `*` matches a prefix.
/// Also which DRA drivers' claimed devices are GPUs.
#[derive(Debug, Clone)]
pub struct ResourceFilter {
    names: Vec<String>,
    drivers: Vec<String>,
}

impl ResourceFilter {
    pub fn new(extra: &[String]) -> Self {
        let mut names: Vec<String> = DEFAULT_RESOURCES.iter().map(|s| (*s).to_owned()).collect();
        names.extend(extra.iter().filter(|e| !e.is_empty()).cloned());
        Self {
            names,
            drivers: vec![super::args::DEFAULT_DRA_DRIVER.to_owned()],
        }
    }

    /// The DRA drivers whose claimed devices are read (`--dra-driver`).
    pub fn with_drivers(mut self, drivers: &[String]) -> Self {
        self.drivers = drivers.iter().filter(|d| !d.is_empty()).cloned().collect();
        self
    }

    pub fn matches(&self, resource: &str) -> bool {
        self.names.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => resource.starts_with(prefix),
            None => resource == p,
        })
    }

    pub fn matches_driver(&self, driver: &str) -> bool {
        self.drivers.iter().any(|d| d == driver)
    }
}

/// A device ID as the NVIDIA device plugin reports it: `GPU-…`, `MIG-…`, or
/// a time-slicing replica `<uuid>::<n>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceId {
    pub uuid: String,
    pub replica: Option<u32>,
}

impl DeviceId {
    pub fn parse(id: &str) -> Self {
        match id.rsplit_once("::") {
            Some((uuid, n)) if n.parse::<u32>().is_ok() => Self {
                uuid: uuid.to_owned(),
                replica: n.parse().ok(),
            },
            _ => Self {
                uuid: id.to_owned(),
                replica: None,
            },
        }
    }
}

/// One device held by one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub resource: String,
    pub device: DeviceId,
}

/// One device a container holds through a DRA ResourceClaim. The kubelet
/// names it by (driver, pool, device); the node's ResourceSlices give its UUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimDevice {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub claim: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// DRA device sharing (`share_id`, Kubernetes 1.35+).
    pub share_id: Option<String>,
}

/// What the kubelet reported in one refresh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletSnapshot {
    pub allocations: Vec<Allocation>,
    /// Devices held through DRA claims of the configured drivers.
    pub claims: Vec<ClaimDevice>,
    /// Claimed devices of other DRA drivers (not GPUs to us; counted).
    pub other_driver_devices: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// The socket itself refused us: tonic would only say "transport error".
    #[error("{path}: {}", socket_hint(source))]
    Socket {
        path: String,
        source: std::io::Error,
    },
    #[error("connecting to {path}: {source}")]
    Connect {
        path: String,
        source: tonic::transport::Error,
    },
    #[error("pod-resources {call}: {status}")]
    Call {
        call: &'static str,
        status: tonic::Status,
    },
}

impl KubeletError {
    /// A short, stable reason for the `reason` label of
    /// `gpuscale_exporter_pod_mapping_up`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Socket { source, .. } => match source.kind() {
                std::io::ErrorKind::PermissionDenied => "permission_denied",
                std::io::ErrorKind::NotFound => "socket_missing",
                std::io::ErrorKind::ConnectionRefused => "connection_refused",
                _ => "connect_failed",
            },
            Self::Connect { .. } => "connect_failed",
            Self::Call { .. } => "call_failed",
        }
    }
}

fn socket_hint(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "permission denied ({e}): connecting needs write permission on the kubelet's \
             root-owned socket; run the exporter as uid 0 with all capabilities dropped"
        ),
        std::io::ErrorKind::NotFound => format!(
            "socket missing ({e}): mount the kubelet's pod-resources directory, or the kubelet is down"
        ),
        _ => e.to_string(),
    }
}

/// A client that reconnects after any failure (the kubelet recreates its
/// socket when it restarts, so a new connection is the only way back).
pub struct KubeletClient {
    path: PathBuf,
    client: Option<PodResourcesListerClient<Channel>>,
}

impl KubeletClient {
    pub fn new(path: PathBuf) -> Self {
        Self { path, client: None }
    }

    /// `List`, GPU resources only. (What is held is all the join needs;
    /// `GetAllocatableResources` would add a second call per refresh.)
    pub async fn fetch(
        &mut self,
        filter: &ResourceFilter,
    ) -> Result<KubeletSnapshot, KubeletError> {
        let result = self.fetch_once(filter).await;
        if result.is_err() {
            self.client = None;
        }
        result
    }

    async fn fetch_once(
        &mut self,
        filter: &ResourceFilter,
    ) -> Result<KubeletSnapshot, KubeletError> {
        let client = match &mut self.client {
            Some(c) => c,
            None => self.client.insert(self.connect().await?),
        };
        let list = client
            .list(proto::ListPodResourcesRequest {})
            .await
            .map_err(|status| KubeletError::Call {
                call: "List",
                status,
            })?
            .into_inner();
        Ok(snapshot(list, filter))
    }

    async fn connect(&self) -> Result<PodResourcesListerClient<Channel>, KubeletError> {
        // Dial once by hand so a refused socket names its cause and path.
        UnixStream::connect(&self.path)
            .await
            .map_err(|source| KubeletError::Socket {
                path: self.path.display().to_string(),
                source,
            })?;
        let path = self.path.clone();
        // The URI is required by the API but unused: the connector dials the socket.
        let channel = Endpoint::from_static("http://kubelet.sock")
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .connect_with_connector(tower::service_fn(move |_| {
                let path = path.clone();
                async move { UnixStream::connect(path).await.map(TokioIo::new) }
            }))
            .await
            .map_err(|source| KubeletError::Connect {
                path: self.path.display().to_string(),
                source,
            })?;
        Ok(PodResourcesListerClient::new(channel).max_decoding_message_size(16 << 20))
    }
}

fn snapshot(list: proto::ListPodResourcesResponse, filter: &ResourceFilter) -> KubeletSnapshot {
    let mut allocations = Vec::new();
    let mut claims = Vec::new();
    let mut other_driver_devices = 0;
    for pod in list.pod_resources {
        for container in pod.containers {
            for claim in &container.dynamic_resources {
                for r in &claim.claim_resources {
                    if !filter.matches_driver(&r.driver_name) {
                        other_driver_devices += 1;
                        continue;
                    }
                    claims.push(ClaimDevice {
                        // A claim lives in its pod's namespace; older kubelets may leave it unset.
                        namespace: pod.namespace.clone(),
                        pod: pod.name.clone(),
                        container: container.name.clone(),
                        claim: claim.claim_name.clone(),
                        driver: r.driver_name.clone(),
                        pool: r.pool_name.clone(),
                        device: r.device_name.clone(),
                        share_id: r.share_id.clone(),
                    });
                }
            }
            for devices in container
                .devices
                .iter()
                .filter(|d| filter.matches(&d.resource_name))
            {
                for id in &devices.device_ids {
                    allocations.push(Allocation {
                        namespace: pod.namespace.clone(),
                        pod: pod.name.clone(),
                        container: container.name.clone(),
                        resource: devices.resource_name.clone(),
                        device: DeviceId::parse(id),
                    });
                }
            }
        }
    }
    KubeletSnapshot {
        allocations,
        claims,
        other_driver_devices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids() {
        assert_eq!(
            DeviceId::parse("GPU-a"),
            DeviceId {
                uuid: "GPU-a".into(),
                replica: None
            }
        );
        assert_eq!(
            DeviceId::parse("GPU-a::3"),
            DeviceId {
                uuid: "GPU-a".into(),
                replica: Some(3)
            }
        );
        assert_eq!(
            DeviceId::parse("MIG-b::0"),
            DeviceId {
                uuid: "MIG-b".into(),
                replica: Some(0)
            }
        );
        assert_eq!(
            DeviceId::parse("x::y"),
            DeviceId {
                uuid: "x::y".into(),
                replica: None
            }
        );
    }

    #[test]
    fn resource_filter() {
        let f = ResourceFilter::new(&["nvidia.com/gpu.shared".into()]);
        assert!(f.matches("nvidia.com/gpu"));
        assert!(f.matches("nvidia.com/mig-1g.10gb"));
        assert!(f.matches("nvidia.com/gpu.shared"));
        assert!(!f.matches("example.com/fpga"));
        assert!(!f.matches("nvidia.com/gpu-other"));
    }

    #[test]
    fn snapshot_keeps_gpu_resources_with_their_replica() {
        let dev = |r: &str, ids: &[&str]| proto::ContainerDevices {
            resource_name: r.into(),
            device_ids: ids.iter().map(|s| s.to_string()).collect(),
            topology: None,
        };
        let list = proto::ListPodResourcesResponse {
            pod_resources: vec![proto::PodResources {
                name: "p".into(),
                namespace: "ns".into(),
                containers: vec![proto::ContainerResources {
                    name: "c".into(),
                    devices: vec![
                        dev("nvidia.com/gpu", &["GPU-a::1"]),
                        dev("example.com/nic", &["eth1"]),
                    ],
                    ..Default::default()
                }],
            }],
        };
        let s = snapshot(list, &ResourceFilter::new(&[]));
        assert_eq!(s.allocations.len(), 1);
        assert_eq!(
            s.allocations[0].device,
            DeviceId {
                uuid: "GPU-a".into(),
                replica: Some(1)
            }
        );
    }

    #[test]
    fn snapshot_reads_claims_of_configured_drivers() {
        let res = |driver: &str, device: &str, share: Option<&str>| proto::ClaimResource {
            cdi_devices: vec![proto::CdiDevice {
                name: format!("k8s.{driver}/claim=uid-{device}"),
            }],
            driver_name: driver.into(),
            pool_name: "node-1".into(),
            device_name: device.into(),
            share_id: share.map(str::to_owned),
        };
        let list = proto::ListPodResourcesResponse {
            pod_resources: vec![proto::PodResources {
                name: "p".into(),
                namespace: "ns".into(),
                containers: vec![proto::ContainerResources {
                    name: "c".into(),
                    dynamic_resources: vec![proto::DynamicResource {
                        claim_name: "gpus".into(),
                        claim_namespace: "ns".into(),
                        claim_resources: vec![
                            res("gpu.nvidia.com", "gpu-0", None),
                            res("gpu.nvidia.com", "gpu-1", Some("s-1")),
                            res("net.example.com", "eth1", None),
                        ],
                    }],
                    ..Default::default()
                }],
            }],
        };
        let s = snapshot(list, &ResourceFilter::new(&[]));
        assert_eq!(s.other_driver_devices, 1);
        let devices: Vec<_> = s.claims.iter().map(|c| c.device.as_str()).collect();
        assert_eq!(devices, ["gpu-0", "gpu-1"]);
        assert_eq!(s.claims[1].share_id.as_deref(), Some("s-1"));
        assert_eq!(
            (s.claims[0].claim.as_str(), s.claims[0].pool.as_str()),
            ("gpus", "node-1")
        );
    }
}

#[cfg(test)]
mod socket_error_tests {
    use super::*;

    #[test]
    fn a_missing_socket_names_its_path_and_reason() {
        let path =
            std::env::temp_dir().join(format!("gpuscale-absent-{}.sock", std::process::id()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut client = KubeletClient::new(path.clone());
        let err = rt
            .block_on(client.fetch(&ResourceFilter::new(&[])))
            .expect_err("no socket");
        assert_eq!(err.reason(), "socket_missing");
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("socket missing"), "{text}");
    }

    #[test]
    fn permission_denied_says_so_with_the_fix() {
        let err = KubeletError::Socket {
            path: "/var/lib/kubelet/pod-resources/kubelet.sock".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(err.reason(), "permission_denied");
        let text = err.to_string();
        assert!(
            text.starts_with("/var/lib/kubelet/pod-resources/kubelet.sock: permission denied"),
            "{text}"
        );
        assert!(text.contains("uid 0"), "{text}");
    }
}
