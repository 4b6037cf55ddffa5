//! Drawing one frame of the view: a title line (source, status), the
//! table, and a key line; the help over it when asked.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph};

use super::{State, View};
use crate::model::{Gpu, Holder, Snapshot};
use crate::render::{gib, pct};

pub fn frame(f: &mut Frame, s: &State) {
    let [title, body, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(title_line(s)), title);
    match &s.snap {
        Some(snap) => match s.view {
            View::Gpus => gpus(f, s, snap, body),
            View::Workloads => super::workloads::table(f, s, snap, body),
        },
        None => f.render_widget(Paragraph::new("reading the source…"), body),
    }
    f.render_widget(Paragraph::new(key_line(s)), keys);
    if s.help {
        help(f, s, body);
    }
}

fn style(s: &State, st: Style) -> Style {
    s.style(st)
}

fn title_line(s: &State) -> Line<'static> {
    let status = match (&s.error, s.updated) {
        (Some(e), _) => format!("SOURCE DOWN: {e}"),
        (None, Some(t)) => format!("updated {}s ago", t.elapsed().as_secs()),
        (None, None) => "waiting for the first read".into(),
    };
    let view = match s.view {
        View::Gpus => "GPUs",
        View::Workloads => "workloads",
    };
    let st = match s.error {
        Some(_) => style(s, Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)),
        None => style(s, Style::new().add_modifier(Modifier::BOLD)),
    };
    Line::styled(format!("gpuscale-top [{view}] {}  {status}", s.source), st)
}

fn key_line(s: &State) -> String {
    let filter = if s.editing {
        format!("filter: {}▏ (enter keeps, esc clears)", s.filter)
    } else if s.filter.is_empty() {
        "/ filter".into()
    } else {
        format!("/ filter: {}", s.filter)
    };
    let missing = s
        .snap
        .as_ref()
        .filter(|n| !n.missing.is_empty())
        .map(|n| format!("  missing: {}", n.missing.join(",")))
        .unwrap_or_default();
    format!(
        "tab view  s sort: {}  {filter}  ? help  q quit{missing}",
        s.sort_key()
    )
}

/// A used/total bar `width` cells wide, then the GiB.
fn bar(used: Option<f64>, total: Option<f64>, width: usize) -> String {
    let fill = match (used, total) {
        (Some(u), Some(t)) if t > 0.0 => ((u / t) * width as f64).round() as usize,
        _ => return format!("{:width$} {}/{}", "-", gib(used), gib(total)),
    };
    let fill = fill.min(width);
    format!(
        "{}{} {}/{}",
        "█".repeat(fill),
        "░".repeat(width - fill),
        gib(used),
        gib(total)
    )
}

fn matches(s: &State, g: &Gpu) -> bool {
    if s.filter.is_empty() {
        return true;
    }
    let needle = s.filter.to_lowercase();
    let holder = |h: &Holder| format!("{}/{} {:?}", h.namespace, h.pod, h.container);
    let mut hay = format!("{} {} {} {:?}", g.gpu, g.node, g.uuid, g.model);
    for h in g
        .holders
        .iter()
        .chain(g.mig.iter().flat_map(|m| m.holders.iter()))
    {
        hay.push(' ');
        hay.push_str(&holder(h));
    }
    hay.to_lowercase().contains(&needle)
}

fn sorted_gpus<'a>(s: &State, snap: &'a Snapshot) -> Vec<&'a Gpu> {
    let mut list: Vec<&Gpu> = snap.gpus.iter().filter(|g| matches(s, g)).collect();
    let key = |g: &Gpu| match s.sort_key() {
        "util" => g.utilization.or(g.sm_active),
        "vram" => g.memory_used_bytes,
        "power" => g.power_watts,
        "temp" => g.temperature_celsius,
        _ => None,
    };
    if s.sort_key() != "gpu" {
        // Highest first; unknown values last.
        list.sort_by(|a, b| {
            key(b)
                .unwrap_or(f64::MIN)
                .total_cmp(&key(a).unwrap_or(f64::MIN))
        });
    }
    list
}

