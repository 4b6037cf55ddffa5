//! The self-managed certificates: a CA and the serving certificate it
//! signs, kept as PEM in the Secret's `ca.crt` (every CA the APIServices
//! are to trust, oldest first), `ca.key` (the newest CA's key), `tls.crt`
//! and `tls.key`; read back with the validity and issuer rotation needs.

use std::collections::BTreeMap;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use time::OffsetDateTime;

use crate::tls::TlsError;

/// The Secret's keys.
pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// One certificate with what rotation reads from it (times in Unix seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Cert {
    pub der: CertificateDer<'static>,
    pub not_before: i64,
    pub not_after: i64,
    subject: Vec<u8>,
    issuer: Vec<u8>,
    spki: Vec<u8>,
}

impl Cert {
    fn parse(der: CertificateDer<'static>) -> Result<Self, String> {
        let (_, c) = x509_parser::parse_x509_certificate(&der).map_err(|e| e.to_string())?;
        let v = c.validity();
        Ok(Self {
            not_before: v.not_before.timestamp(),
            not_after: v.not_after.timestamp(),
            subject: c.subject().as_raw().to_vec(),
            issuer: c.issuer().as_raw().to_vec(),
            spki: c.public_key().raw.to_vec(),
            der,
        })
    }

    pub fn pem(&self) -> String {
        pem_of(&self.der)
    }
}

fn pem_of(der: &CertificateDer<'_>) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// What the Secret holds, parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Material {
    /// The CAs the APIServices are to trust, oldest first.
    pub bundle: Vec<Cert>,
    /// The newest CA's key (PEM): it signs the next serving certificate.
    ca_key: String,
    pub serving: Cert,
    serving_key: String,
}

fn setup(e: impl std::fmt::Display) -> TlsError {
    TlsError::Setup(e.to_string())
}

fn at(unix: i64) -> Result<OffsetDateTime, TlsError> {
    OffsetDateTime::from_unix_timestamp(unix).map_err(setup)
}

