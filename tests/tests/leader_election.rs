//! Leader election of the scale-to-zero controller, client-go's rules on
//! real `gpuscale-adapter` processes sharing one Lease in the in-memory
//! Kubernetes API: never two leaders (also with clocks 60 s apart, under
//! libfaketime), a frozen leader replaced after the lease duration and
//! inert when it resumes, and a SIGTERM handing the Lease over at once.
//! Short timings: duration 3 s, renew deadline 2 s, retry period 0.5 s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::kubeapi::{Cluster, Gvr, KubeFake};
use gpuscale_e2e::procs::Proc;
use serde_json::Value;

const LEASE_NS: &str = "gpuscale";
const LEASE: &str = "gpuscale-scale-to-zero";
const DURATION: Duration = Duration::from_secs(3);
const DEADLINE: Duration = Duration::from_secs(2);

/// The stories time takeovers on a 2-core machine: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn leases() -> Gvr {
    ("coordination.k8s.io".into(), "v1".into(), "leases".into())
}

fn fake() -> KubeFake {
    KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    })
}

fn dir() -> PathBuf {
    tempfile::Builder::new()
        .prefix("gpuscale-lease-")
        .tempdir()
        .expect("tempdir")
        .keep()
}

/// libfaketime's preload library, from the Debian package `faketime`.
fn libfaketime() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib").ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("faketime/libfaketime.so.1"))
            .find(|p| p.exists())
    });
    found.expect(
        "libfaketime not found under /usr/lib/*/faketime: install the Debian package faketime",
    )
}

/// An adapter with `--scale-to-zero` under `identity`; with `skew` (e.g.
/// `+60s`) its clocks run that far from the others' (libfaketime).
fn adapter(kube: &KubeFake, dir: &Path, identity: &str, skew: Option<&str>) -> Adapter {
    let kc = dir.join(format!("kubeconfig-{identity}"));
    std::fs::write(&kc, kube.kubeconfig()).expect("kubeconfig");
    let port = gpuscale_e2e::free_port();
    let metrics_port = gpuscale_e2e::free_port();
    let mut cmd = Command::new(gpuscale_e2e::bins::adapter());
    cmd.args([
        "--dev".to_string(),
        format!("--kubeconfig={}", kc.display()),
        // Nothing queries it: there is no policy.
        "--prometheus-url=http://127.0.0.1:9".into(),
        "--scale-to-zero".into(),
        format!("--scale-to-zero-lease-namespace={LEASE_NS}"),
        format!("--scale-to-zero-identity={identity}"),
        "--scale-to-zero-lease-duration=3s".into(),
        "--scale-to-zero-lease-renew-deadline=2s".into(),
        "--scale-to-zero-lease-retry-period=500ms".into(),
        format!("--listen=127.0.0.1:{port}"),
        format!("--metrics-listen=127.0.0.1:{metrics_port}"),
    ])
    .env("RUST_LOG", "info,gpuscale_adapter=debug");
    if let Some(skew) = skew {
        cmd.env("LD_PRELOAD", libfaketime())
            .env("FAKETIME", skew)
            .env("FAKETIME_NO_CACHE", "1");
    }
    let log = dir.join(format!("adapter-{identity}.log"));
    let mut guard = Proc::spawn_watched("gpuscale-adapter", cmd, &log, None);
    eventually("the adapter to listen", || {
        assert!(guard.running(), "the adapter exited:\n{}", guard.log_text());
        gpuscale_e2e::adapter::procs::get(&format!("http://127.0.0.1:{metrics_port}/healthz"))
            .map(|_| ())
    });
    Adapter {
        guard,
        port,
        metrics_port,
        ca: None,
    }
}

fn leads(adapter: &Adapter) -> bool {
    adapter
        .self_metrics()
        .lines()
        .any(|l| l == "gpuscale_scale_to_zero_leader 1")
}

/// (holder, transitions) of the Lease.
fn lease(kube: &KubeFake) -> (String, i64) {
    let l = kube.get(&leases(), LEASE_NS, LEASE).unwrap_or(Value::Null);
    let spec = &l["spec"];
    (
        spec["holderIdentity"].as_str().unwrap_or("").to_string(),
        spec["leaseTransitions"].as_i64().unwrap_or(0),
    )
}