/// The GPU view as lines (a holder's line takes the full width: the pod
/// names are what this view is for).
fn gpus(f: &mut Frame, s: &State, snap: &Snapshot, area: Rect) {
    let wide = area.width >= 140;
    let alarm = style(s, Style::new().fg(Color::Red).add_modifier(Modifier::BOLD));
    let held = style(s, Style::new().fg(Color::Cyan));
    let head = if wide {
        format!(
            "{:<4}{:<30}{:>5} {:<19} {:<34} {:>9} {:>5}  THROTTLE / ALARMS",
            "GPU", "NODE MODEL", "UTIL", "SM/TENSOR/DRAM SRC", "VRAM GiB", "POWER W", "TEMP"
        )
    } else {
        format!(
            "{:<4}{:>5} {:<20} {:>8} {:>4}  THROTTLE / ALARMS",
            "GPU", "UTIL", "VRAM GiB", "POWER W", "TEMP"
        )
    };
    let mut lines = vec![Line::styled(
        head,
        style(s, Style::new().add_modifier(Modifier::REVERSED)),
    )];
    for g in sorted_gpus(s, snap) {
        let alarms = !g.xid.is_empty() || g.ecc_uncorrected.is_some_and(|e| e > 0.0);
        let st = if alarms { alarm } else { Style::default() };
        lines.push(Line::styled(gpu_line(g, wide), st));
        holder_lines(&mut lines, "  └", &g.holders, held);
        for m in &g.mig {
            let line = format!(
                "  MIG {:<3} {:<9} SM {:>4}  {}",
                m.gpu_instance_id.as_deref().unwrap_or("-"),
                m.profile.as_deref().unwrap_or("-"),
                pct(m.sm_active),
                bar(m.memory_used_bytes, m.memory_total_bytes, 6)
            );
            lines.push(Line::raw(line));
            holder_lines(&mut lines, "    └", &m.holders, held);
        }
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn gpu_line(g: &Gpu, wide: bool) -> String {
    let mut flags = g.throttle.join(",");
    if !g.xid.is_empty() {
        flags = format!("XID {} {flags}", g.xid.join(","));
    }
    if let Some(e) = g.ecc_uncorrected.filter(|e| *e > 0.0) {
        flags = format!("ECC {e:.0} {flags}");
    }
    let power = format!("{}/{}", watts(g.power_watts), watts(g.power_limit_watts));
    let temp = g
        .temperature_celsius
        .map_or("-".into(), |t| format!("{t:.0}C"));
    let util = pct(g.utilization.or(g.sm_active));
    if wide {
        let model = g
            .model
            .as_deref()
            .unwrap_or("-")
            .trim_start_matches("NVIDIA ");
        let act = format!(
            "{}/{}/{} {}",
            pct(g.sm_active),
            pct(g.tensor_active),
            pct(g.dram_active),
            g.activity_source.as_deref().unwrap_or("-")
        );
        let vram = bar(g.memory_used_bytes, g.memory_total_bytes, 20);
        let who = format!("{} {model}", g.node);
        format!(
            "{:<4}{who:<30}{util:>5} {act:<19} {vram:<34} {power:>9} {temp:>5}  {flags}",
            g.gpu
        )
    } else {
        let vram = bar(g.memory_used_bytes, g.memory_total_bytes, 8);
        format!(
            "{:<4}{util:>5} {vram:<20} {power:>8} {temp:>4}  {flags}",
            g.gpu
        )
    }
}

fn holder_lines(lines: &mut Vec<Line<'static>>, mark: &str, hs: &[Holder], st: Style) {
    for h in hs {
        let share = h
            .memory_share
            .map(|x| format!(" share {}", pct(Some(x))))
            .unwrap_or_default();
        let text = format!(
            "{mark} {}/{} ({})  {} GiB  SM {}{share}",
            h.namespace,
            h.pod,
            h.container.as_deref().unwrap_or("-"),
            gib(h.memory_used_bytes),
            pct(h.sm_utilization)
        );
        lines.push(Line::styled(text, st));
    }
}

fn watts(w: Option<f64>) -> String {
    w.map_or("-".into(), |w| format!("{w:.0}"))
}

fn help(f: &mut Frame, s: &State, area: Rect) {
    let text = "tab      switch GPUs / workloads\n\
                s        next sort key\n\
                /        filter (node, GPU, namespace/pod); enter keeps, esc clears\n\
                ?        this help (esc closes)\n\
                q, esc   quit\n\n\
                '-' is a value the source did not give (never 0).\n\
                NO_COLOR set: no colours.";
    let w = area.width.min(74);
    let h = area.height.min(10);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, r);
    let block = Block::bordered()
        .title(" help ")
        .style(style(s, Style::new().fg(Color::Yellow)));
    f.render_widget(Paragraph::new(text).block(block), r);
}
