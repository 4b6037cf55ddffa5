//! Hostile clients against the real binaries on 127.0.0.1: idle and slow
//! connections beyond the open-file limit, floods of wrong passwords. The
//! servers must stay up, bounded and answering; timeouts are set short here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gpuscale_e2e::bins;
use gpuscale_e2e::exporter::Exporter;
use gpuscale_e2e::hostile::{
    basic, closed_by_peer, cpu_seconds, dribble, get_with, idle_connections, median_ms, open_fds,
};

fn scenario() -> String {
    bins::repo_root()
        .join("tests/scenarios/exporter-basic.yaml")
        .to_string_lossy()
        .into_owned()
}

/// Scrapes until one succeeds; panics after `within`.
fn scrape_eventually(e: &Exporter, within: Duration) {
    let deadline = std::time::Instant::now() + within;
    while e.status("/metrics") != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "no successful scrape within {within:?}; log:\n{}",
            e.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn exporter_out_of_file_descriptors_backs_off_and_recovers() {
    let s = scenario();
    let args = ["--simulate", &s, "--read-header-timeout", "1s"];
    let exporter = Exporter::spawn_with_fd_limit(&args, 128);
    exporter.wait_ready();
    let cpu_before = cpu_seconds(exporter.pid());
    let mut conns = idle_connections(exporter.port, 300);
    assert!(conns.len() > 128, "only {} connections opened", conns.len());
    std::thread::sleep(Duration::from_secs(2));
    let cpu = cpu_seconds(exporter.pid()) - cpu_before;
    assert!(cpu < 1.0, "{cpu:.2} s of CPU in 2 s with accept failing");
    // Idle connections are closed after --read-header-timeout, so a scrape
    // gets through while the attacker still holds its sockets.
    assert!(closed_by_peer(&mut conns[0], Duration::from_secs(5)));
    scrape_eventually(&exporter, Duration::from_secs(10));
    let log = exporter.log();
    let warnings = log.matches("accept failed").count();
    assert!(
        (1..=2).contains(&warnings),
        "{warnings} accept warnings:\n{log}"
    );
    drop(conns);
    scrape_eventually(&exporter, Duration::from_secs(5));
}

#[test]
fn exporter_caps_connections_and_drops_slowloris_clients() {
    let s = scenario();
    let args = [
        "--simulate",
        &s,
        "--max-connections",
        "8",
        "--read-header-timeout",
        "1s",
    ];
    let exporter = Exporter::spawn(&args);
    exporter.wait_ready();
    let fds = open_fds(exporter.pid());
    let mut conns = idle_connections(exporter.port, 30);
    std::thread::sleep(Duration::from_millis(300));
    let during = open_fds(exporter.pid());
    assert!(
        during <= fds + 8,
        "{fds} fds before, {during} with 30 clients"
    );
    // One header byte per 200 ms never completes a request in 1 s.
    let closed = dribble(
        &mut conns,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n",
        Duration::from_millis(200),
        Duration::from_secs(8),
    );
    assert_eq!(closed, conns.len(), "slow clients left open");
    scrape_eventually(&exporter, Duration::from_secs(5));
}

#[test]
fn exporter_closes_a_stalled_tls_handshake() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    std::fs::write(dir.path().join("tls.crt"), cert.cert.pem()).expect("write cert");
    std::fs::write(dir.path().join("tls.key"), cert.signing_key.serialize_pem())
        .expect("write key");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n",
    )
    .expect("write web config");
    let web = web.to_string_lossy().into_owned();
    let args = [
        "--simulate",
        "--web-config-file",
        &web,
        "--tls-handshake-timeout",
        "1s",
    ];
    let exporter = Exporter::spawn_with_probe(&args, false);
    let mut conns = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while conns.is_empty() {
        assert!(std::time::Instant::now() < deadline, "{}", exporter.log());
        conns = idle_connections(exporter.port, 1);
        std::thread::sleep(Duration::from_millis(100));
    }
    // A ClientHello's first bytes, then nothing.
    use std::io::Write as _;
    conns[0].write_all(&[0x16, 0x03, 0x01]).expect("send");
    assert!(closed_by_peer(&mut conns[0], Duration::from_secs(5)));
}