fn signal(adapter: &Adapter, sig: &str) {
    let pid = adapter.guard.child.id().to_string();
    let ok = Command::new("kill")
        .args([sig, &pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// The one leader among `adapters`, once there is exactly one.
fn the_leader(adapters: &[&Adapter]) -> usize {
    eventually("exactly one leader", || {
        let leading: Vec<usize> = (0..adapters.len())
            .filter(|i| leads(adapters[*i]))
            .collect();
        (leading.len() == 1).then(|| leading[0])
    })
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Samples `adapters` and the Lease every 100 ms for `span`: never two
/// leaders, the Lease held throughout by the one leader (or, between
/// holders, by nobody acting).
fn never_two_leaders(kube: &KubeFake, adapters: &[(&Adapter, &str)], span: Duration) {
    let end = Instant::now() + span;
    let mut samples = 0;
    while Instant::now() < end {
        let leading: Vec<&str> = adapters
            .iter()
            .filter(|(a, _)| leads(a))
            .map(|(_, id)| *id)
            .collect();
        assert!(leading.len() <= 1, "two leaders at once: {leading:?}");
        if let [one] = leading[..] {
            let (holder, _) = lease(kube);
            assert_eq!(holder, one, "the acting replica holds the Lease");
        }
        samples += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(samples > 10, "sampled {samples} times");
}

/// Three replicas whose clocks read now, 60 s ahead and 60 s behind:
/// the holder's renewTime looks a minute stale (or a minute in the
/// future) to the others, who must not take the Lease for it; when the
/// holder dies, one of them does take it, after the lease duration.
#[test]
fn clocks_60s_apart_never_make_two_leaders() {
    let _serial = serial();
    let kube = fake();
    let dir = dir();
    let a = adapter(&kube, &dir, "now", None);
    let b = adapter(&kube, &dir, "ahead", Some("+60s"));
    let c = adapter(&kube, &dir, "behind", Some("-60s"));
    let named = [(&a, "now"), (&b, "ahead"), (&c, "behind")];
    let first = the_leader(&[&a, &b, &c]);
    let (_, transitions) = lease(&kube);
    never_two_leaders(&kube, &named, DURATION * 3);
    assert_eq!(lease(&kube).1, transitions, "the Lease never changed hands");
    let mut rest: Vec<(Adapter, &str)> = [(a, "now"), (b, "ahead"), (c, "behind")].into();
    let (leader, who) = rest.remove(first);
    signal(&leader, "-KILL");
    let killed = Instant::now();
    let left: Vec<(&Adapter, &str)> = rest.iter().map(|(a, n)| (a, *n)).collect();
    eventually("a skewed standby takes over", || {
        left.iter().any(|(a, _)| leads(a)).then_some(())
    });
    let took = killed.elapsed();
    eprintln!("'{who}' killed; takeover by a replica with a skewed clock after {took:?}");
    assert!(
        took >= DEADLINE,
        "taken over before the holder's renew deadline: {took:?}"
    );
    never_two_leaders(&kube, &left, DURATION);
}

/// A leader frozen with SIGSTOP loses the Lease after about the lease
/// duration; resumed, it does not act (leadership false, no Lease write
/// claiming it) before it re-acquires. Three freezes, alternating.
#[test]
fn a_frozen_leader_is_replaced_and_stays_inert_on_resume() {
    let _serial = serial();
    let kube = fake();
    let dir = dir();
    let pair = [
        adapter(&kube, &dir, "a", None),
        adapter(&kube, &dir, "b", None),
    ];
    let ids = ["a", "b"];
    let mut takeovers = Vec::new();
    for _ in 0..3 {
        let leader = the_leader(&[&pair[0], &pair[1]]);
        let standby = 1 - leader;
        signal(&pair[leader], "-STOP");
        let frozen = Instant::now();
        eventually("the standby takes over", || {
            leads(&pair[standby]).then_some(())
        });
        let took = frozen.elapsed();
        takeovers.push(took);
        assert!(
            took >= DEADLINE,
            "taken while the frozen leader could still act: {took:?}"
        );
        let (holder, transitions) = lease(&kube);
        assert_eq!(holder, ids[standby]);
        signal(&pair[leader], "-CONT");
        // The gauge is refreshed every 0.5 s; leadership itself is a
        // monotonic deadline, false from the first instruction resumed.
        std::thread::sleep(Duration::from_millis(600));
        let end = Instant::now() + DEADLINE;
        while Instant::now() < end {
            assert!(!leads(&pair[leader]), "the resumed replica acts");
            assert_eq!(
                lease(&kube),
                (holder.clone(), transitions),
                "the Lease moved"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(leads(&pair[standby]));
    }
    eprintln!(
        "takeover after a freeze (lease duration 3 s): median {:?}, all {takeovers:?}",
        median(takeovers.clone())
    );
    assert!(median(takeovers) <= DURATION * 2);
}

/// SIGTERM to the leader releases the Lease: the standby leads within 2 s
/// (within a retry period, 0.5 s here), three handovers in a row.
#[test]
fn sigterm_hands_the_lease_to_the_standby_within_2s() {
    let _serial = serial();
    let kube = fake();
    let dir = dir();
    let mut leader = adapter(&kube, &dir, "r0", None);
    eventually("r0 leads", || leads(&leader).then_some(()));
    let mut handovers = Vec::new();
    for i in 1..=3 {
        let id = format!("r{i}");
        let standby = adapter(&kube, &dir, &id, None);
        std::thread::sleep(Duration::from_secs(1));
        assert!(!leads(&standby), "{id} stands by while the leader renews");
        signal(&leader, "-TERM");
        let termed = Instant::now();
        eventually("the standby takes the released Lease", || {
            (lease(&kube).0 == id).then_some(())
        });
        handovers.push(termed.elapsed());
        eventually("the standby leads", || leads(&standby).then_some(()));
        let status = eventually("the old leader exits", || {
            leader.guard.child.try_wait().ok().flatten()
        });
        assert!(status.success(), "{status}:\n{}", leader.guard.log_tail(20));
        assert!(
            leader
                .guard
                .log_text()
                .contains("scale-to-zero Lease released"),
            "{}",
            leader.guard.log_tail(20)
        );
        leader = standby;
    }
    eprintln!(
        "Lease handover after SIGTERM: median {:?}, all {handovers:?}",
        median(handovers.clone())
    );
    for h in &handovers {
        assert!(*h <= Duration::from_secs(2), "{handovers:?}");
    }
}
