//! Left running, `gpuscale-top` keeps going when its source goes away: it
//! says the source is down, and shows the node again once it answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Serves `body` as `/metrics` to every request on `listener`.
fn serve(listener: TcpListener, body: String) {
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body.as_bytes());
        }
    });
}

#[test]
fn a_source_that_is_down_is_shown_and_the_view_recovers() {
    let port = gpuscale_e2e::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args(["--exporter", &url, "--interval", "500ms", "--timeout", "1s"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start gpuscale-top");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_for = |want: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(200))
                && line.contains(want)
            {
                return line;
            }
        }
        panic!("no line with {want:?}");
    };
    let down = wait_for("SOURCE DOWN");
    assert!(down.contains(&format!("exporter {url}/metrics")), "{down}");
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the freed port");
    let metrics = "gpu_info{node=\"n1\",gpu=\"0\",uuid=\"GPU-1\",model=\"NVIDIA L4\"} 1\n\
                   gpu_utilization_ratio{node=\"n1\",gpu=\"0\",uuid=\"GPU-1\"} 0.42\n";
    serve(listener, metrics.into());
    let up = wait_for("L4");
    assert!(up.contains("42%"), "{up}");
    let _ = child.kill();
    let _ = child.wait();
}
