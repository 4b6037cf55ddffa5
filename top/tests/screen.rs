//! The interactive view, driven under tmux as an engineer would: at 80×24
//! the GPUs and their holders, `tab` to the workloads, `s` to sort, `/` to
//! filter, `?` for help, `q` to quit; at 200×50 the wide columns; and the
//! exporter stopped under it said on screen.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::once::node;

/// A tmux server of this test's own, killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(name: &str, cols: u16, rows: u16, url: &str) -> Self {
        Self::start_env(name, cols, rows, url, "")
    }

    /// As [`Tmux::start`], with `env` (`NAME=value …`) set for the view.
    fn start_env(name: &str, cols: u16, rows: u16, url: &str, env: &str) -> Self {
        let me = Self {
            socket: format!("gpuscale-top-{}-{name}", std::process::id()),
        };
        let top = format!(
            "env {env} {} --exporter {url} --interval 500ms",
            env!("CARGO_BIN_EXE_gpuscale-top")
        );
        let (x, y) = (cols.to_string(), rows.to_string());
        me.tmux(&["new-session", "-d", "-s", "top", "-x", &x, "-y", &y, &top]);
        me
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux (apt-get install tmux)")
    }

    /// The screen with its colours and attributes as escape codes.
    fn screen_styled(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-e", "-p", "-t", "top"]).stdout)
            .into()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "top"]).stdout).into()
    }

    /// Waits until the screen shows `want`, and returns it.
    fn wait_for(&self, want: &str) -> String {
        self.wait_for_all(&[want])
    }

    /// Waits until the screen shows every one of `wants` at once (a frame
    /// may be captured while the terminal is still drawing it), and
    /// returns it.
    fn wait_for_all(&self, wants: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.screen();
            if wants.iter().all(|w| s.contains(w)) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "screen never showed all of {wants:?}:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends keys one at a time (an Escape run together with the next key
    /// would read as Alt+key).
    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", "top", k]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn running(&self) -> bool {
        self.tmux(&["has-session", "-t", "top"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

#[test]
fn at_80x24_the_holders_are_shown_and_the_keys_work() {
    let e = node();
    let t = Tmux::start("small", 80, 24, &e.url(""));
    let s = t.wait_for_all(&[
        "llama-train-0",
        "research/notebook-6f8d9c7b5-q4w2x (jupyter)",
        "MIG 2   3g.40gb",
    ]);
    assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
    t.keys(&["Tab"]);
    let s = t.wait_for_all(&[
        "[workloads]",
        "inference/chat",
        "StatefulSet",
        "BOTTLENECK",
        "$/MTOK",
        "STATE",
    ]);
    assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
    t.keys(&["s", "s"]);
    let s = t.wait_for("sort: activity");
    let order: Vec<&str> = s
        .lines()
        .filter(|l| l.contains('/') && l.contains('%'))
        .collect();
    let llama = order.iter().position(|l| l.contains("llama-train"));
    let notebook = order.iter().position(|l| l.contains("research/notebook"));
    assert!(llama < notebook, "busiest first:\n{s}");
    t.keys(&["Tab", "/", "c", "h", "a", "t", "Enter"]);
    let s = t.wait_for_all(&["filter: chat", "chat-5d8f7b9c4-abcde", "share"]);
    assert!(!s.contains("llama-train-0"), "filtered out:\n{s}");
    t.keys(&["?"]);
    t.wait_for("this help");
    t.keys(&["Escape", "q"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!t.running(), "q did not quit");
}

#[test]
fn at_200x50_the_wide_columns_are_shown_and_a_stopped_exporter_is_said() {
    let e = node();
    let t = Tmux::start("wide", 200, 50, &e.url(""));
    t.wait_for_all(&[
        "SM/TENSOR/DRAM SRC",
        " gpm ",
        "sim-node-1 H100 80GB HBM3",
        "└ inference/ocr-7b5d9f8c6-k2l3m (server)",
    ]);
    drop(e);
    let s = t.wait_for("SOURCE DOWN");
    assert!(s.contains("llama-train-0"), "the last snapshot stays:\n{s}");
    assert!(t.running());
}

#[test]
fn holders_are_coloured_unless_no_color_is_set() {
    let e = node();
    let coloured = Tmux::start("colour", 80, 24, &e.url(""));
    coloured.wait_for("llama-train-0");
    let s = coloured.screen_styled();
    assert!(s.contains("\x1b[38;5;6m"), "holders in cyan:\n{s:?}");
    let plain = Tmux::start_env("plain", 80, 24, &e.url(""), "NO_COLOR=1");
    plain.wait_for("llama-train-0");
    let s = plain.screen_styled();
    assert!(
        !s.contains('\x1b'),
        "NO_COLOR: no colours or attributes:\n{s:?}"
    );
}
