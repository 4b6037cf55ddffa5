//! What `gpuscale-top --help` tells a user: the log filter flag and
//! the environment variables the binary reads; a log filter that does not
//! parse is refused (exit 2, naming `--log-level`) before anything starts.

use std::process::{Command, Output};

fn top(args: &[&str], rust_log: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuscale-top"));
    cmd.args(args).env_remove("RUST_LOG");
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    cmd.output().expect("run gpuscale-top")
}

#[test]
fn help_names_the_log_level_and_the_environment() {
    let out = top(&["--help"], None);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(help.contains("--log-level <LOG_LEVEL>"), "{help}");
    let env = help
        .split("\nEnvironment:\n")
        .nth(1)
        .expect("an Environment section");
    for var in ["RUST_LOG", "NO_COLOR"] {
        assert!(env.contains(var), "{var} missing from: {env}");
    }
}

#[test]
fn a_log_filter_that_does_not_parse_is_refused() {
    for (args, rust_log) in [
        (&["--log-level=nonsense["][..], None),
        (&[][..], Some("nonsense[")),
    ] {
        let out = top(args, rust_log);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {rust_log:?}: {err}");
        assert!(err.contains("--log-level"), "{err}");
        assert!(err.contains("nonsense["), "{err}");
        assert!(out.stdout.is_empty());
    }
}
