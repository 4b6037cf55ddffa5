//! Just enough DER to read a certificate's subject common name and
//! organizations (Kubernetes user name and groups).

/// Subject fields of a certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    pub common_name: Option<String>,
    pub organizations: Vec<String>,
}

const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];

/// Read one TLV: (tag, content, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | b as usize;
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The subject of a DER certificate, or `None` if it cannot be read.
pub fn subject(der: &[u8]) -> Option<Subject> {
    let (0x30, cert, _) = tlv(der)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(cert)? else {
        return None;
    };
    let mut rest = tbs;
    let (tag, _, r) = tlv(rest)?;
    if tag == 0xa0 {
        rest = r;
        rest = tlv(rest)?.2; // serial
    } else {
        rest = r; // that was the serial
    }
    rest = tlv(rest)?.2; // signature algorithm
    rest = tlv(rest)?.2; // issuer
    rest = tlv(rest)?.2; // validity
    let (0x30, mut name, _) = tlv(rest)? else {
        return None;
    };
    let mut out = Subject::default();
    while !name.is_empty() {
        let (0x31, mut set, r) = tlv(name)? else {
            return None;
        };
        name = r;
        while !set.is_empty() {
            let (0x30, atv, r) = tlv(set)? else {
                return None;
            };
            set = r;
            let (0x06, oid, r) = tlv(atv)? else {
                return None;
            };
            let (_, value, _) = tlv(r)?;
            let value = String::from_utf8_lossy(value).into_owned();
            if oid == OID_CN {
                out.common_name = Some(value);
            } else if oid == OID_O {
                out.organizations.push(value);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cn_and_organizations() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "front-proxy-client");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let s = subject(cert.der()).unwrap();
        assert_eq!(s.common_name.as_deref(), Some("front-proxy-client"));
        assert_eq!(s.organizations, ["system:masters"]);
        assert_eq!(subject(b"\x30\x03\x02\x01"), None);
    }
}
