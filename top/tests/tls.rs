//! An engineer reads a node whose exporter serves TLS with client
//! certificates and basic auth (`--web-config-file`): with the CA, the
//! client certificate and the password `gpuscale-top` shows the node; a
//! missing piece is a read that fails and says which.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gpuscale_e2e::exporter::Exporter;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SigningKey,
};

fn params(cn: &str, sans: Vec<String>) -> CertificateParams {
    let mut p = CertificateParams::new(sans).expect("params");
    p.distinguished_name.push(DnType::CommonName, cn);
    p
}

fn ca(cn: &str) -> CertifiedIssuer<'static, impl SigningKey> {
    let mut p = params(cn, Vec::new());
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(p, KeyPair::generate().expect("key")).expect("CA")
}

/// A CA, and a server (for localhost) and a client certificate it signed,
/// written to `dir` as ca.crt, tls.crt/tls.key and client.crt/client.key;
/// another CA (other-ca.crt), the passwords and the exporter's web.yml.
fn pki(dir: &Path) {
    let ca = ca("gpuscale test CA");
    let write = |name: &str, text: String| std::fs::write(dir.join(name), text).expect(name);
    write("ca.crt", ca.pem());
    write("other-ca.crt", self::ca("another CA").pem());
    for (name, sans) in [
        ("tls", vec!["localhost".to_string()]),
        ("client", vec!["gpuscale-top".to_string()]),
    ] {
        let key = KeyPair::generate().expect("key");
        let cert = params(name, sans).signed_by(&key, &ca).expect("sign");
        write(&format!("{name}.crt"), cert.pem());
        write(&format!("{name}.key"), key.serialize_pem());
    }
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    write("password", "s3cret\n".into());
    write("wrong", "guess\n".into());
    write(
        "web.yml",
        format!(
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n\
             basic_auth_users:\n  prometheus: {hash}\n"
        ),
    );
}

fn top(dir: &Path, url: &str, extra: &[&str]) -> Output {
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args(["--once", "-o", "json", "--exporter", url])
        .args([
            "--username",
            "prometheus",
            "--password-file",
            &path("password"),
        ])
        .args(["--ca-file", &path("ca.crt")])
        .args(["--cert-file", &path("client.crt")])
        .args(["--key-file", &path("client.key")])
        .args(extra)
        .output()
        .expect("run gpuscale-top")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Replaces the value of `flag` in the arguments `top` passes.
fn without(dir: &Path, url: &str, flag: &str, value: &str) -> Output {
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args(["--once", "--exporter", url])
        .args(["--username", "prometheus"])
        .args([
            "--password-file",
            &path(if flag == "password" {
                value
            } else {
                "password"
            }),
        ])
        .args([
            "--ca-file",
            &path(if flag == "ca" { value } else { "ca.crt" }),
        ])
        .args([
            "--cert-file",
            &path(if flag == "cert" { value } else { "client.crt" }),
        ])
        .args([
            "--key-file",
            &path(if flag == "cert" {
                "tls.key"
            } else {
                "client.key"
            }),
        ])
        .output()
        .expect("run gpuscale-top")
}

#[test]
fn an_exporter_serving_tls_with_client_certificates_and_basic_auth_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    pki(dir.path());
    let web = dir.path().join("web.yml");
    let e = Exporter::spawn_with_probe(
        &[
            "--simulate",
            "--collect-interval",
            "1s",
            "--web-config-file",
            web.to_str().expect("utf-8"),
        ],
        false,
    );
    let url = format!("https://localhost:{}", e.port);
    let deadline = Instant::now() + Duration::from_secs(30);
    let snap: serde_json::Value = loop {
        let out = top(dir.path(), &url, &[]);
        if out.status.success() {
            break serde_json::from_slice(&out.stdout).expect("JSON");
        }
        assert!(
            Instant::now() < deadline,
            "never read: {}\n{}",
            stderr(&out),
            e.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(snap["gpus"].as_array().map(Vec::len), Some(8), "{snap}");
    assert_eq!(snap["source"], format!("exporter {url}/metrics"));

    let wrong = without(dir.path(), &url, "password", "wrong");
    assert_eq!(wrong.status.code(), Some(1));
    assert!(stderr(&wrong).contains("HTTP 401"), "{}", stderr(&wrong));

    // Another CA does not verify the exporter's certificate.
    let no_ca = without(dir.path(), &url, "ca", "other-ca.crt");
    assert_eq!(no_ca.status.code(), Some(1));
    assert!(
        stderr(&no_ca).contains(&format!("exporter {url}/metrics")),
        "{}",
        stderr(&no_ca)
    );

    // Without a certificate the exporter asks for, the handshake fails.
    let no_cert = Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args(["--once", "--exporter", &url])
        .arg("--ca-file")
        .arg(dir.path().join("ca.crt"))
        .output()
        .expect("run gpuscale-top");
    assert_eq!(no_cert.status.code(), Some(1), "{}", stderr(&no_cert));

    // A bad --cert-file/--key-file pair is refused at start, naming it.
    let bad = without(dir.path(), &url, "cert", "password");
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--cert-file"), "{}", stderr(&bad));

    // A port-forward's 127.0.0.1, which the certificate does not name: not
    // read, unless --insecure-skip-verify, with a warning saying what it means.
    let loopback = format!("https://127.0.0.1:{}", e.port);
    let named = top(dir.path(), &loopback, &[]);
    assert_eq!(named.status.code(), Some(1), "{}", stderr(&named));
    let skip = top(dir.path(), &loopback, &["--insecure-skip-verify"]);
    assert!(skip.status.success(), "{}", stderr(&skip));
    assert!(stderr(&skip).contains("not checked"), "{}", stderr(&skip));
}
