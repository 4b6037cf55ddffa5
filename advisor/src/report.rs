//! The report for people: a table (lines under 120 columns) or Markdown.

use std::fmt::Write;

use crate::Report;
use crate::assess::{Assessment, Recommendation};
use crate::colocate::Group;

/// Widest line of the table.
pub const WIDTH: usize = 119;

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.0}", x * 100.0))
}

fn num(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// Whole dollars with thousands separators: `$12,345`.
pub fn usd(v: f64) -> String {
    let n = v.abs().round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{}${out}", if v < 0.0 { "-" } else { "" })
}

/// `text` wrapped at word boundaries under [`WIDTH`], the first line
/// after `first`, the others after `indent` spaces.
fn wrap(s: &mut String, first: &str, indent: usize, text: &str) {
    let mut line = first.to_string();
    let mut fresh = first.trim().is_empty();
    for word in text.split(' ') {
        if !fresh && line.chars().count() + 1 + word.chars().count() > WIDTH {
            let _ = writeln!(s, "{line}");
            line = " ".repeat(indent);
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    let _ = writeln!(s, "{line}");
}

fn gpu(a: &Assessment) -> String {
    let ty = a
        .gpu_type
        .clone()
        .or_else(|| a.model.clone())
        .unwrap_or("-".into());
    match &a.mig_profile {
        Some(p) => format!("{ty} {p}"),
        None => ty,
    }
}

fn memory(a: &Assessment) -> String {
    let need = if a.vllm.is_some() {
        a.memory_need_gib
    } else {
        None
    };
    match need {
        Some(n) => format!("{}/{}", num(a.vram_peak_gib, 1), num(Some(n), 1)),
        None => num(a.vram_peak_gib, 1),
    }
}

fn header(s: &mut String, r: &Report) {
    wrap(
        s,
        "gpuscale-advisor:",
        4,
        &format!(
            "{} over {} ending {} (step {}); GPU table: {}; MIG table: {}",
            r.prometheus, r.range, r.end_time, r.step, r.gpu_table, r.mig_table
        ),
    );
    let _ = writeln!(
        s,
        "\n{:<31} {:<10} {:>4} {:<15} {:>7} {:>14} {:>10} {:>5} {:>6} {:>8}",
        "WORKLOAD",
        "TIER",
        "GPUS",
        "GPU",
        "HISTORY",
        "VRAM PEAK/NEED",
        "SM/TC/DRAM",
        "UTIL",
        "COST",
        "COST"
    );
    let _ = writeln!(
        s,
        "{:<31} {:<10} {:>4} {:<15} {:>7} {:>14} {:>10} {:>5} {:>6} {:>8}",
        "", "", "", "", "h", "GiB", "p95 %", "p95 %", "USD/h", "USD/Mtok"
    );
}

fn workload(s: &mut String, a: &Assessment) {
    let name = a.workload.to_string();
    if name.chars().count() > 31 {
        let _ = writeln!(s, "{name}");
    }
    let _ = writeln!(
        s,
        "{:<31} {:<10} {:>4.2} {:<15} {:>7.1} {:>14} {:>10} {:>5} {:>6} {:>8}",
        if name.chars().count() > 31 { "" } else { &name },
        a.tier,
        a.gpus_now,
        gpu(a),
        a.history_hours,
        memory(a),
        format!(
            "{}/{}/{}",
            pct(a.sm_active_p95),
            pct(a.tensor_active_p95),
            pct(a.dram_active_p95)
        ),
        pct(a.utilization_p95),
        num(a.cost_usd_per_hour, 2),
        num(a.cost_usd_per_million_tokens, 3),
    );
    wrap(
        s,
        "    limit:",
        11,
        &format!("{} ({})", a.bottleneck.as_str(), a.bottleneck_reason),
    );
    for rec in &a.recommendations {
        recommendation(s, rec);
    }
    for n in &a.notes {
        wrap(s, "    note:", 10, n);
    }
}

fn saving(rec: &Recommendation) -> String {
    match (rec.group, rec.saving_usd_per_month) {
        (Some(g), _) => format!("group {} total below", g + 1),
        (None, v) if v < 0.0 && rec.needs.is_some() => {
            format!("would cost {}/month more; not in the totals", usd(-v))
        }
        (None, v) if v < 0.0 => format!("costs {}/month more", usd(-v)),
        (None, v) if rec.needs.is_some() => {
            format!("would save {}/month; not in the totals", usd(v))
        }
        (None, v) => format!("saves {}/month", usd(v)),
    }
}

fn recommendation(s: &mut String, rec: &Recommendation) {
    wrap(s, "    ->", 7, &format!("{} ({})", rec.action, saving(rec)));
    if let Some(n) = &rec.needs {
        wrap(s, "       needs:", 14, n);
    }
    wrap(s, "       why:", 12, &rec.why);
    if let Some(x) = &rec.settings {
        wrap(s, "       run:", 12, x);
    }
    if let Some(c) = &rec.check {
        wrap(s, "       check:", 14, c);
    }
}

fn group_text(i: usize, g: &Group) -> (String, String) {
    let title = format!(
        "group {}: cluster {}, node pool {}, tier {}: one {} ({}) for {}",
        i + 1,
        if g.cluster.is_empty() {
            "-"
        } else {
            &g.cluster
        },
        g.node_pool.as_deref().unwrap_or("- (unknown)"),
        g.tier,
        g.gpu_type,
        g.sharing.replace('_', "-"),
        g.workloads.join(", ")
    );
    let added = g.if_added.as_ref().map_or(String::new(), |o| {
        format!(
            "; on one {} ({}) instead it would save {}/month, not in the totals: needs {}",
            o.gpu_type,
            o.sharing.replace('_', "-"),
            usd(o.saving_usd_per_month),
            o.needs
        )
    });
    let body = format!(
        "{}; MIG layout (instance@first memory slice): {}; GPUs now ${:.2}/h, then ${:.2}/h: saves {}/month, frees {} GPU(s) (the members' own advice alone: {}/month){added}",
        g.why,
        g.mig_layout
            .as_ref()
            .map_or("none".into(), |l| l.join(" + ")),
        g.cost_now_usd_per_hour,
        g.price_usd_per_hour,
        usd(g.saving_usd_per_month),
        g.gpus_freed,
        usd(g.alone_saving_usd_per_month)
    );
    (title, body)
}

fn totals_text(r: &Report) -> String {
    format!(
        "saving per month: placement {} (co-location groups, and MIG or GPU type of every workload in none), scale to zero {} (overlaps placement); too-small moves cost {} more; {} queries",
        usd(r.placement_saving_usd_per_month),
        usd(r.scale_to_zero_saving_usd_per_month),
        usd(r.too_small_cost_increase_usd_per_month),
        r.queries
    )
}

/// The node and Spot sections (`nodes.rs`, `spot.rs`), wrapped.
fn node_sections(s: &mut String, r: &Report) {
    let lines = crate::nodes::lines(&r.nodes)
        .into_iter()
        .chain(crate::spot::lines(&r.spot));
    for (first, text) in lines {
        if first.is_empty() {
            let _ = writeln!(s);
        }
        wrap(s, &first, 6, &text);
    }
}

/// One block per workload, then the co-location groups and the totals.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    header(&mut s, r);
    for a in &r.workloads {
        workload(&mut s, a);
    }
    for (i, g) in r.colocation.iter().enumerate() {
        let (title, body) = group_text(i, g);
        let _ = writeln!(s);
        wrap(&mut s, "", 4, &title);
        wrap(&mut s, "   ", 4, &body);
    }
    for w in &r.warnings {
        let _ = writeln!(s);
        wrap(&mut s, "Prometheus warning:", 4, w);
    }
    for x in &r.excluded {
        let _ = writeln!(s);
        wrap(&mut s, "excluded:", 4, x);
    }
    node_sections(&mut s, r);
    let _ = writeln!(s);
    wrap(&mut s, "", 4, &totals_text(r));
    s
}

fn cell(t: &str) -> String {
    t.replace('|', "\\|")
}

/// The same as Markdown tables.
pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# Right-sizing\n\n{} over {} ending {} (step {}); GPU table: {}; MIG table: {}\n\n",
        r.prometheus, r.range, r.end_time, r.step, r.gpu_table, r.mig_table
    );
    s.push_str("| workload | tier | GPUs | GPU | history (h) | VRAM peak/need (GiB) | SM/TC/DRAM p95 (%) | utilization p95 (%) | bottleneck | why | cost (USD/h) | cost (USD/Mtok) |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for a in &r.workloads {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {} | {:.1} | {} | {}/{}/{} | {} | `{}` | {} | {} | {} |",
            cell(&a.workload.to_string()),
            a.tier,
            a.gpus_now,
            gpu(a),
            a.history_hours,
            memory(a),
            pct(a.sm_active_p95),
            pct(a.tensor_active_p95),
            pct(a.dram_active_p95),
            pct(a.utilization_p95),
            a.bottleneck.as_str(),
            cell(&a.bottleneck_reason),
            num(a.cost_usd_per_hour, 2),
            num(a.cost_usd_per_million_tokens, 3)
        );
    }
    s.push_str("\n| workload | advice | saving (USD/month) | why |\n|---|---|---|---|\n");
    for a in &r.workloads {
        for rec in &a.recommendations {
            let mut why = match &rec.settings {
                Some(x) => format!("{}; {}", rec.why, x),
                None => rec.why.clone(),
            };
            if let Some(n) = &rec.needs {
                why = format!("needs {n}; {why}");
            }
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                cell(&a.workload.to_string()),
                cell(&rec.action),
                saving(rec),
                cell(&why)
            );
        }
    }
    if !r.colocation.is_empty() {
        s.push_str("\n| group | members and GPU | saving | why |\n|---|---|---|---|\n");
        for (i, g) in r.colocation.iter().enumerate() {
            let (title, body) = group_text(i, g);
            let _ = writeln!(
                s,
                "| {} | {} | {}/month | {} |",
                i + 1,
                cell(&title),
                usd(g.saving_usd_per_month),
                cell(&body)
            );
        }
    }
    for x in r.warnings.iter().chain(&r.excluded) {
        let _ = writeln!(s, "\n- {}", cell(x));
    }
    node_sections(&mut s, r);
    let _ = writeln!(s, "\n{}", totals_text(r));
    s
}
