//! Child processes for the alerts tests: killed on drop, output in a log file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process that is killed (and reaped) when dropped.
pub struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Spawns `cmd` with stdout and stderr into `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Self {
        let out =
            std::fs::File::create(log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().expect("clone log handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({cmd:?}): {e}"));
        Self {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        }
    }

    /// The last `n` lines of the process's output.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(n);
        format!(
            "--- {} (last {} lines) ---\n{}",
            self.name,
            lines.len() - start,
            lines[start..].join("\n")
        )
    }

    /// Panics with the log tail if the process has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited with {status}\n{}", self.name, self.log_tail(40));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 200 ms until it returns `Some`, or panics after `limit`
/// with `what` and the output of `context()` (process logs, state so far).
/// The limit is a safety net for a broken build, not a timing assertion.
pub fn eventually<T>(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("gave up waiting for {what} after {limit:?}\n{}", context());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Is an executable on PATH?
pub fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
        .unwrap_or(false)
}
