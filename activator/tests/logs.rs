//! An operator reads the activator's log in a file, a pipe or a terminal
//! with `NO_COLOR` set: plain text, no colour codes. On a terminal without
//! it the levels are coloured (which shows the check sees them).

use std::process::Command;

/// The activator failing at start (no Kubernetes API: a kubeconfig that
/// does not exist), its log as written to stderr; under `script` (a
/// pseudo-terminal) when `tty`.
fn failing_start(tty: bool, no_color: bool) -> String {
    let dir = std::env::temp_dir().join(format!(
        "activator-logs-{}-{tty}-{no_color}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let routes = dir.join("routes.yaml");
    std::fs::write(
        &routes,
        "routes:\n  - name: chat\n    service: {namespace: ml, name: chat, port: http}\n    \
         target: {kind: Deployment, name: chat}\n",
    )
    .expect("write routes");
    let bin = env!("CARGO_BIN_EXE_gpuscale-activator");
    let args = format!(
        "{bin} --config {} --kubeconfig {} --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0",
        routes.display(),
        dir.join("missing-kubeconfig").display()
    );
    let mut cmd = if tty {
        // util-linux script: the command's stdout and stderr on a pty, copied to ours.
        let mut c = Command::new("script");
        c.args(["-qec", &format!("{args} 2>&1"), "/dev/null"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &args]);
        c
    };
    cmd.env_remove("NO_COLOR").env_remove("RUST_LOG");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd
        .output()
        .expect("run the activator (script: util-linux)");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "started without a Kubernetes API");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn logs_have_no_colour_codes_off_a_terminal_or_with_no_color() {
    let piped = failing_start(false, false);
    assert!(piped.contains("ERROR"), "{piped}");
    assert!(!piped.contains('\u{1b}'), "ANSI codes in a pipe: {piped:?}");
    let no_color = failing_start(true, true);
    assert!(no_color.contains("ERROR"), "{no_color}");
    assert!(
        !no_color.contains('\u{1b}'),
        "ANSI codes with NO_COLOR: {no_color:?}"
    );
    let coloured = failing_start(true, false);
    assert!(
        coloured.contains('\u{1b}'),
        "no colour on a terminal: {coloured:?}"
    );
}
