//! The world the adapter's end-to-end suites start from: a kept temp dir,
//! a serving CA with the adapter's serving pair, the cluster's client CA
//! and the front-proxy CA, the Kubernetes API fake's authentication
//! ConfigMap and RBAC, and adapters started against the shared Prometheus
//! with those files.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::client::{self, Adapter, Identity};
use super::kubefake::{Cluster, KubeFake, SarPolicy};
use super::pki::{Ca, Leaf};
use super::prom;
use crate::write_file;

/// The HPA controller's service account, as the aggregator names it.
pub const HPA_USER: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";

/// The certificates and the directory of one suite's world.
pub struct Pki {
    /// Kept until the adapter started with `clean` exits (the worlds live
    /// in statics, which are never dropped).
    pub dir: PathBuf,
    /// The CA clients trust for the adapter's serving certificate.
    pub serving_ca: PathBuf,
    /// The cluster's client CA (kubectl users).
    pub clients: Ca,
    /// The aggregator's front-proxy (request-header) CA.
    pub front: Ca,
    tls_cert: PathBuf,
    tls_key: PathBuf,
}

impl Pki {
    /// New CAs and serving pair in a temp dir named `prefix…`.
    pub fn new(prefix: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .expect("tempdir")
            .keep();
        let serving = Ca::new("serving-ca");
        let server = serving.server();
        Self {
            serving_ca: write_file(&dir, "serving-ca.crt", &serving.pem()),
            tls_cert: write_file(&dir, "tls.crt", &server.cert_pem),
            tls_key: write_file(&dir, "tls.key", &server.key_pem),
            clients: Ca::new("cluster-client-ca"),
            front: Ca::new("front-proxy-ca"),
            dir,
        }
    }

    /// Writes `text` as `name` in the world's directory.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        write_file(&self.dir, name, text)
    }

    /// `--tls-cert-file` and `--tls-key-file` for the serving pair.
    pub fn tls_flags(&self) -> [String; 2] {
        [
            format!("--tls-cert-file={}", self.tls_cert.display()),
            format!("--tls-key-file={}", self.tls_key.display()),
        ]
    }

    /// A cluster whose `extension-apiserver-authentication` ConfigMap names
    /// these CAs, allows the front proxy `front-proxy-client` and its
    /// `X-Remote-*` headers, knows `tokens` and decides reviews by `sar`.
    pub fn cluster(
        &self,
        tokens: BTreeMap<String, (String, Vec<String>)>,
        sar: SarPolicy,
    ) -> Cluster {
        let cm = [
            ("client-ca-file", self.clients.pem()),
            ("requestheader-client-ca-file", self.front.pem()),
            (
                "requestheader-allowed-names",
                r#"["front-proxy-client"]"#.into(),
            ),
            (
                "requestheader-username-headers",
                r#"["X-Remote-User"]"#.into(),
            ),
            (
                "requestheader-group-headers",
                r#"["X-Remote-Group"]"#.into(),
            ),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#.into(),
            ),
        ];
        Cluster {
            auth_configmap: cm.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            tokens,
            sar,
        }
    }

    /// A certificate identity written as `name.crt` and `name.key`.
    pub fn identity(&self, name: &str, leaf: &Leaf) -> Identity {
        Identity {
            cert: Some(self.write(&format!("{name}.crt"), &leaf.cert_pem)),
            key: Some(self.write(&format!("{name}.key"), &leaf.key_pem)),
            ..Identity::default()
        }
    }

    /// A kubeconfig named `name` for `adapter` as `who`.
    pub fn kubeconfig(&self, name: &str, adapter: &Adapter, who: &Identity) -> PathBuf {
        client::kubeconfig(&self.dir, name, &adapter.url(), &self.serving_ca, who)
    }

    /// Starts the adapter named `name` (its `name.yaml` config and
    /// `name.log`) with the serving pair, `kube` as its cluster, the shared
    /// Prometheus polled every second, and `extra` flags. `clean`: the
    /// directory goes when this adapter's process exits.
    pub fn adapter(
        &self,
        name: &str,
        kube: &KubeFake,
        config: &str,
        extra: &[String],
        clean: bool,
    ) -> Adapter {
        self.adapter_on(name, kube, config, &prom::shared().url, extra, clean)
    }

    /// [`Pki::adapter`] reading the Prometheus-compatible API at
    /// `prometheus_url` instead of the shared Prometheus.
    pub fn adapter_on(
        &self,
        name: &str,
        kube: &KubeFake,
        config: &str,
        prometheus_url: &str,
        extra: &[String],
        clean: bool,
    ) -> Adapter {
        let kubeconfig = self.write(&format!("{name}-kubeconfig"), &kube.kubeconfig());
        let config = self.write(&format!("{name}.yaml"), config);
        let mut args = self.tls_flags().to_vec();
        args.extend([
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--config={}", config.display()),
            format!("--prometheus-url={prometheus_url}"),
            "--poll-interval=1s".into(),
        ]);
        args.extend_from_slice(extra);
        let log = self.dir.join(format!("{name}.log"));
        let mut adapter = Adapter::start_cleaning(&args, log, clean.then_some(self.dir.as_path()));
        adapter.ca = Some(self.serving_ca.clone());
        adapter
    }
}

/// RBAC of the suites' cluster: non-resource URLs (discovery) are open to
/// every authenticated user; the HPA and `readers` read every namespace;
/// alice every namespace but `secret`; nobody else anything.
pub fn rbac(readers: &'static [&'static str]) -> SarPolicy {
    Arc::new(move |spec: &Value| {
        if spec
            .get("nonResourceAttributes")
            .is_some_and(|v| !v.is_null())
        {
            return (true, "discovery is public to authenticated users".into());
        }
        let ns = spec["resourceAttributes"]["namespace"]
            .as_str()
            .unwrap_or("");
        let allowed = match spec["user"].as_str().unwrap_or("") {
            HPA_USER => true,
            "alice" => ns != "secret",
            user => readers.contains(&user),
        };
        (
            allowed,
            if allowed {
                "RBAC: allowed".into()
            } else {
                String::new()
            },
        )
    })
}
