//! The adapter's self-managed serving certificate on the simulated cluster:
//! two real `gpuscale-adapter` replicas started at once share one Secret
//! (one creates it, the other reads the winner's), put its CA in the
//! `caBundle` of the APIServices named and backed by their Service (only
//! those), and rotate within seconds (10 s certificates renewed 6 s before
//! their end). A poller checks throughout, as the aggregator would, that
//! each replica's served certificate verifies against the APIService's
//! bundle as read just before the handshake: it never fails, through two
//! rotations and the old CA's leaving.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::adapter::world::{self, Pki};
use gpuscale_e2e::kubeapi::{Gvr, KubeFake, core};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

const NS: &str = "gpuscale";
const SERVICE: &str = "gpuscale-adapter";
const SECRET: &str = "gpuscale-adapter-tls";
/// The name the aggregator dials.
const DNS: &str = "gpuscale-adapter.gpuscale.svc";
const OURS: &str = "v1beta1.external.metrics.k8s.io";
/// Named but backed by another Service: never touched.
const THEIRS: &str = "v1beta1.custom.metrics.k8s.io";
/// Backed by the adapter's Service but not named: never touched.
const UNNAMED: &str = "v1beta2.custom.metrics.k8s.io";

fn apiservices() -> Gvr {
    (
        "apiregistration.k8s.io".into(),
        "v1".into(),
        "apiservices".into(),
    )
}

fn apiservice(name: &str, ns: &str, svc: &str, ca_bundle: Option<&str>) -> Value {
    let (version, group) = name.split_once('.').expect("version.group");
    let mut spec = json!({"group": group, "version": version,
        "service": {"namespace": ns, "name": svc, "port": 443},
        "groupPriorityMinimum": 100, "versionPriority": 100});
    if let Some(b) = ca_bundle {
        spec["caBundle"] = json!(b);
    }
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name}, "spec": spec})
}

fn replica(pki: &Pki, kube: &KubeFake, name: &str) -> Adapter {
    let kc = pki.write(&format!("{name}-kubeconfig"), &kube.kubeconfig());
    let args = [
        format!("--kubeconfig={}", kc.display()),
        // Nothing queries it: no metric is read here.
        "--prometheus-url=http://127.0.0.1:9".into(),
        format!("--self-signed-tls-secret={NS}/{SECRET}"),
        format!("--self-signed-tls-service={NS}/{SERVICE}"),
        format!("--self-signed-tls-apiservices={OURS},{THEIRS}"),
        "--self-signed-tls-validity=10s".into(),
        "--self-signed-tls-renew-before=6s".into(),
        "--tls-reload-interval=200ms".into(),
    ];
    Adapter::start(&args, pki.dir.join(format!("{name}.log")))
}

/// The APIService's `caBundle` as PEM (empty when unset).
fn bundle(kube: &KubeFake, name: &str) -> String {
    let obj = kube.get(&apiservices(), "", name).expect("APIService");
    let b64 = obj["spec"]["caBundle"].as_str().unwrap_or_default();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("caBundle is base64");
    String::from_utf8(pem).expect("caBundle is PEM")
}

/// A handshake with `port` trusting only `bundle`, for the Service's name:
/// the certificate served, or why it does not verify.
fn served(port: u16, bundle: &str) -> Result<CertificateDer<'static>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let cas = gpuscale_adapter::tls::parse_certs("caBundle", bundle).map_err(|e| e.to_string())?;
    for ca in cas {
        roots.add(ca).map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(DNS).map_err(|e| e.to_string())?;
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), name).map_err(|e| e.to_string())?;
    let mut sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let limit = Some(Duration::from_secs(10));
    sock.set_read_timeout(limit).map_err(|e| e.to_string())?;
    sock.set_write_timeout(limit).map_err(|e| e.to_string())?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(|e| e.to_string())?;
    }
    let chain = conn.peer_certificates().ok_or("no certificate served")?;
    Ok(chain[0].clone().into_owned())
}

