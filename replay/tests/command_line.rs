//! What a user sees of `gpuscale-replay run`: every flag described with its
//! unit, tables whose columns line up, input checked whole before any
//! output, and plain text when piped.

use std::process::{Command, Output};

const LONGTAIL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/longtail.csv");

fn replay(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscale-replay"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run gpuscale-replay")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_flag_has_a_description() {
    for sub in ["run", "fleet", "derive"] {
        let help = text(&replay(&[sub, "--help"], &[]).stdout);
        let options = help.split("Options:").nth(1).expect("an Options section");
        for line in options.lines().filter(|l| l.trim_start().starts_with('-')) {
            // "  --flag <VALUE>   Description": a description after the gap.
            let described = line.trim().split("  ").filter(|p| !p.is_empty()).count() >= 2;
            assert!(described, "{sub}: no description: {line}");
        }
    }
    let help = text(&replay(&["run", "--help"], &[]).stdout);
    for flag in [
        "--step",
        "--cooldown",
        "--idle-for",
        "--cold-start",
        "--ttft-slo",
    ] {
        let line = help.lines().find(|l| l.contains(flag)).expect(flag);
        assert!(line.contains("<DURATION>"), "{line}");
    }
    assert!(help.contains("--prefill-tps <TOKENS_PER_S>"), "{help}");
}

#[test]
fn durations_take_a_unit() {
    let out = replay(&["run", "--trace", LONGTAIL, "--idle-for", "300"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("\"300\" has no unit; write e.g. 300s"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn no_input_names_both_inputs() {
    let out = replay(&["run"], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--trace") && err.contains("--prometheus"),
        "{err}"
    );
}

#[test]
fn a_bad_sweep_fails_before_any_replay() {
    for (spec, needle) in [
        ("idle_for=60s", "unknown knob \"idle_for\""),
        ("idle-for=1m,60", "\"60\" has no unit"),
        ("activation=x", "activation \"x\""),
    ] {
        let out = replay(&["run", "--trace", LONGTAIL, "--sweep", spec], &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {err}");
        assert!(err.contains(needle), "{spec}: {err}");
        assert!(out.stdout.is_empty(), "{spec}: {}", text(&out.stdout));
    }
}

/// The byte offsets at which each word of `row` ends.
fn ends(row: &str) -> Vec<usize> {
    let b = row.as_bytes();
    (0..b.len())
        .filter(|&i| b[i] != b' ' && (i + 1 == b.len() || b[i + 1] == b' '))
        .map(|i| i + 1)
        .collect()
}

/// The last `numbers` columns of every row (right-aligned) end where a
/// header's word ends, "+ activator" rows included, and every row is as
/// long as the header.
fn aligned(table: &[&str], numbers: usize) {
    let header = ends(table[0]);
    for row in &table[1..] {
        let e = ends(row);
        assert_eq!(
            row.len(),
            table[0].len(),
            "misaligned:\n{}\n{row}",
            table[0]
        );
        for end in &e[e.len() - numbers..] {
            assert!(header.contains(end), "misaligned:\n{}\n{row}", table[0]);
        }
    }
}

#[test]
fn table_columns_line_up() {
    let out = replay(
        &["run", "--trace", LONGTAIL, "--sweep", "idle-for=1m,5m"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let results: Vec<&str> = lines.iter().take(7).copied().collect();
    assert!(results[6].contains("+ activator"), "{stdout}");
    aligned(&results, 8);
    let sweep_at = lines
        .iter()
        .position(|l| l.starts_with("sweep idle-for"))
        .expect("the sweep");
    let sweep: Vec<&str> = lines[sweep_at + 1..].iter().take(7).copied().collect();
    assert!(sweep.iter().any(|l| l.contains("+ activator")), "{stdout}");
    aligned(&sweep, 4);
    for row in &sweep[1..] {
        assert!(ends(sweep[0]).contains(&ends(row)[0]), "{row}");
    }
}

#[test]
fn piped_warnings_are_plain_text() {
    // A range query with a missing step logs a warning.
    let url = crate::hostile_input::fake_prometheus(Some(crate::hostile_input::matrix(
        r#"[1000,"1"],[1120,"1"]"#,
    )));
    let args = [
        "run",
        "--prometheus",
        &url,
        "--query",
        "q",
        "--start",
        "1000",
        "--end",
        "1120",
        "--step",
        "60s",
    ];
    for env in [&[][..], &[("NO_COLOR", "1")][..]] {
        let out = replay(&args, env);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("steps without samples"), "{err}");
        assert!(!err.contains('\u{1b}'), "ANSI codes in: {err:?}");
    }
}

/// The long-tail picture in docs/ is what `run --svg` draws now; to
/// regenerate it: `cargo run -p gpuscale-replay -- run --trace
/// replay/traces/longtail.csv --svg docs/replay-longtail.svg`.
#[test]
fn the_shipped_longtail_picture_is_current() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("longtail.svg");
    let out = replay(
        &["run", "--trace", LONGTAIL, "--svg", &path.to_string_lossy()],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let drawn = std::fs::read_to_string(&path).expect("drawn");
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/replay-longtail.svg"
    ))
    .expect("docs/replay-longtail.svg");
    assert!(
        drawn == shipped,
        "docs/replay-longtail.svg differs from what run --svg draws: regenerate it (docs/replay.md)"
    );
}

#[test]
fn help_names_the_log_level_and_the_environment() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["fleet", "--help"],
        &["derive", "--help"],
    ] {
        let help = text(&replay(args, &[]).stdout);
        assert!(help.contains("--log-level <LOG_LEVEL>"), "{args:?}: {help}");
        let env = help
            .split("\nEnvironment:\n")
            .nth(1)
            .expect("an Environment section");
        for var in ["RUST_LOG", "NO_COLOR"] {
            assert!(env.contains(var), "{args:?}: {var} missing from: {env}");
        }
    }
}

#[test]
fn a_log_filter_that_does_not_parse_is_refused() {
    let flag = replay(&["run", "--trace", LONGTAIL, "--log-level=nonsense["], &[]);
    let env = replay(&["run", "--trace", LONGTAIL], &[("RUST_LOG", "nonsense[")]);
    for out in [flag, env] {
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--log-level") && err.contains("nonsense["),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
}