/// A new CA valid from `now` for `validity` seconds: (certificate, key).
fn new_ca(now: i64, validity: i64) -> Result<(Cert, KeyPair), TlsError> {
    let key = KeyPair::generate().map_err(setup)?;
    // Bytes of the public key tell this CA's subject from its predecessor's.
    let id: String = key
        .public_key_raw()
        .iter()
        .rev()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("gpuscale-adapter CA {id}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = at(now)?;
    params.not_after = at(now.saturating_add(validity))?;
    let cert = params.self_signed(&key).map_err(setup)?;
    Ok((Cert::parse(cert.der().clone()).map_err(setup)?, key))
}

/// A serving certificate for `names` signed by `ca`, valid from `now` for
/// `validity` seconds but never past the CA: (certificate, key PEM).
fn new_serving(
    ca: &Cert,
    ca_key: &str,
    names: &[String],
    now: i64,
    validity: i64,
) -> Result<(Cert, String), TlsError> {
    let signer = KeyPair::from_pem(ca_key).map_err(setup)?;
    let issuer = Issuer::from_ca_cert_der(&ca.der, signer).map_err(setup)?;
    let key = KeyPair::generate().map_err(setup)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(setup)?;
    if let Some(first) = names.first() {
        params.distinguished_name.push(DnType::CommonName, first);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    params.not_before = at(now)?;
    params.not_after = at(now.saturating_add(validity).min(ca.not_after))?;
    let cert = params.signed_by(&key, &issuer).map_err(setup)?;
    let cert = Cert::parse(cert.der().clone()).map_err(setup)?;
    Ok((cert, key.serialize_pem()))
}

impl Material {
    /// A first CA (living `ca_validity`) and a serving certificate for `names`.
    pub fn generate(
        names: &[String],
        now: i64,
        validity: i64,
        ca_validity: i64,
    ) -> Result<Self, TlsError> {
        let (ca, ca_key) = new_ca(now, ca_validity)?;
        let ca_key = ca_key.serialize_pem();
        let (serving, serving_key) = new_serving(&ca, &ca_key, names, now, validity)?;
        Ok(Self {
            bundle: vec![ca],
            ca_key,
            serving,
            serving_key,
        })
    }

    /// Rotation's first step: a new CA joins the bundle beside the one that
    /// signed the serving certificate (any older one leaves); the serving
    /// certificate stays.
    pub fn with_new_ca(&self, now: i64, ca_validity: i64) -> Result<Self, TlsError> {
        let (ca, key) = new_ca(now, ca_validity)?;
        let mut bundle: Vec<Cert> = self.serving_ca().into_iter().cloned().collect();
        bundle.push(ca);
        Ok(Self {
            bundle,
            ca_key: key.serialize_pem(),
            ..self.clone()
        })
    }

    /// Rotation's second step: a serving certificate signed by the newest CA.
    pub fn with_new_serving(
        &self,
        names: &[String],
        now: i64,
        validity: i64,
    ) -> Result<Self, TlsError> {
        let newest = self.newest_ca();
        let (serving, serving_key) = new_serving(newest, &self.ca_key, names, now, validity)?;
        Ok(Self {
            serving,
            serving_key,
            ..self.clone()
        })
    }

    /// The newest CA (the bundle is never empty).
    pub fn newest_ca(&self) -> &Cert {
        &self.bundle[self.bundle.len() - 1]
    }

    /// The CA in the bundle that signed the serving certificate.
    pub fn serving_ca(&self) -> Option<&Cert> {
        self.bundle
            .iter()
            .find(|c| c.subject == self.serving.issuer)
    }

    /// Whether the newest CA signed the serving certificate (no rotation
    /// under way).
    pub fn settled(&self) -> bool {
        self.newest_ca().subject == self.serving.issuer
    }

    /// `ca.crt`: the bundle as PEM, what each APIService's `caBundle` holds.
    pub fn bundle_pem(&self) -> String {
        self.bundle.iter().map(Cert::pem).collect()
    }

    /// The serving pair, for the TLS listeners.
    pub fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        let key = PrivateKeyDer::from_pem_slice(self.serving_key.as_bytes()).map_err(setup)?;
        CertifiedKey::from_der(vec![self.serving.der.clone()], key, &crate::tls::provider())
            .map_err(setup)
    }

    /// The Secret's `data`.
    pub fn to_data(&self) -> BTreeMap<String, Vec<u8>> {
        [
            (CA_CRT, self.bundle_pem()),
            (CA_KEY, self.ca_key.clone()),
            (TLS_CRT, self.serving.pem()),
            (TLS_KEY, self.serving_key.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_bytes()))
        .collect()
    }

    /// The Secret's `data`, checked: every key present and PEM, the CA key
    /// the newest CA's, the serving certificate signed by a CA of the bundle.
    pub fn parse(data: &BTreeMap<String, Vec<u8>>) -> Result<Self, String> {
        let text = |k: &str| -> Result<String, String> {
            let v = data.get(k).ok_or_else(|| format!("no {k}"))?;
            String::from_utf8(v.clone()).map_err(|_| format!("{k} is not PEM text"))
        };
        let certs = |k: &str| -> Result<Vec<Cert>, String> {
            let pem = text(k)?;
            let ders = crate::tls::parse_certs(k, &pem).map_err(|e| e.to_string())?;
            ders.into_iter()
                .map(|d| Cert::parse(d).map_err(|e| format!("{k}: {e}")))
                .collect()
        };
        let bundle = certs(CA_CRT)?;
        let serving = certs(TLS_CRT)?.swap_remove(0);
        let ca_key = text(CA_KEY)?;
        let serving_key = text(TLS_KEY)?;
        let signer = KeyPair::from_pem(&ca_key).map_err(|e| format!("{CA_KEY}: {e}"))?;
        let m = Self {
            bundle,
            ca_key,
            serving,
            serving_key,
        };
        if signer.subject_public_key_info() != m.newest_ca().spki {
            return Err(format!(
                "{CA_KEY} is not the key of the last CA in {CA_CRT}"
            ));
        }
        if m.serving_ca().is_none() {
            return Err(format!("{TLS_CRT} is not signed by a CA in {CA_CRT}"));
        }
        m.certified_key().map_err(|e| format!("{TLS_KEY}: {e}"))?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec![
            "gpuscale-adapter.gpuscale.svc".into(),
            "gpuscale-adapter".into(),
        ]
    }

    #[test]
    fn material_survives_the_secret_and_rotates_in_two_steps() {
        let m = Material::generate(&names(), 1_000, 60, 120).unwrap();
        assert_eq!(Material::parse(&m.to_data()).unwrap(), m);
        assert!(m.settled());
        assert_eq!((m.serving.not_before, m.serving.not_after), (1_000, 1_060));
        let added = m.with_new_ca(1_040, 120).unwrap();
        assert_eq!(added.bundle.len(), 2);
        assert_eq!(added.bundle[0], m.bundle[0]);
        assert_eq!(added.serving, m.serving, "the serving certificate stays");
        assert!(!added.settled());
        let switched = added.with_new_serving(&names(), 1_050, 60).unwrap();
        assert!(switched.settled());
        assert_eq!(switched.serving_ca(), Some(&switched.bundle[1]));
        let parsed = Material::parse(&switched.to_data()).unwrap();
        assert_eq!(parsed, switched);
        let next = switched.with_new_ca(1_100, 120).unwrap();
        assert_eq!(next.bundle[0], switched.bundle[1], "the oldest CA leaves");
    }

    #[test]
    fn a_broken_secret_names_its_problem() {
        let m = Material::generate(&names(), 1_000, 60, 120).unwrap();
        let other = Material::generate(&names(), 1_000, 60, 120).unwrap();
        let with = |k: &str, v: &[u8]| {
            let mut d = m.to_data();
            d.insert(k.into(), v.to_vec());
            Material::parse(&d).unwrap_err()
        };
        let mut missing = m.to_data();
        missing.remove(TLS_KEY);
        assert_eq!(Material::parse(&missing).unwrap_err(), "no tls.key");
        assert!(with(CA_CRT, b"junk").contains("ca.crt"));
        let other_key = other.to_data()[CA_KEY].clone();
        assert!(with(CA_KEY, &other_key).contains("not the key of the last CA"));
        let other_crt = other.to_data()[TLS_CRT].clone();
        assert!(with(TLS_CRT, &other_crt).contains("not signed by a CA"));
    }

    #[test]
    fn the_serving_certificate_never_outlives_its_ca() {
        let m = Material::generate(&names(), 1_000, 600, 100).unwrap();
        assert_eq!(m.serving.not_after, 1_100);
    }
}
