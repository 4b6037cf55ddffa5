//! Strict checks of a metrics exposition: the reference OpenMetrics parser
//! (prometheus_client, in the test venv) and `promtool check metrics`. Any
//! exporter's families can be passed through them.

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::python;

/// Parses an OpenMetrics body with `prometheus_client.openmetrics.parser`,
/// which rejects duplicate family names, metadata after samples, a missing
/// `# EOF` and malformed samples. Panics with the parser's message.
const STRICT_PARSE: &str = r#"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
seen = set()
for family in text_string_to_metric_families(sys.stdin.read()):
    if family.name in seen:
        sys.exit(f"family {family.name} appears twice")
    seen.add(family.name)
print(len(seen))
"#;

/// Asserts that `body` (an `application/openmetrics-text` exposition) parses
/// strictly; returns the number of families.
pub fn assert_strict_openmetrics(body: &str) -> usize {
    let out = pipe(python::command().args(["-c", STRICT_PARSE]), body);
    assert!(
        out.status.success(),
        "strict OpenMetrics parse failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr).trim(),
        excerpt(body)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("family count")
}

/// Asserts that `promtool check metrics` accepts a text (0.0.4) exposition.
pub fn assert_promtool_accepts(text: &str) {
    let out = pipe(Command::new("promtool").args(["check", "metrics"]), text);
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts that no two families share a name once OpenMetrics strips a
/// counter's `_total` (a gauge `x` and a counter `x_total` collide there).
pub fn assert_unique_family_names(text: &str) {
    let mut seen = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
        let om = match kind {
            "counter" => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        if let Some(other) = seen.insert(om.to_string(), name.to_string()) {
            panic!("{other} and {name} are both the OpenMetrics family {om}");
        }
    }
}

fn pipe(cmd: &mut Command, input: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{cmd:?}: {e} (promtool: Debian package prometheus, installed by .ci/run)")
        });
    // A checker that exits early closes stdin; its status says why.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes());
    child.wait_with_output().expect("checker output")
}

fn excerpt(body: &str) -> String {
    body.lines().take(20).collect::<Vec<_>>().join("\n")
}
