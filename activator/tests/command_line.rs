//! The run modes are subcommands (`serve`, the default, and
//! `check-config`); the old `--check-config` flag still works for one
//! release, with a warning naming the new form, and is refused beside a
//! subcommand. (The log's colours: tests/tests/command_lines.rs.)

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_gpuscale-activator");

const ROUTES: &str = "routes:\n  - name: chat\n    host: models.example.com\n    \
    service: {namespace: ml, name: chat, port: http}\n    target: {kind: Deployment, name: chat}\n";

fn activator(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .env_remove("GPUSCALE_ACTIVATOR_CONFIG")
        .output()
        .expect("run gpuscale-activator")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A file of `text` in a directory of this test's own, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str, text: &str) -> (Self, String) {
        let dir = std::env::temp_dir().join(format!(
            "activator-command-line-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("routes.yaml");
        std::fs::write(&path, text).expect("write routes");
        let path = path.display().to_string();
        (Self(dir), path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const PRINTED: &str =
    "chat: host=models.example.com pathPrefix=/ model=* -> ml/chat (Deployment chat)";

#[test]
fn check_config_prints_the_routes_before_or_after_its_flags() {
    let (_dir, routes) = Scratch::new("check", ROUTES);
    for args in [
        ["check-config", "--config", routes.as_str()],
        ["--config", routes.as_str(), "check-config"],
    ] {
        let out = activator(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), PRINTED, "{args:?}");
        assert!(
            !text(&out.stderr).contains("deprecated"),
            "{}",
            text(&out.stderr)
        );
    }
    let (_bad, bad) = Scratch::new("bad", "routes:\n  - name: chat\n    idle: 5m\n");
    let out = activator(&["check-config", "--config", &bad]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("idle"), "{}", text(&out.stderr));
}

#[test]
fn the_old_flag_still_works_with_a_warning_naming_the_subcommand() {
    let (_dir, routes) = Scratch::new("old", ROUTES);
    let out = activator(&["--check-config", "--config", &routes]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(text(&out.stdout).trim(), PRINTED);
    assert!(
        err.contains("--check-config is deprecated")
            && err.contains("`gpuscale-activator check-config`"),
        "no deprecation warning naming the new form:\n{err}"
    );
    let out = activator(&["serve", "--check-config", "--config", &routes]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("cannot be given with `serve`"), "{err}");
}

#[test]
fn serve_needs_the_routes_file_and_help_lists_the_subcommands() {
    for args in [&["serve"][..], &[][..]] {
        let out = activator(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains("--config <CONFIG>"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = activator(&["--help"]);
    let help = text(&out.stdout);
    assert!(out.status.success(), "{help}");
    for want in ["serve", "check-config", "--config <CONFIG>"] {
        assert!(help.contains(want), "{want} missing from --help:\n{help}");
    }
    assert!(
        !help.contains("--check-config"),
        "--help still offers the old flag"
    );
}
