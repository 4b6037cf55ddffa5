//! The serving certificate is reloaded when its files change; a broken
//! file keeps the previous certificate.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use gpuscale_adapter::tls::{ReloadingResolver, load_key_pair};

fn write_pair(dir: &Path, name: &str) -> Vec<u8> {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    std::fs::write(dir.join("tls.crt"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), ck.signing_key.serialize_pem()).unwrap();
    // Make the change visible whatever the file system's timestamp granularity.
    let later = SystemTime::now() + Duration::from_secs(5);
    for f in ["tls.crt", "tls.key"] {
        std::fs::File::options()
            .write(true)
            .open(dir.join(f))
            .unwrap()
            .set_modified(later)
            .unwrap();
    }
    ck.cert.der().to_vec()
}

async fn serving(resolver: &ReloadingResolver, want: &[u8]) {
    while resolver.current().cert[0].as_ref() != want {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_renewed_certificate_is_served_and_a_broken_one_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let first = write_pair(dir.path(), "first");
    let resolver = ReloadingResolver::new(load_key_pair(&crt, &key).unwrap());
    assert_eq!(resolver.current().cert[0].as_ref(), first.as_slice());
    tokio::spawn(
        resolver
            .clone()
            .watch(crt.clone(), key.clone(), Duration::from_millis(20)),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = write_pair(dir.path(), "second");
    serving(&resolver, &second).await;
    std::fs::write(&crt, "not a certificate").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&crt)
        .unwrap()
        .set_modified(SystemTime::now() + Duration::from_secs(60))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(resolver.current().cert[0].as_ref(), second.as_slice());
}
