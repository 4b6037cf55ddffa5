//! The adapter's self-managed serving certificate on the simulated cluster:
//! two real `gpuscale-adapter` replicas started at once share one Secret
//! (one creates it, the other reads the winner's), put its CA in the
//! `caBundle` of the APIServices named and backed by their Service (only
//! those), and rotate within seconds (14 s certificates renewed 9 s before
//! their end: a replica may stall 7 s without serving an expired one). A
//! poller checks throughout, as the aggregator would, that each replica's
//! served certificate verifies against the APIService's bundle, unchanged
//! from just before the handshake to just after: it never fails, through
//! two rotations and the old CA's leaving.

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
        "--self-signed-tls-validity=14s".into(),
        "--self-signed-tls-renew-before=9s".into(),
        "--tls-reload-interval=200ms".into(),
    ];
    Adapter::start(&args, pki.dir.join(format!("{name}.log")))
}

/// The APIService's `caBundle` as PEM (empty when unset).
fn bundle(kube: &KubeFake, name: &str) -> String {
    bundle_at(kube, name).0
}

/// The APIService's `caBundle` and its resourceVersion.
fn bundle_at(kube: &KubeFake, name: &str) -> (String, Value) {
    let obj = kube.get(&apiservices(), "", name).expect("APIService");
    let b64 = obj["spec"]["caBundle"].as_str().unwrap_or_default();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("caBundle is base64");
    let pem = String::from_utf8(pem).expect("caBundle is PEM");
    (pem, obj["metadata"]["resourceVersion"].clone())
}

/// The Secret's `tls.crt`.
fn secret_cert(kube: &KubeFake) -> CertificateDer<'static> {
    let s = kube.get(&core("secrets"), NS, SECRET).expect("the Secret");
    let b64 = s["data"]["tls.crt"].as_str().expect("tls.crt");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    let pem = String::from_utf8(pem).expect("PEM");
    let certs = gpuscale_adapter::tls::parse_certs("tls.crt", &pem).expect("tls.crt");
    certs[0].clone()
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

