//! The doctor's report for people.

use std::fmt::Write as _;

use super::Report;
use super::fit::{Check, Verdict};

fn check_line(out: &mut String, what: &str, c: &Check) {
    let verdict = match c.verdict {
        Verdict::Ok => "ok",
        Verdict::Problem => "PROBLEM",
        Verdict::Unknown => "NOT KNOWN",
    };
    let _ = writeln!(out, "{what}: {verdict}: {}", c.detail);
}

fn list(out: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}:");
    for i in items {
        let _ = writeln!(out, "  - {i}");
    }
}

/// The report as text: one section per question, then the values.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Metrics APIServices:");
    for a in &r.api_services {
        let who = match a.owner {
            None => "NOT KNOWN (could not read the APIServices)".to_string(),
            Some(o) => match &a.service {
                Some(s) => format!("{} (Service {s})", o.label()),
                None => o.label().to_string(),
            },
        };
        let _ = writeln!(out, "  {}: {who}", a.name);
    }
    let _ = writeln!(out, "Components:");
    for c in &r.components {
        let state = match c.present {
            Some(true) => format!("present ({})", c.evidence.join(", ")),
            Some(false) => "absent".to_string(),
            None => "NOT KNOWN (a read failed)".to_string(),
        };
        let _ = writeln!(out, "  {}: {state}", c.name);
    }
    check_line(&mut out, "Kubelet pod-resources", &r.kubelet);
    check_line(&mut out, "Pod Security", &r.pod_security);
    let _ = writeln!(out, "\nMode: {}", r.mode);
    let _ = writeln!(out, "Suggested values:");
    for (k, v) in &r.values {
        let _ = writeln!(out, "  --set {k}={v}");
    }
    list(&mut out, "Notes", &r.notes);
    list(&mut out, "Conflicts with a default install", &r.conflicts);
    list(&mut out, "Failed reads", &r.failed_reads);
    out
}
