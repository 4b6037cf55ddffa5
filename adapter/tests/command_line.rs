//! The run modes are subcommands (`serve`, `doctor`, `wake-parked`,
//! `check-config`, `check-prometheus`); the old mode flags still work for
//! one release, each with a warning naming the new form. (Its log's
//! colours: tests/tests/command_lines.rs, with the other binaries'.)

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_gpuscale-adapter");

fn adapter(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .output()
        .expect("run gpuscale-adapter")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A kubeconfig that does not exist and a Prometheus nobody listens on:
/// each mode gets as far as its first read and fails there.
const NO_CLUSTER: &str = "--kubeconfig=/nonexistent/kubeconfig";
const NO_PROMETHEUS: &str = "--prometheus-url=http://127.0.0.1:9";

#[test]
fn check_config_prints_the_served_metrics() {
    let out = adapter(&["check-config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("vllm_queue_depth\t")),
        "{text}"
    );
    assert!(!stderr(&out).contains("deprecated"), "{}", stderr(&out));
}

#[test]
fn every_old_mode_flag_still_works_with_a_warning_naming_the_subcommand() {
    let cases: [(&str, &str, &[&str]); 4] = [
        ("--check-config", "check-config", &[]),
        ("--check-prometheus", "check-prometheus", &[NO_PROMETHEUS]),
        ("--doctor", "doctor", &[NO_CLUSTER]),
        ("--wake-parked", "wake-parked", &[NO_CLUSTER]),
    ];
    for (flag, command, extra) in cases {
        let old = adapter(&[&[flag][..], extra].concat());
        let new = adapter(&[&[command][..], extra].concat());
        let warning = format!("{flag} is deprecated");
        let err = stderr(&old);
        assert!(
            err.contains(&warning) && err.contains(&format!("`gpuscale-adapter {command}`")),
            "{flag}: no deprecation warning naming `{command}`:\n{err}"
        );
        assert!(
            !stderr(&new).contains("deprecated"),
            "{command}: {}",
            stderr(&new)
        );
        // The same mode ran: the same outcome and the same answer.
        assert_eq!(old.status.code(), new.status.code(), "{flag} vs {command}");
        assert_eq!(old.stdout, new.stdout, "{flag} vs {command}");
        if !new.status.success() {
            let last = |s: &str| s.lines().last().unwrap_or("").to_string();
            assert_eq!(last(&err), last(&stderr(&new)), "{flag} vs {command}");
            assert!(
                last(&err).contains(&format!("gpuscale-adapter: {command}:"))
                    || command == "wake-parked"
                    || command == "doctor",
                "{command}: {}",
                last(&err)
            );
        }
    }
}

#[test]
fn an_old_flag_with_a_subcommand_or_another_mode_is_refused() {
    let out = adapter(&["doctor", "--wake-parked", NO_CLUSTER]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "--wake-parked is the old form of a subcommand and cannot be given with `doctor`"
        ),
        "{}",
        stderr(&out)
    );
    let out = adapter(&["--check-config", "--check-prometheus"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("give one subcommand (check-config or check-prometheus)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn serve_without_a_certificate_says_what_it_needs_before_anything_else() {
    for args in [&[][..], &["serve"][..]] {
        let out = adapter(args);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains(
                "serve needs --tls-cert-file and --tls-key-file, or --self-signed-tls-secret"
            ),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn help_lists_the_subcommands_and_the_environment() {
    let out = adapter(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "serve",
        "doctor",
        "wake-parked",
        "check-config",
        "check-prometheus",
        "--log-level",
        "RUST_LOG",
        "POD_NAMESPACE",
        "NO_COLOR",
    ] {
        assert!(help.contains(word), "--help lacks {word}:\n{help}");
    }
    for hidden in [
        "--doctor ",
        "--wake-parked",
        "--check-config",
        "--check-prometheus",
    ] {
        assert!(!help.contains(hidden), "--help still offers {hidden}");
    }
}