/// Polls until two rotations were seen (bounded): each round reads the
/// APIService's bundle, then handshakes with each replica against it.
fn poll(kube: &KubeFake, ports: [u16; 2]) -> Seen {
    let mut seen = Seen::default();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(40);
    while !seen.done() && Instant::now() < deadline {
        for port in ports {
            let (pem, version) = bundle_at(kube, OURS);
            if seen.bundles.last() != Some(&pem) {
                seen.bundles.push(pem.clone());
            }
            let handshake = served(port, &pem);
            if bundle_at(kube, OURS).1 != version {
                continue; // changed meanwhile: which one held is unknown
            }
            match handshake {
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
    seen
}

/// The Secret the chart renders (labels aside): no data.
fn blank_secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": SECRET, "namespace": NS}})
}

#[test]
fn replicas_share_one_secret_and_rotate_without_a_moment_of_distrust() {
    let pki = Pki::new("gpuscale-self-tls-");
    let kube = KubeFake::start(pki.cluster(BTreeMap::new(), world::rbac(&[])));
    kube.put(&apiservices(), apiservice(OURS, NS, SERVICE, None));
    let theirs = apiservice(THEIRS, "monitoring", "prometheus-adapter", Some("dGhlaXJz"));
    kube.put(&apiservices(), theirs);
    kube.put(&apiservices(), apiservice(UNNAMED, NS, SERVICE, None));
    // The Secret as the chart creates it: blank, for the adapter to fill.
    kube.put(&core("secrets"), blank_secret());
    // Both at once: one fills the Secret, the other reads the winner's.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| replica(&pki, &kube, "a"));
        let b = s.spawn(|| replica(&pki, &kube, "b"));
        (a.join().expect("replica a"), b.join().expect("replica b"))
    });
    let secret = kube.get(&core("secrets"), NS, SECRET).expect("the Secret");
    assert_eq!(secret["type"], "Opaque", "the chart's Secret, filled");
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
    // Both serve the Secret's certificate (bounded: a rotation may land
    // between the two handshakes).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (pem, want) = (bundle(&kube, OURS), secret_cert(&kube));
        let both = [a.port, b.port].map(|p| served(p, &pem));
        if both.iter().all(|c| c.as_ref() == Ok(&want)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "one Secret, one certificate: {both:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let seen = poll(&kube, [a.port, b.port]);
    assert!(
        seen.failures.is_empty(),
        "the bundle did not verify the served certificate: {:?}\nlogs:\n{}\n{}",
        seen.failures,
        a.guard.log_text(),
        b.guard.log_text()
    );
    assert!(
        seen.done(),
        "two rotations within 40 s: {} bundles, certificates per replica {:?}",
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

/// The hand-made path: `make-tls.sh` with real kubectl fills the
/// `caBundle` of every APIService backed by the adapter's Service (never
/// another server's), and a second run reuses the CA: the bundle does not
/// move, the new certificate verifies against it.
#[test]
fn make_tls_fills_every_adapter_apiservice_and_keeps_its_ca() {
    let kube = KubeFake::start(gpuscale_e2e::kubeapi::Cluster::default());
    kube.put(&core("namespaces"), json!({"metadata": {"name": NS}}));
    for name in [OURS, THEIRS, UNNAMED] {
        kube.put(&apiservices(), apiservice(name, NS, SERVICE, None));
    }
    let keda = "v1beta1.keda.example.com";
    kube.put(
        &apiservices(),
        apiservice(keda, "keda", "keda-metrics", Some("a2VkYQ==")),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("kubeconfig");
    kube.write_kubeconfig(&kc).expect("kubeconfig");
    let script = gpuscale_e2e::bins::repo_root().join("deploy/overlays/provided-tls/make-tls.sh");
    let run = || {
        gpuscale_e2e::deploy::stdout_of(
            std::process::Command::new(&script)
                .args(["--namespace", NS, "--days", "30"])
                .env("KUBECONFIG", &kc)
                .env("HOME", dir.path()),
            "kubectl and openssl",
        )
    };
    let tls_crt = |kube: &KubeFake| {
        let s = kube
            .get(&core("secrets"), NS, "gpuscale-adapter-tls")
            .expect("tls Secret");
        let b64 = s["data"]["tls.crt"].as_str().expect("tls.crt").to_string();
        let pem = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64");
        String::from_utf8(pem).expect("PEM")
    };
    let verifies = |bundle: &str, crt: &str| {
        let (b, c) = (dir.path().join("bundle.pem"), dir.path().join("tls.pem"));
        std::fs::write(&b, bundle).expect("write");
        std::fs::write(&c, crt).expect("write");
        let out = std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .args([&b, &c])
            .output()
            .expect("openssl");
        out.status.success()
    };
    let first = run();
    assert!(first.contains("made a new CA"), "{first}");
    let bundles = |kube: &KubeFake| [OURS, THEIRS, UNNAMED].map(|n| bundle(kube, n));
    let once = bundles(&kube);
    assert!(
        !once[0].is_empty() && once.iter().all(|b| *b == once[0]),
        "{once:?}"
    );
    assert_eq!(bundle(&kube, keda), "keda", "another server's APIService");
    let crt = tls_crt(&kube);
    assert!(verifies(&once[0], &crt));
    let second = run();
    assert!(second.contains("reusing the CA"), "{second}");
    assert_eq!(bundles(&kube), once, "the CA is reused: the bundle stays");
    let renewed = tls_crt(&kube);
    assert_ne!(renewed, crt, "a new certificate");
    assert!(verifies(&once[0], &renewed));
}

/// The chart without cert-manager and without a Secret given: the adapter
/// manages its certificate, with RBAC for its one Secret and for this
/// release's APIServices only (none when it registers none); the
/// renderings validate for Kubernetes 1.33 and 1.37.
#[test]
fn the_chart_without_cert_manager_lets_the_adapter_manage_its_certificate() {
    use gpuscale_e2e::deploy::{helm_render, objects, write};
    let render = |apis: Value| {
        let values = json!({"adapter": {"tls": {"certManager": false}, "apiServices": apis}});
        helm_render(&values, "gpuscale", NS).expect("render")
    };
    let all = render(json!({}));
    let objs = objects(&all);
    let find = |kind: &str, name: &str| {
        objs.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    };
    let pod = &find("Deployment", SERVICE)["spec"]["template"]["spec"];
    let args = pod["containers"][0]["args"].to_string();
    for want in [
        "--self-signed-tls-secret=gpuscale/gpuscale-adapter-tls",
        "--self-signed-tls-service=gpuscale/gpuscale-adapter",
        "--self-signed-tls-apiservices=v1beta1.external.metrics.k8s.io,v1beta2.custom.metrics.k8s.io,v1beta1.custom.metrics.k8s.io",
    ] {
        assert!(args.contains(want), "{want} in {args}");
    }
    assert!(!args.contains("--tls-cert-file"), "{args}");
    assert!(!pod["volumes"].to_string().contains("gpuscale-adapter-tls"));
    // The chart makes the Secret, blank, so that an uninstall deletes it.
    let mut secret = find("Secret", SECRET).clone();
    assert!(secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm");
    secret["metadata"]
        .as_object_mut()
        .map(|m| m.remove("labels"));
    assert_eq!(secret, blank_secret());
    let registered: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "APIService").collect();
    assert_eq!(registered.len(), 3);
    for a in registered {
        assert!(a["spec"]["caBundle"].is_null(), "the adapter sets it: {a}");
        assert!(a["metadata"]["annotations"].is_null(), "{a}");
    }
    let rules = |kind: &str| find(kind, "gpuscale-adapter:self-tls")["rules"].clone();
    assert_eq!(
        rules("Role"),
        json!([
            {"apiGroups": [""], "resources": ["secrets"],
             "resourceNames": ["gpuscale-adapter-tls"], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        ])
    );
    let names = |rules: &Value| rules[0]["resourceNames"].clone();
    assert_eq!(
        names(&rules("ClusterRole")),
        json!([OURS, UNNAMED, THEIRS]),
        "this release's APIServices"
    );
    assert_eq!(rules("ClusterRole")[0]["verbs"], json!(["get", "patch"]));

    // Beside KEDA: its external APIService is neither registered nor patched.
    let beside_keda = render(json!({"external": false}));
    let o = objects(&beside_keda);
    let cr = o
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRole" && o["metadata"]["name"] == "gpuscale-adapter:self-tls"
        })
        .expect("the APIService rule");
    assert_eq!(cr["rules"][0]["resourceNames"], json!([UNNAMED, THEIRS]));
    // No APIService: no rule at all (empty resourceNames would mean all).
    let none = render(json!({"external": false, "customV1beta1": false, "customV1beta2": false}));
    let o = objects(&none);
    assert!(!o.iter().any(
        |o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "gpuscale-adapter:self-tls"
    ));
    assert!(!none.contains("--self-signed-tls-apiservices"));

    let dir = tempfile::tempdir().expect("tempdir");
    let files = [
        ("all", &all),
        ("beside-keda", &beside_keda),
        ("none", &none),
    ]
    .map(|(n, y)| write(dir.path(), &format!("{n}.yaml"), y));
    gpuscale_e2e::python::validate_manifests(&files).expect("valid for 1.33 and 1.37");
}
