//! Building and running processes for the adapter tests. Children are killed
//! on drop, and a tiny watchdog kills them when the test process exits (the
//! shared Prometheus and adapter live in statics, which are never dropped).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bins;

/// The freshly built `gpuscale-adapter` binary.
pub fn adapter_bin() -> PathBuf {
    bins::adapter()
}

pub use crate::free_port;

/// A child process killed on drop and when the test process exits.
pub struct Guarded {
    pub child: Child,
    watchdog: Option<Child>,
    pub log: PathBuf,
}

impl Guarded {
    /// Spawn `cmd` with stdout/stderr into `log`.
    pub fn spawn(cmd: Command, log: PathBuf) -> Self {
        Self::spawn_cleaning(cmd, log, None)
    }

    /// Like [`Guarded::spawn`]; the watchdog also removes `dir` when the
    /// test process exits (for temp dirs owned by statics).
    pub fn spawn_cleaning(mut cmd: Command, log: PathBuf, dir: Option<&std::path::Path>) -> Self {
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; kill -9 {child} 2>/dev/null; {rm}",
            me = std::process::id(),
            child = child.id(),
            rm = dir.map_or(String::new(), |d| format!(
                "sleep 0.5; rm -rf '{}'",
                d.display()
            ))
        );
        let watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        Self {
            child,
            watchdog,
            log,
        }
    }

    /// The log so far (for assertion messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(w) = &mut self.watchdog {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// Poll `f` until it returns `Some` (a generous bound so a slow machine is
/// not a failure; no test asserts on timing).
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An HTTP agent that returns non-2xx answers instead of errors.
pub fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// GET a plain-HTTP URL: (status, body).
pub fn get(url: &str) -> Option<(u16, String)> {
    let mut r = http().get(url).call().ok()?;
    let status = r.status().as_u16();
    let body = r.body_mut().read_to_string().ok()?;
    Some((status, body))
}