/// What the poller saw.
#[derive(Default)]
struct Seen {
    /// Each distinct bundle, in order.
    bundles: Vec<String>,
    /// Certificates served, per replica, in order of first sight.
    certs: BTreeMap<u16, Vec<CertificateDer<'static>>>,
    failures: Vec<String>,
}

impl Seen {
    /// Two rotations: three certificates from each replica, and a bundle
    /// that no longer holds the first CA.
    fn done(&self) -> bool {
        let rotated = self.certs.len() == 2 && self.certs.values().all(|c| c.len() >= 3);
        let first = self.bundles.first().map(String::as_str).unwrap_or_default();
        let dropped = self.bundles.iter().any(|b| !b.contains(first.trim_end()));
        rotated && dropped
    }
}

#[test]
fn replicas_share_one_secret_and_rotate_without_a_moment_of_distrust() {
    let pki = Pki::new("gpuscale-self-tls-");
    let kube = KubeFake::start(pki.cluster(BTreeMap::new(), world::rbac(&[])));
    kube.put(&apiservices(), apiservice(OURS, NS, SERVICE, None));
    let theirs = apiservice(THEIRS, "monitoring", "prometheus-adapter", Some("dGhlaXJz"));
    kube.put(&apiservices(), theirs);
    kube.put(&apiservices(), apiservice(UNNAMED, NS, SERVICE, None));
    // Both at once: one creates the Secret, the other reads the winner's.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| replica(&pki, &kube, "a"));
        let b = s.spawn(|| replica(&pki, &kube, "b"));
        (a.join().expect("replica a"), b.join().expect("replica b"))
    });
    let secret = kube.get(&core("secrets"), NS, SECRET).expect("the Secret");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let keys: BTreeSet<&str> = secret["data"]
        .as_object()
        .expect("data")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["ca.crt", "ca.key", "tls.crt", "tls.key"])
    );
    // Until its bundle is set the APIService trusts nothing (a real
    // aggregator reports it unavailable): wait for that, bounded.
    let deadline = Instant::now() + Duration::from_secs(30);
    while bundle(&kube, OURS).is_empty() {
        assert!(Instant::now() < deadline, "the caBundle was never set");
        std::thread::sleep(Duration::from_millis(50));
    }
    let first = (
        served(a.port, &bundle(&kube, OURS)),
        served(b.port, &bundle(&kube, OURS)),
    );
    assert!(
        first.0.is_ok() && first.0 == first.1,
        "one Secret, one certificate: {first:?}"
    );

    let mut seen = Seen::default();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(25);
    while !seen.done() && Instant::now() < deadline {
        let pem = bundle(&kube, OURS);
        if seen.bundles.last() != Some(&pem) {
            seen.bundles.push(pem.clone());
        }
        for port in [a.port, b.port] {
            match served(port, &pem) {
                Ok(cert) => {
                    let certs = seen.certs.entry(port).or_default();
                    if certs.last() != Some(&cert) {
                        certs.push(cert);
                    }
                }
                Err(e) => seen.failures.push(format!(
                    "{:?} after the start, replica on {port}: {e}",
                    start.elapsed()
                )),
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        seen.failures.is_empty(),
        "the bundle did not verify the served certificate: {:?}\nlogs:\n{}\n{}",
        seen.failures,
        a.guard.log_text(),
        b.guard.log_text()
    );
    assert!(
        seen.done(),
        "two rotations within 25 s: {} bundles, certificates per replica {:?}",
        seen.bundles.len(),
        seen.certs.values().map(Vec::len).collect::<Vec<_>>()
    );
    assert!(
        seen.bundles
            .iter()
            .any(|b| b.matches("BEGIN CERTIFICATE").count() == 2)
    );
    assert_eq!(
        bundle(&kube, THEIRS),
        "theirs",
        "another Service's APIService"
    );
    assert_eq!(bundle(&kube, UNNAMED), "", "an APIService not named");
}
