//! The exporter against clients that hold it by time rather than by count,
//! on 127.0.0.1: pipelining clients that never read their responses on
//! every connection slot, and a flood of wrong passwords from another
//! address while a Prometheus logs in for the first time.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gpuscale_e2e::exporter::Exporter;
use gpuscale_e2e::hostile::{basic, closed_by_peer, get_with, open_fds};

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
    std::thread::sleep(Duration::from_millis(200));
    let fds = open_fds(exporter.pid());
    // 200 × ~36 KB is far more than the socket buffers take.
    let readers: Vec<TcpStream> = (0..4)
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
    // The slow readers themselves were closed (their sockets are gone from
    // the exporter while they still hold theirs), not merely outnumbered.
    let deadline = Instant::now() + Duration::from_secs(3);
    while open_fds(exporter.pid()) > fds {
        assert!(
            Instant::now() < deadline,
            "{} fds, {fds} before the slow readers",
            open_fds(exporter.pid())
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(readers);
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

/// The exporter under `--simulate` with its temporary directory in `tmp`.
fn simulate_in(tmp: &std::path::Path, scenario: &str, port: u16) -> std::process::Child {
    std::process::Command::new(gpuscale_e2e::bins::exporter())
        .args([
            "--simulate",
            scenario,
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--simulator-lib")
        .arg(gpuscale_e2e::bins::simulator_lib())
        .env("TMPDIR", tmp)
        .env_remove("GPUSCALE_SIM_SCENARIO")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start gpuscale-exporter")
}

fn simnode_dirs(tmp: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .expect("read tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gpuscale-simnode-"))
        .collect()
}

/// SIGTERM, then the exit status within `within` (None: still running).
fn terminate(child: &mut std::process::Child, within: Duration) -> Option<i32> {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code().or(Some(-1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn the_simulated_nodes_directory_is_removed_on_every_exit_path() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = gpuscale_e2e::bins::repo_root().join("tests/scenarios/pods-story.yaml");
    let scenario = scenario.to_string_lossy().into_owned();
    // Left by a process that was killed (SIGKILL): removed at the next start.
    let mut gone = std::process::Command::new("true").spawn().expect("spawn");
    let dead = gone.id();
    gone.wait().expect("wait");
    std::fs::create_dir_all(tmp.path().join(format!("gpuscale-simnode-{dead}-0/proc")))
        .expect("stale dir");
    // Once serving: the stale directory is gone, its own exists until SIGTERM.
    let port = gpuscale_e2e::free_port();
    let mut child = simulate_in(tmp.path(), &scenario, port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while ureq::get(&format!("http://127.0.0.1:{port}/healthz"))
        .call()
        .is_err()
    {
        assert!(Instant::now() < deadline, "exporter never served");
        std::thread::sleep(Duration::from_millis(50));
    }
    let own = format!("gpuscale-simnode-{}-0", child.id());
    assert_eq!(simnode_dirs(tmp.path()), [own]);
    assert_eq!(terminate(&mut child, Duration::from_secs(10)), Some(0));
    assert!(simnode_dirs(tmp.path()).is_empty());
    // SIGTERM at different points of the start.
    for delay_ms in [0, 50, 150, 400, 1000] {
        let mut child = simulate_in(tmp.path(), &scenario, gpuscale_e2e::free_port());
        std::thread::sleep(Duration::from_millis(delay_ms));
        let code = terminate(&mut child, Duration::from_secs(10));
        assert!(
            code.is_some(),
            "still running 10 s after SIGTERM (at {delay_ms} ms)"
        );
        let left = simnode_dirs(tmp.path());
        assert!(
            left.is_empty(),
            "left behind after SIGTERM at {delay_ms} ms: {left:?}"
        );
    }
}

#[test]
fn an_alias_scenario_and_a_fifo_are_refused_at_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut yaml = String::from("gpus:\n");
    for g in 0..256 {
        yaml.push_str(&format!(
            "  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-00000000-0000-4000-8000-{g:012}\n    pci_bus_id: \"00000000:{g:02x}:00.0\"\n    memory_mib: 81559\n"
        ));
        if g == 0 {
            yaml.push_str("    processes: &p\n");
            for pid in 0..20_000 {
                yaml.push_str(&format!("      - {{ pid: {pid}, memory_mib: 1 }}\n"));
            }
        } else {
            yaml.push_str("    processes: *p\n");
        }
    }
    let aliases = tmp.path().join("aliases.yaml");
    std::fs::write(&aliases, yaml).expect("write");
    // Built before the clock starts.
    gpuscale_e2e::bins::exporter();
    let fifo = tmp.path().join("fifo.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    for (path, needle) in [
        (&aliases, "YAML aliases"),
        (&fifo, "not a regular file (a FIFO)"),
    ] {
        let began = Instant::now();
        let port = gpuscale_e2e::free_port();
        let mut child = simulate_in(tmp.path(), &path.to_string_lossy(), port);
        while child.try_wait().ok().flatten().is_none() {
            if began.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let took = began.elapsed();
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(took < Duration::from_secs(1), "refused after {took:?}");
    }
    assert!(simnode_dirs(tmp.path()).is_empty());
}
