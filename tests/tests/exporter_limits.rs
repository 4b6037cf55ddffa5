//! The exporter against clients that hold it by time rather than by count,
//! on 127.0.0.1: pipelining clients that never read their responses on
//! every connection slot, and a flood of wrong passwords from another
//! address while a Prometheus logs in for the first time.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use base64::Engine as _;
use gpuscale_e2e::exporter::Exporter;
use gpuscale_e2e::hostile::closed_by_peer;

fn basic(user: &str, pass: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!("Basic {b64}")
}

/// Status of a GET /metrics with `Authorization: auth` (0: no answer).
fn get_with(url: &str, auth: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    agent
        .get(url)
        .header("Authorization", auth)
        .call()
        .map_or(0, |r| r.status().as_u16())
}

/// A web config with `users` users `u0`, `u1`, … whose password is `pw-<name>`.
fn web_config(dir: &std::path::Path, users: usize, cost: u32) -> String {
    let mut yaml = String::from("basic_auth_users:\n");
    for i in 0..users {
        let hash = bcrypt::hash(format!("pw-u{i}"), cost).expect("bcrypt");
        yaml.push_str(&format!("  u{i}: {hash}\n"));
    }
    let path = dir.join("web.yml");
    std::fs::write(&path, yaml).expect("write web config");
    path.to_string_lossy().into_owned()
}

fn wait_authorized(e: &Exporter, auth: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while get_with(&e.url("/metrics"), auth) != 200 {
        assert!(Instant::now() < deadline, "never authorized:\n{}", e.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `n` requests for `path` in one write, never read.
fn pipeline(port: u16, path: &str, auth: &str, n: usize) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let one = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n");
    c.write_all(one.repeat(n).as_bytes()).expect("pipeline");
    c
}

#[test]
fn slow_readers_on_every_slot_do_not_lock_out_an_authorized_scrape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let web = web_config(dir.path(), 1, 4);
    let args = [
        "--simulate",
        "--web-config-file",
        &web,
        "--max-connections",
        "4",
        "--write-timeout",
        "2s",
        // The write timeout, not the pipelining cap, must free the slots.
        "--max-pipelined-requests",
        "1024",
    ];
    let exporter = Exporter::spawn(&args);
    let auth = basic("u0", "pw-u0");
    wait_authorized(&exporter, &auth);
    // 200 × ~36 KB is far more than the socket buffers take.
    let mut readers: Vec<TcpStream> = (0..4)
        .map(|_| pipeline(exporter.port, "/metrics", &auth, 200))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let began = Instant::now();
    let status = get_with(&exporter.url("/metrics"), &auth);
    let took = began.elapsed();
    assert_eq!(status, 200, "{}", exporter.log());
    assert!(
        took < Duration::from_secs(3),
        "authorized scrape took {took:?} with every slot held by a slow reader"
    );
    // The slow readers themselves were closed, not merely outnumbered.
    for r in &mut readers {
        drain_until_closed(r, Duration::from_secs(5));
    }
}

/// Reads until the server closes.
fn drain_until_closed(c: &mut TcpStream, within: Duration) {
    let deadline = Instant::now() + within;
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut buf = [0u8; 64 * 1024];
    loop {
        assert!(Instant::now() < deadline, "slow reader still open");
        match c.read(&mut buf) {
            Ok(0) => return,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            _ => {}
        }
    }
}

#[test]
fn pipelining_past_the_cap_gets_429_and_the_connection_closes() {
    let exporter = Exporter::spawn(&["--simulate", "--max-pipelined-requests", "3"]);
    let mut c = pipeline(exporter.port, "/healthz", "none", 6);
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut answer = String::new();
    c.read_to_string(&mut answer).expect("read until close");
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 3, "{answer}");
    assert_eq!(answer.matches("HTTP/1.1 429").count(), 1, "{answer}");
    assert!(answer.contains("--max-pipelined-requests"), "{answer}");
    // A client that does not pipeline is unaffected.
    let mut plain = TcpStream::connect(("127.0.0.1", exporter.port)).expect("connect");
    for _ in 0..5 {
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("send");
        let mut buf = [0u8; 512];
        let n = plain.read(&mut buf).expect("answer");
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    }
    assert!(!closed_by_peer(&mut plain, Duration::from_millis(200)));
}

/// Wrong passwords from 127.0.0.2 on `conns` keep-alive connections (each
/// reconnects when closed) for `secs` seconds; prints the status counts.
const FLOOD: &str = r#"
import base64, socket, sys, threading, time
port, conns, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
end = time.time() + secs
counts = {}
lock = threading.Lock()
def run(t):
    i = 0
    s = None
    while time.time() < end:
        i += 1
        auth = base64.b64encode(f"u0:guess-{t}-{i}".encode()).decode()
        req = f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n\r\n".encode()
        try:
            if s is None:
                s = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
                s.settimeout(30)
            s.sendall(req)
            head = s.recv(65536).decode(errors="replace")
            code = head.split(" ", 2)[1] if head.startswith("HTTP/1.1 ") else "closed"
            if code == "closed" or "connection: close" in head.lower():
                s.close(); s = None
        except OSError:
            code = "error"
            if s: s.close()
            s = None
        with lock:
            counts[code] = counts.get(code, 0) + 1
ts = [threading.Thread(target=run, args=(t,)) for t in range(conns)]
for t in ts: t.start()
print("ready", flush=True)
for t in ts: t.join()
print(sorted(counts.items()), flush=True)
"#;

/// Median time of a first login (a user whose credentials are not cached).
fn first_logins(e: &Exporter, users: std::ops::Range<usize>) -> f64 {
    let mut ms: Vec<f64> = users
        .map(|i| {
            let began = Instant::now();
            let status = get_with(
                &e.url("/metrics"),
                &basic(&format!("u{i}"), &format!("pw-u{i}")),
            );
            assert_eq!(status, 200, "first login of u{i}:\n{}", e.log());
            began.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

#[test]
fn a_first_login_during_a_wrong_password_flood_waits_a_few_checks_not_the_flood() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let web = web_config(dir.path(), 7, 6);
    let exporter = Exporter::spawn(&["--simulate", "--web-config-file", &web]);
    // Warm the server up with another user's login, then measure quiet.
    wait_authorized(&exporter, &basic("u6", "pw-u6"));
    let quiet = first_logins(&exporter, 0..3);
    let mut flood = gpuscale_e2e::python::command()
        .args(["-c", FLOOD, &exporter.port.to_string(), "200", "8"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the flood");
    let mut out = std::io::BufReader::new(flood.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("flood started");
    std::thread::sleep(Duration::from_secs(1));
    let flooded = first_logins(&exporter, 3..6);
    line.clear();
    out.read_line(&mut line).expect("flood counts");
    let _ = flood.wait();
    eprintln!(
        "first login: quiet {quiet:.1} ms, during the flood {flooded:.1} ms; flood answers {line}"
    );
    // docs/exporter.md: the check in progress, one of the flooding address,
    // then its own: 3 checks; margin for a loaded 2-core machine.
    assert!(
        flooded < quiet * 6.0 + 150.0,
        "first login {quiet:.1} ms quiet, {flooded:.1} ms during the flood"
    );
    assert!(line.contains("'401'") && line.contains("'429'"), "{line}");
}
