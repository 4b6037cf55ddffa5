//! What a hostile client does to a server, and how to see what it cost:
//! idle and slow connections from this test process, the server's CPU time,
//! open files and resident memory read from /proc.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Opens up to `n` TCP connections to 127.0.0.1:`port` that send nothing;
/// connections the server's backlog refuses are skipped.
pub fn idle_connections(port: u16, n: usize) -> Vec<TcpStream> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    (0..n)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok())
        .collect()
}

/// Sends `bytes` one byte per `every` on each connection (slowloris) until
/// the server closes it or `total` passes; returns how many it closed.
pub fn dribble(conns: &mut [TcpStream], bytes: &[u8], every: Duration, total: Duration) -> usize {
    let deadline = Instant::now() + total;
    let mut open: Vec<bool> = vec![true; conns.len()];
    for &b in bytes.iter().cycle() {
        if Instant::now() > deadline || !open.contains(&true) {
            break;
        }
        for (c, alive) in conns.iter_mut().zip(open.iter_mut()) {
            if *alive && (c.write_all(&[b]).is_err() || closed_now(c)) {
                *alive = false;
            }
        }
        std::thread::sleep(every);
    }
    open.iter().filter(|a| !**a).count()
}

/// Whether the peer has closed (or reset) the connection, waiting up to `within`.
pub fn closed_by_peer(c: &mut TcpStream, within: Duration) -> bool {
    let _ = c.set_read_timeout(Some(within));
    let mut buf = [0u8; 512];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }
}

fn closed_now(c: &mut TcpStream) -> bool {
    let _ = c.set_nonblocking(true);
    let mut buf = [0u8; 512];
    let closed = match c.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = c.set_nonblocking(false);
    closed
}

/// User plus system CPU seconds the process has used.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0);
    ticks / 100.0
}

/// Open file descriptors of the process.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Resident memory in MiB.
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The median of `n` runs of `f`, in milliseconds.
pub fn median_ms(n: usize, mut f: impl FnMut()) -> f64 {
    let mut ms: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[n / 2]
}

/// `Authorization` value for HTTP basic auth.
pub fn basic(user: &str, pass: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!("Basic {b64}")
}

/// Status of a GET with `Authorization: auth` (0: no answer within 30 s).
pub fn get_with(url: &str, auth: &str) -> u16 {
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
