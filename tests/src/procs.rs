//! Child processes for the end-to-end tests: output in a log file, killed
//! and reaped on drop. Processes owned by statics are never dropped, so
//! [`Proc::spawn_watched`] adds a watchdog that kills them (and removes
//! their temp dir) when the test process exits.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A `prometheus` (Debian package) reading `config`, with its TSDB under
/// `dir` and its API on 127.0.0.1:`port`.
pub fn prometheus(config: &Path, dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    cmd
}

pub struct Proc {
    name: String,
    pub child: Child,
    watchdog: Option<Child>,
    pub log: PathBuf,
}

impl Proc {
    /// Spawns `cmd` with stdout and stderr into `log`.
    pub fn spawn(name: &str, cmd: Command, log: &Path) -> Self {
        Self::start(name, cmd, log, None)
    }

    /// Like [`Proc::spawn`], and killed when the test process exits even if
    /// never dropped; `cleanup` is removed then too.
    pub fn spawn_watched(name: &str, cmd: Command, log: &Path, cleanup: Option<&Path>) -> Self {
        Self::start(name, cmd, log, Some(cleanup))
    }

    fn start(name: &str, mut cmd: Command, log: &Path, watch: Option<Option<&Path>>) -> Self {
        let out =
            std::fs::File::create(log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().expect("clone log handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({cmd:?}): {e}"));
        let watchdog = watch.and_then(|cleanup| watchdog(child.id(), cleanup));
        Self {
            name: name.to_string(),
            child,
            watchdog,
            log: log.to_path_buf(),
        }
    }

    /// The whole output so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of the output, headed by the process's name.
    pub fn log_tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(n);
        format!(
            "--- {} (last {} lines) ---\n{}",
            self.name,
            lines.len() - start,
            lines[start..].join("\n")
        )
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Panics with the log tail if the process has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited with {status}\n{}", self.name, self.log_tail(40));
        }
    }
}

/// A shell that kills `child` (and removes `cleanup`) once the test process
/// exits: for processes owned by statics, which are never dropped.
pub fn watchdog(child: u32, cleanup: Option<&Path>) -> Option<Child> {
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; kill -9 {child} 2>/dev/null; {rm}",
        me = std::process::id(),
        rm = cleanup.map_or(String::new(), |d| format!(
            "sleep 0.5; rm -rf '{}'",
            d.display()
        ))
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(w) = &mut self.watchdog {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}