#[test]
fn exporter_basic_auth_survives_a_wrong_password_flood() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hash = bcrypt::hash("s3cret", 8).expect("bcrypt");
    let web = dir.path().join("web.yml");
    std::fs::write(&web, format!("basic_auth_users:\n  prometheus: {hash}\n")).expect("write");
    let web = web.to_string_lossy().into_owned();
    let exporter = Exporter::spawn_with_probe(&["--simulate", "--web-config-file", &web], false);
    let url = exporter.url("/metrics");
    let good = basic("prometheus", "s3cret");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get_with(&url, &good) != 200 {
        assert!(std::time::Instant::now() < deadline, "{}", exporter.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    // Unknown and known users cost the same bcrypt time.
    let known = median_ms(5, || {
        assert_eq!(get_with(&url, &basic("prometheus", "x")), 401)
    });
    let unknown = median_ms(5, || {
        assert_eq!(get_with(&url, &basic("mallory", "x")), 401)
    });
    assert!(
        unknown > known / 3.0 && unknown < known * 3.0,
        "known user {known:.1} ms, unknown {unknown:.1} ms"
    );
    let quiet = median_ms(9, || assert_eq!(get_with(&url, &good), 200));
    let stop = Arc::new(AtomicBool::new(false));
    let flood: Vec<_> = (0..8)
        .map(|t| {
            let (stop, url) = (stop.clone(), url.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    get_with(&url, &basic("prometheus", &format!("guess-{t}-{i}")));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let flooded = median_ms(9, || assert_eq!(get_with(&url, &good), 200));
    stop.store(true, Ordering::Relaxed);
    for f in flood {
        let _ = f.join();
    }
    eprintln!(
        "known {known:.1} ms, unknown {unknown:.1} ms; authorized quiet {quiet:.1} ms, flooded {flooded:.1} ms"
    );
    // Before, each scrape queued behind every pending bcrypt check (seconds).
    assert!(
        flooded < quiet * 10.0 + 100.0,
        "authorized scrape {quiet:.1} ms quiet, {flooded:.1} ms during the flood"
    );
}

/// Opens `n` TLS connections that negotiate h2 and send the preface and an
/// empty SETTINGS frame, `n` plain connections to the metrics port that
/// send nothing, and `n` plaintext h2 connections (preface + SETTINGS) to
/// the KEDA port; prints how many of each the server closed within `wait`
/// seconds.
const SILENT_CLIENTS: &str = r#"
import socket, ssl, sys, time
api, metrics, keda, n = (int(a) for a in sys.argv[1:5])
wait = float(sys.argv[5])
preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])
h2, plain, grpc = [], [], []
for _ in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", api)), server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
    s.sendall(preface)
    h2.append(s)
    plain.append(socket.create_connection(("127.0.0.1", metrics)))
    g = socket.create_connection(("127.0.0.1", keda))
    g.sendall(preface)
    grpc.append(g)
def closed(s, deadline):
    while True:
        s.settimeout(max(deadline - time.time(), 0.01))
        try:
            if not s.recv(4096):
                return True
        except (socket.timeout, TimeoutError):
            return False
        except (OSError, ssl.SSLError):
            return True
deadline = time.time() + wait
print(*(sum(closed(s, deadline) for s in group) for group in (h2, plain, grpc)))
"#;

#[test]
fn adapter_closes_silent_http2_idle_metrics_and_keda_connections() {
    use gpuscale_e2e::adapter::{client::Adapter, procs};
    let dir = tempfile::tempdir().expect("tempdir");
    let dead = procs::free_port();
    let keda = procs::free_port();
    let adapter = Adapter::start(
        &[
            "--dev".into(),
            format!("--prometheus-url=http://127.0.0.1:{dead}"),
            format!("--keda-listen=127.0.0.1:{keda}"),
            "--idle-timeout=1s".into(),
        ],
        dir.path().join("adapter.log"),
    );
    let out = gpuscale_e2e::python::command()
        .args(["-c", SILENT_CLIENTS])
        .args([adapter.port, adapter.metrics_port, keda].map(|p| p.to_string()))
        .args(["20", "10"])
        .output()
        .expect("run python");
    let counts = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        counts,
        "20 20 20",
        "closed (API h2, metrics, KEDA h2) of 20 each; {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        adapter.guard.log_tail(20)
    );
    assert!(
        procs::get(&format!(
            "http://127.0.0.1:{}/healthz",
            adapter.metrics_port
        ))
        .is_some()
    );
}
