//! The adapter's own serving certificate (`--self-signed-tls-secret`), for
//! clusters without cert-manager: a CA and a serving certificate for the
//! Service's DNS names in one Secret that every replica shares (the first
//! creates it, the others read the winner's), served from there, with the
//! CA put in the `caBundle` of the named APIServices backed by the
//! Service. Rotation (see [`rotation`]) never leaves a moment where an
//! APIService's bundle does not verify a certificate still served.

pub mod issue;
pub mod kube;
pub mod rotation;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use gpuscale_util::rfc3339::unix_now;

use gpuscale_util::backoff::Backoff;
use rustls::sign::CertifiedKey;

use self::issue::Material;
use self::kube::{Bundle, Calls, ObjectRef};
use self::rotation::{Step, Timing};
use super::{ReloadingResolver, TlsError};

/// Each Kubernetes call's limit.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Failed rounds are retried after doubling delays up to this.
const MAX_RETRY: Duration = Duration::from_secs(60);

fn object_ref(s: &str) -> Result<ObjectRef, String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(ObjectRef {
                namespace: ns.into(),
                name: name.into(),
            })
        }
        _ => Err(format!("{s:?} is not namespace/name")),
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    gpuscale_util::duration::parse(s).map_err(|e| e.to_string())
}

/// The self-managed certificate's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Flags {
    /// Manage the serving certificate in this Secret, `namespace/name` (created if absent, shared by replicas, rotated), instead of --tls-cert-file and --tls-key-file.
    #[arg(long, global = true, value_parser = object_ref, conflicts_with_all = ["tls_cert_file", "dev"], requires = "self_signed_tls_service")]
    pub self_signed_tls_secret: Option<ObjectRef>,
    /// The Service the self-managed certificate is for, `namespace/name`: its DNS names are the certificate's, and only APIServices backed by it get the CA.
    #[arg(long, global = true, value_parser = object_ref, requires = "self_signed_tls_secret")]
    pub self_signed_tls_service: Option<ObjectRef>,
    /// APIServices whose spec.caBundle is kept to the self-managed CA (comma-separated); one backed by another Service is left alone.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        requires = "self_signed_tls_secret"
    )]
    pub self_signed_tls_apiservices: Vec<String>,
    /// Lifetime of a self-managed serving certificate (its CA lives twice as long).
    #[arg(long, global = true, default_value = "1y", value_parser = duration)]
    pub self_signed_tls_validity: Duration,
    /// A self-managed serving certificate with less than this left is replaced (default: a third of --self-signed-tls-validity).
    #[arg(long, global = true, value_parser = duration)]
    pub self_signed_tls_renew_before: Option<Duration>,
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// The rotation times; `reload`: how often replicas re-read the Secret.
fn timing(f: &Flags, reload: Duration) -> Result<Timing, TlsError> {
    let validity = secs(f.self_signed_tls_validity);
    let renew_before = f.self_signed_tls_renew_before.map_or(validity / 3, secs);
    // Whole seconds (certificate times are), one more for the truncation.
    let settle = secs(reload) + i64::from(reload.subsec_nanos() > 0) + 1;
    if renew_before >= validity {
        return Err(TlsError::Setup(
            "--self-signed-tls-renew-before must be shorter than --self-signed-tls-validity".into(),
        ));
    }
    if renew_before <= settle {
        return Err(TlsError::Setup(format!(
            "--self-signed-tls-renew-before must leave a new CA time to reach the APIServices \
             (more than {settle}s with --tls-reload-interval={reload:?})"
        )));
    }
    Ok(Timing {
        validity,
        renew_before,
        settle,
    })
}

/// The Service's DNS names, as clients in the cluster dial it.
fn service_names(svc: &ObjectRef) -> Vec<String> {
    let (n, ns) = (&svc.name, &svc.namespace);
    vec![
        format!("{n}.{ns}.svc"),
        format!("{n}.{ns}.svc.cluster.local"),
        format!("{n}.{ns}"),
        n.clone(),
    ]
}

/// Where the certificate is kept, for what, and when it moves on.
struct Keeper {
    calls: Calls,
    apiservices: Vec<String>,
    names: Vec<String>,
    timing: Timing,
    reload: Duration,
    /// APIServices reported as another's (once each).
    reported: BTreeSet<String>,
}

/// The self-managed certificate: its keeper and what is served now.
pub struct SelfManaged {
    keeper: Keeper,
    served: Material,
}

