//! The source generators: Python scripts (standard library only) that write
//! files other copies are then made from.

use std::path::Path;
use std::process::Command;

use super::Error;

/// Each script and what it writes; both take `--check`.
pub const SOURCE_GENERATORS: [(&str, &str); 2] = [
    (
        "alerts/xid/generate.py",
        "the XID rules in alerts/gpu.rules.yml, alerts/tests/xid.test.yml and the runbook's table, from alerts/xid/xids.csv",
    ),
    ("dashboards/generate.py", "dashboards/*.json"),
];

/// Runs every source generator; any failure is an error with its output.
pub(super) fn write(root: &Path) -> Result<(), Error> {
    for (script, _) in SOURCE_GENERATORS {
        let out = run(root, script, false)?;
        if !out.status.success() {
            return Err(failed(script, &out));
        }
    }
    Ok(())
}

/// Each source generator's `--check`: what it says is out of date (exit 1).
/// Any other failure (exit 2: a bad table) is an error.
pub(super) fn check(root: &Path) -> Result<Vec<String>, Error> {
    let mut problems = Vec::new();
    for (script, _) in SOURCE_GENERATORS {
        let out = run(root, script, true)?;
        match out.status.code() {
            Some(0) => {}
            Some(1) => problems.push(format!(
                "{script}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            _ => return Err(failed(script, &out)),
        }
    }
    Ok(problems)
}

fn run(root: &Path, script: &str, check: bool) -> Result<std::process::Output, Error> {
    let mut cmd = Command::new("python3");
    cmd.arg(script).current_dir(root);
    if check {
        cmd.arg("--check");
    }
    cmd.output().map_err(|e| Error::Script {
        script: script.to_string(),
        message: format!("cannot run python3: {e}"),
    })
}

fn failed(script: &str, out: &std::process::Output) -> Error {
    Error::Script {
        script: script.to_string(),
        message: format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}
