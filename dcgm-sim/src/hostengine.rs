//! A simulated `nv-hostengine`: the TCP peer the simulator library talks to
//! in standalone mode. It answers every request the library sends (one
//! line each, the DCGM function and its arguments) and keeps a log of them,
//! so a test can see what the exporter asked for. It can be stopped and
//! started again on the same port, or made to stop answering (a host
//! engine that hangs) and to answer again.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a request held by a hang looks at the stop and hang switches.
const TICK: Duration = Duration::from_millis(10);

#[derive(Default)]
struct Inner {
    stop: AtomicBool,
    hang: AtomicBool,
    log: Mutex<Vec<String>>,
    /// Open connections by id (to close them on stop); each removes itself.
    streams: Mutex<HashMap<u64, TcpStream>>,
    next: AtomicU64,
}

/// A running simulated host engine; stopped (its connections closed) on drop.
pub struct HostEngine {
    addr: SocketAddr,
    inner: Arc<Inner>,
    accept: Option<JoinHandle<()>>,
}

impl HostEngine {
    /// Listens on `addr` (`127.0.0.1:0` picks a free port).
    pub fn start(addr: &str) -> std::io::Result<HostEngine> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Inner::default());
        let shared = inner.clone();
        let accept = std::thread::Builder::new()
            .name("hostengine-accept".into())
            .spawn(move || accept_loop(&listener, &shared))?;
        Ok(HostEngine {
            addr,
            inner,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on requests are read but not answered (`true`), or answered
    /// again (`false`, the ones waiting included).
    pub fn hang(&self, on: bool) {
        self.inner.hang.store(on, Ordering::SeqCst);
    }

    /// Every request received so far, oldest first (`dcgmGroupAddEntity 1 1 0`).
    pub fn requests(&self) -> Vec<String> {
        lock(&self.inner.log).clone()
    }

    /// Stops listening and closes every connection (clients see it at their
    /// next call).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept, which then sees `stop`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        for (_, s) in lock(&self.inner.streams).drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

impl Drop for HostEngine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept_loop(listener: &TcpListener, inner: &Arc<Inner>) {
    loop {
        let accepted = listener.accept();
        if inner.stop.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok((stream, _)) => {
                let id = inner.next.fetch_add(1, Ordering::SeqCst);
                if let Ok(copy) = stream.try_clone() {
                    lock(&inner.streams).insert(id, copy);
                }
                let inner = inner.clone();
                let _ = std::thread::Builder::new()
                    .name("hostengine-conn".into())
                    .spawn(move || {
                        serve(stream, &inner);
                        lock(&inner.streams).remove(&id);
                    });
            }
            Err(_) => std::thread::sleep(TICK),
        }
    }
}

/// Answers each request line with `ok`, after any hang is over.
fn serve(stream: TcpStream, inner: &Inner) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        lock(&inner.log).push(line.trim_end().to_string());
        while inner.hang.load(Ordering::SeqCst) {
            if inner.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(TICK);
        }
        if inner.stop.load(Ordering::SeqCst) || out.write_all(b"ok\n").is_err() {
            return;
        }
    }
}
