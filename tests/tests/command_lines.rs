//! What every gpuscale binary's `--help` tells a user: the log filter flag
//! and the environment variables it reads; and a log filter that does not
//! parse, from the flag or from `RUST_LOG`, is refused (exit 2, naming
//! `--log-level`) before anything starts. The adapter's own story
//! (adapter/tests/command_line.rs) also covers its subcommands.

use std::process::{Command, Output};

/// Each binary, and the variables its `--help` must name beside
/// `RUST_LOG` and `NO_COLOR`.
const BINARIES: &[(&str, &[&str])] = &[
    ("gpuscale-activator", &["KUBECONFIG", "GPUSCALE_ACTIVATOR_"]),
    ("gpuscale-advisor", &["GPUSCALE_PROMETHEUS_URL"]),
    ("gpuscale-sim", &["TMPDIR"]),
    ("gpuscale-top", &[]),
];

fn run(bin: &str, args: &[&str], rust_log: Option<&str>) -> Output {
    gpuscale_e2e::bins::ensure_built();
    let mut cmd = Command::new(gpuscale_e2e::bins::target_dir().join(bin));
    cmd.args(args).env_remove("RUST_LOG");
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    cmd.output().unwrap_or_else(|e| panic!("run {bin}: {e}"))
}

#[test]
fn every_help_names_the_log_level_and_the_environment() {
    for (bin, vars) in BINARIES {
        let out = run(bin, &["--help"], None);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{bin}: {help}");
        assert!(help.contains("--log-level <LOG_LEVEL>"), "{bin}: {help}");
        let env = help
            .split("\nEnvironment:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{bin}: no Environment section: {help}"));
        for var in ["RUST_LOG", "NO_COLOR"].iter().chain(vars.iter()) {
            assert!(env.contains(var), "{bin}: {var} missing from: {env}");
        }
    }
}

#[test]
fn a_log_filter_that_does_not_parse_is_refused_by_every_binary() {
    for (bin, _) in BINARIES {
        for (args, rust_log) in [
            (&["--log-level=nonsense["][..], None),
            (&[][..], Some("nonsense[")),
        ] {
            let out = run(bin, args, rust_log);
            let err = String::from_utf8_lossy(&out.stderr);
            let what = format!("{bin} {args:?} RUST_LOG={rust_log:?}");
            assert_eq!(out.status.code(), Some(2), "{what}: {err}");
            assert!(
                err.contains("--log-level") && err.contains("nonsense["),
                "{what}: {err}"
            );
            assert!(out.stdout.is_empty(), "{what}");
        }
    }
}
