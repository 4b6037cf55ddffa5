//! The report as a table for people.

use std::fmt::Write;

use crate::Report;

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.0}", x * 100.0))
}

fn num(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// One block per workload, then the co-location groups and the totals.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "gpuscale-advisor: {} at {:.0}, range {} step {}; GPU table: {}; MIG table: {}\n",
        r.prometheus, r.end, r.range, r.step, r.gpu_table, r.mig_table
    );
    let _ = writeln!(
        s,
        "{:<40} {:>6} {:<22} {:<9} {:>6} {:>11} {:>13} {:<17} {:>7} {:>9}",
        "WORKLOAD",
        "GPUS",
        "MODEL",
        "MIG",
        "HIST_H",
        "VRAM_PK/P99",
        "SM/TC/DRAM%",
        "BOTTLENECK",
        "$/H",
        "$/MTOK"
    );
    for a in &r.workloads {
        let _ = writeln!(
            s,
            "{:<40} {:>6.2} {:<22} {:<9} {:>6.1} {:>11} {:>13} {:<17} {:>7} {:>9}",
            a.workload.to_string(),
            a.gpus_now,
            a.model.as_deref().unwrap_or("-"),
            a.mig_profile.as_deref().unwrap_or("-"),
            a.history_hours,
            format!("{}/{}", num(a.vram_peak_gib, 1), num(a.vram_p99_gib, 1)),
            format!(
                "{}/{}/{}",
                pct(a.sm_active_p95),
                pct(a.tensor_active_p95),
                pct(a.dram_active_p95)
            ),
            a.bottleneck.as_str(),
            num(a.cost_usd_per_hour, 2),
            num(a.cost_usd_per_million_tokens, 3),
        );
        for rec in &a.recommendations {
            let _ = writeln!(
                s,
                "    -> {} (saves ${:.0}/month): {}",
                rec.action, rec.saving_usd_per_month, rec.why
            );
            if let Some(c) = &rec.check {
                let _ = writeln!(s, "       check: {c}");
            }
        }
        for n in &a.notes {
            let _ = writeln!(s, "    note: {n}");
        }
    }
    for g in &r.colocation {
        let _ = writeln!(
            s,
            "\nco-locate on one {}: {} (frees {} GPU(s), saves ${:.0}/month)",
            g.gpu_type,
            g.workloads.join(", "),
            g.gpus_freed,
            g.saving_usd_per_month
        );
    }
    for w in &r.warnings {
        let _ = writeln!(s, "\nPrometheus warning: {w}");
    }
    for x in &r.excluded {
        let _ = writeln!(s, "\nexcluded: {x}");
    }
    let _ = writeln!(
        s,
        "\nsaving per month: placement ${:.0} (MIG, GPU type, co-location), scale to zero ${:.0} (overlaps placement); {} queries",
        r.placement_saving_usd_per_month, r.scale_to_zero_saving_usd_per_month, r.queries
    );
    s
}