/// With `--self-signed-tls-secret`: the Secret's pair (created if absent),
/// read before the listeners open; failed calls are retried with backoff.
pub async fn start(
    f: &Flags,
    reload: Duration,
    client: Option<::kube::Client>,
) -> Result<Option<SelfManaged>, TlsError> {
    let (Some(secret), Some(service)) = (&f.self_signed_tls_secret, &f.self_signed_tls_service)
    else {
        return Ok(None);
    };
    let client = client.ok_or_else(|| {
        TlsError::Setup("--self-signed-tls-secret needs the Kubernetes API".into())
    })?;
    let keeper = Keeper {
        calls: Calls::new(client, secret.clone(), service.clone(), CALL_TIMEOUT),
        apiservices: f.self_signed_tls_apiservices.clone(),
        names: service_names(service),
        timing: timing(f, reload)?,
        reload,
        reported: BTreeSet::new(),
    };
    let mut backoff = Backoff::new(Duration::from_secs(1), MAX_RETRY);
    loop {
        match keeper.obtain().await {
            Ok(served) => return Ok(Some(SelfManaged { keeper, served })),
            Err(e) => {
                tracing::warn!(secret = %secret, error = %e, "self-managed certificate not read; retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

impl Keeper {
    /// The Secret's material, made when the API says there is none or the
    /// Secret is blank (the chart creates it with no data, so that
    /// `helm uninstall` deletes it); a replica that loses the write reads
    /// the winner's.
    async fn obtain(&self) -> Result<Material, String> {
        let read = self.calls.read_secret().await.map_err(|e| e.to_string())?;
        if let Some(secret) = read.as_ref().filter(|s| !blank(s)) {
            return parse(secret);
        }
        let t = self.timing;
        let m = Material::generate(&self.names, unix_now(), t.validity, t.ca_validity())
            .map_err(|e| e.to_string())?;
        let data = m.to_data();
        let won = match read {
            Some(blank) => {
                let written = self.calls.replace_secret(&blank, data).await;
                written.map_err(|e| e.to_string())?.is_some()
            }
            None => self
                .calls
                .create_secret(data)
                .await
                .map_err(|e| e.to_string())?,
        };
        if won {
            tracing::info!(names = ?self.names, not_after = m.serving.not_after, "self-managed certificate written");
            return Ok(m);
        }
        match self.calls.read_secret().await.map_err(|e| e.to_string())? {
            Some(secret) => parse(&secret),
            None => Err("written by another replica and deleted again".into()),
        }
    }

    /// Puts `pem` in each APIService that holds something else; whether
    /// every one already held it (`before`: as read at the round's start).
    async fn keep_bundles(
        &mut self,
        before: Vec<(String, Result<Bundle, kube::CallError>)>,
        pem: &str,
    ) -> bool {
        let mut carried = true;
        for (name, read) in before {
            match read {
                Ok(Bundle::Ours { pem: held, .. }) if held == pem.as_bytes() => {}
                Ok(Bundle::Ours { raw, .. }) => {
                    carried = false;
                    match self.calls.set_bundle(&name, &raw, pem).await {
                        Ok(true) => tracing::info!(apiservice = %name, "caBundle set"),
                        Ok(false) => {
                            tracing::debug!(apiservice = %name, "caBundle changed meanwhile")
                        }
                        Err(e) => tracing::warn!(error = %e, "caBundle not set"),
                    }
                }
                Ok(Bundle::NotOurs(backing)) => {
                    if !self.reported.insert(name.clone()) {
                        continue;
                    }
                    tracing::warn!(apiservice = %name, backed_by = %backing, "not backed by the adapter's Service: its caBundle is left alone");
                }
                Ok(Bundle::Missing) => tracing::debug!(apiservice = %name, "no such APIService"),
                Err(e) => {
                    carried = false;
                    tracing::warn!(error = %e, "APIService not read");
                }
            }
        }
        carried
    }
}

impl SelfManaged {
    /// The pair served now.
    pub fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        self.served.certified_key()
    }

    /// Keeps the certificate every `--tls-reload-interval`: serves the
    /// Secret's pair, keeps the APIServices' bundles, rotates.
    pub async fn keep(mut self, resolver: Arc<ReloadingResolver>) {
        let mut backoff = Backoff::new(self.keeper.reload, MAX_RETRY.max(self.keeper.reload));
        loop {
            let delay = match self.round(&resolver).await {
                Ok(()) => {
                    backoff.reset();
                    self.keeper.reload
                }
                Err(e) => {
                    tracing::warn!(error = %e, "self-managed certificate: round failed; retrying");
                    backoff.next_delay()
                }
            };
            tokio::time::sleep(delay).await;
        }
    }

    async fn round(&mut self, resolver: &ReloadingResolver) -> Result<(), String> {
        // The APIServices are read before the Secret: a bundle written from
        // this Secret can then only be newer than what they held.
        let mut before = Vec::with_capacity(self.keeper.apiservices.len());
        for name in &self.keeper.apiservices {
            before.push((name.clone(), self.keeper.calls.read_bundle(name).await));
        }
        let read = self.keeper.calls.read_secret().await;
        let Some(secret) = read.map_err(|e| e.to_string())?.filter(|s| !blank(s)) else {
            tracing::warn!(
                "the self-managed certificate's Secret is gone or blank; making a new one"
            );
            let m = self.keeper.obtain().await?;
            return self.serve(resolver, m);
        };
        let m = parse(&secret)?;
        self.serve(resolver, m.clone())?;
        let carried = self.keeper.keep_bundles(before, &m.bundle_pem()).await;
        let now = unix_now();
        let t = self.keeper.timing;
        let step = rotation::next(&m, now, t, carried);
        let next = match step {
            Step::Keep => return Ok(()),
            Step::AddCa => m.with_new_ca(now, t.ca_validity()),
            Step::Switch => m.with_new_serving(&self.keeper.names, now, t.validity),
        };
        let next = next.map_err(|e| e.to_string())?;
        let written = self
            .keeper
            .calls
            .replace_secret(&secret, next.to_data())
            .await;
        match written.map_err(|e| e.to_string())? {
            Some(_) => {
                tracing::info!(step = ?step, cas = next.bundle.len(), not_after = next.serving.not_after, "self-managed certificate rotated a step");
                self.serve(resolver, next)
            }
            None => {
                tracing::debug!("another replica wrote the Secret first");
                Ok(())
            }
        }
    }

    /// Serves `m`'s pair when it is not the one served.
    fn serve(&mut self, resolver: &ReloadingResolver, m: Material) -> Result<(), String> {
        if m.serving.der != self.served.serving.der {
            resolver.set(m.certified_key().map_err(|e| e.to_string())?);
            tracing::info!(
                not_after = m.serving.not_after,
                "serving the self-managed certificate"
            );
        }
        self.served = m;
        Ok(())
    }
}

/// A Secret with no data: made by the chart for the adapter to fill.
fn blank(secret: &k8s_openapi::api::core::v1::Secret) -> bool {
    secret.data.as_ref().is_none_or(|d| d.is_empty())
}

fn parse(secret: &k8s_openapi::api::core::v1::Secret) -> Result<Material, String> {
    Material::parse(&kube::decode(secret)).map_err(|e| {
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        format!("Secret {name}: {e} (remove its data, or delete it, to have a new one made)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(validity: &str, renew: Option<&str>) -> Flags {
        Flags {
            self_signed_tls_secret: None,
            self_signed_tls_service: None,
            self_signed_tls_apiservices: Vec::new(),
            self_signed_tls_validity: duration(validity).unwrap(),
            self_signed_tls_renew_before: renew.map(|r| duration(r).unwrap()),
        }
    }

    #[test]
    fn references_and_times_are_checked() {
        assert!(object_ref("ns/name").is_ok());
        for bad in ["name", "/name", "ns/", "a/b/c"] {
            assert!(object_ref(bad).is_err(), "{bad}");
        }
        let ten = Duration::from_secs(10);
        let t = timing(&flags("1y", None), ten).unwrap();
        assert_eq!((t.renew_before, t.settle), (365 * 86_400 / 3, 11));
        assert!(timing(&flags("1h", Some("1h")), ten).is_err());
        assert!(timing(&flags("1h", Some("11s")), ten).is_err());
        let quick = timing(&flags("8s", Some("5s")), Duration::from_millis(200)).unwrap();
        assert_eq!(quick.settle, 2);
    }

    #[test]
    fn the_secret_replaces_the_files_and_needs_its_service() {
        use clap::Parser as _;
        let parse = |extra: &[&str]| {
            let base = ["gpuscale-adapter"];
            crate::cli::Args::try_parse_from(base.iter().chain(extra))
        };
        let secret = "--self-signed-tls-secret=gpuscale/gpuscale-adapter-tls";
        let service = "--self-signed-tls-service=gpuscale/gpuscale-adapter";
        let a = parse(&[secret, service, "--self-signed-tls-apiservices=a,b"]).unwrap();
        assert_eq!(a.self_signed_tls.self_signed_tls_apiservices, ["a", "b"]);
        assert!(parse(&[secret]).is_err(), "no Service");
        assert!(parse(&[service]).is_err(), "no Secret");
        assert!(parse(&[secret, service, "--tls-cert-file=c", "--tls-key-file=k"]).is_err());
        assert!(parse(&[secret, service, "--dev"]).is_err());
        assert!(parse(&["--self-signed-tls-secret=nons", service]).is_err());
        // Neither parses (a one-shot command needs no certificate); `serve`
        // refuses it at start (adapter/tests/command_line.rs).
        assert!(parse(&[]).is_ok());
    }

    #[test]
    fn the_names_are_the_services() {
        let svc = object_ref("gpuscale/gpuscale-adapter").unwrap();
        assert_eq!(service_names(&svc)[0], "gpuscale-adapter.gpuscale.svc");
    }
}
