//! What every gpuscale binary's `--help` tells a user: the log filter flag
//! and the environment variables it reads; a log filter that does not
//! parse, from the flag or from its variable (`RUST_LOG`, the exporter's
//! `GPUSCALE_LOG_LEVEL`), is refused (exit 2, naming `--log-level`) before
//! anything starts; and an operator reads a failing start's log in a
//! pipe, or a terminal with `NO_COLOR` set, as plain text, coloured only
//! on a terminal without it. The adapter's own story
//! (adapter/tests/command_line.rs) also covers its subcommands, the
//! activator's (activator/tests/command_line.rs) its own.

use std::path::Path;
use std::process::{Command, Output};

/// Each binary, the variable of its log filter, and the variables its
/// `--help` must name beside that one and `NO_COLOR`.
const BINARIES: &[(&str, &str, &[&str])] = &[
    (
        "gpuscale-activator",
        "RUST_LOG",
        &["KUBECONFIG", "GPUSCALE_ACTIVATOR_"],
    ),
    ("gpuscale-advisor", "RUST_LOG", &["GPUSCALE_PROMETHEUS_URL"]),
    (
        "gpuscale-exporter",
        "GPUSCALE_LOG_LEVEL",
        &["GPUSCALE_", "NODE_NAME", "KUBECONFIG"],
    ),
    ("gpuscale-sim", "RUST_LOG", &["TMPDIR"]),
    ("gpuscale-top", "RUST_LOG", &[]),
];

fn run(bin: &str, args: &[&str], log_var: (&str, Option<&str>)) -> Output {
    gpuscale_e2e::bins::ensure_built();
    let mut cmd = Command::new(gpuscale_e2e::bins::target_dir().join(bin));
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("GPUSCALE_LOG_LEVEL");
    if let (var, Some(filter)) = log_var {
        cmd.env(var, filter);
    }
    cmd.output().unwrap_or_else(|e| panic!("run {bin}: {e}"))
}

#[test]
fn every_help_names_the_log_level_and_the_environment() {
    for (bin, log_var, vars) in BINARIES {
        let out = run(bin, &["--help"], (log_var, None));
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{bin}: {help}");
        assert!(help.contains("--log-level <LOG_LEVEL>"), "{bin}: {help}");
        let env = help
            .split("\nEnvironment:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{bin}: no Environment section: {help}"));
        for var in [*log_var, "NO_COLOR"].iter().chain(vars.iter()) {
            assert!(env.contains(var), "{bin}: {var} missing from: {env}");
        }
    }
}

#[test]
fn a_log_filter_that_does_not_parse_is_refused_by_every_binary() {
    for (bin, log_var, _) in BINARIES {
        for (args, filter) in [
            (&["--log-level=nonsense["][..], None),
            (&[][..], Some("nonsense[")),
        ] {
            let out = run(bin, args, (log_var, filter));
            let err = String::from_utf8_lossy(&out.stderr);
            let what = format!("{bin} {args:?} {log_var}={filter:?}");
            assert_eq!(out.status.code(), Some(2), "{what}: {err}");
            assert!(
                err.contains("--log-level") && err.contains("nonsense["),
                "{what}: {err}"
            );
            assert!(out.stdout.is_empty(), "{what}");
        }
    }
}

/// A start that fails at its first read, for each binary whose log the
/// colour story reads: its arguments, given a scratch directory.
/// The arguments of a failing start, given a scratch directory.
type Arguments = fn(&Path) -> Vec<String>;

const FAILING_STARTS: &[(&str, Arguments)] = &[
    // A Prometheus nobody listens on.
    ("gpuscale-adapter", |_| {
        vec![
            "check-prometheus".into(),
            "--prometheus-url=http://127.0.0.1:9".into(),
        ]
    }),
    // No Kubernetes API: a kubeconfig that does not exist.
    ("gpuscale-activator", |dir| {
        let routes = dir.join("routes.yaml");
        std::fs::write(
            &routes,
            "routes:\n  - name: chat\n    service: {namespace: ml, name: chat, port: http}\n    \
             target: {kind: Deployment, name: chat}\n",
        )
        .expect("write routes");
        vec![
            "serve".into(),
            format!("--config={}", routes.display()),
            format!("--kubeconfig={}", dir.join("missing-kubeconfig").display()),
            "--listen=127.0.0.1:0".into(),
            "--metrics-listen=127.0.0.1:0".into(),
        ]
    }),
];

/// `bin args` failing, its log as written to stderr; under `script` (a
/// pseudo-terminal, util-linux) when `tty`.
fn failing_log(bin: &str, args: &[String], tty: bool, no_color: bool) -> String {
    let line = std::iter::once(
        gpuscale_e2e::bins::target_dir()
            .join(bin)
            .display()
            .to_string(),
    )
    .chain(args.iter().cloned())
    .collect::<Vec<_>>()
    .join(" ");
    let mut cmd = if tty {
        let mut c = Command::new("script");
        c.args(["-qec", &format!("{line} 2>&1"), "/dev/null"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &line]);
        c
    };
    cmd.env_remove("NO_COLOR").env_remove("RUST_LOG");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().expect("run it (script: util-linux)");
    assert!(!out.status.success(), "{line}: started");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn logs_have_no_colour_codes_off_a_terminal_or_with_no_color() {
    gpuscale_e2e::bins::ensure_built();
    let dir = tempfile::tempdir().expect("temp dir");
    for (bin, args) in FAILING_STARTS {
        let args = args(dir.path());
        let piped = failing_log(bin, &args, false, false);
        assert!(piped.contains("ERROR"), "{bin}: {piped}");
        assert!(
            !piped.contains('\u{1b}'),
            "{bin}: ANSI codes in a pipe: {piped:?}"
        );
        let no_color = failing_log(bin, &args, true, true);
        assert!(no_color.contains("ERROR"), "{bin}: {no_color}");
        assert!(
            !no_color.contains('\u{1b}'),
            "{bin}: ANSI codes with NO_COLOR: {no_color:?}"
        );
        let coloured = failing_log(bin, &args, true, false);
        assert!(
            coloured.contains('\u{1b}'),
            "{bin}: no colour on a terminal: {coloured:?}"
        );
    }
}
