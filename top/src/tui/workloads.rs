//! The workload table: what each workload holds, its activity and
//! bottleneck class, its cost per hour and per million tokens, and its
//! scale-to-zero state. From 140 columns on, the pods and longer headers.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Row, Table};

use super::State;
use crate::model::{Snapshot, Workload};
use crate::render::{pct, usd};

fn sorted<'a>(s: &State, snap: &'a Snapshot) -> Vec<&'a Workload> {
    let needle = s.filter.to_lowercase();
    let mut list: Vec<&Workload> = snap
        .workloads
        .iter()
        .filter(|w| {
            format!("{}/{}", w.namespace, w.workload)
                .to_lowercase()
                .contains(&needle)
        })
        .collect();
    let key = |w: &Workload| match s.sort_key() {
        "devices" => Some(w.devices as f64),
        "activity" => w.activity,
        "cost" => w.cost_usd_per_hour,
        "cost/mtok" => w.cost_usd_per_million_tokens,
        _ => None,
    };
    if s.sort_key() != "name" {
        list.sort_by(|a, b| {
            key(b)
                .unwrap_or(f64::MIN)
                .total_cmp(&key(a).unwrap_or(f64::MIN))
        });
    }
    list
}

pub fn table(f: &mut Frame, s: &State, snap: &Snapshot, area: Rect) {
    let wide = area.width >= 140;
    let rows = sorted(s, snap).into_iter().map(|w| {
        let mut cells = vec![
            format!("{}/{}", w.namespace, w.workload),
            w.kind.clone().unwrap_or("-".into()),
        ];
        if wide {
            cells.push(w.pods.to_string());
        }
        cells.extend([
            w.devices.to_string(),
            pct(w.activity),
            w.bottleneck.clone().unwrap_or("-".into()),
            usd(w.cost_usd_per_hour),
            usd(w.cost_usd_per_million_tokens),
            w.state.clone().unwrap_or("-".into()),
        ]);
        Row::new(cells)
    });
    let (header, widths): (Vec<&str>, Vec<Constraint>) = if wide {
        let cols = [
            ("NAMESPACE/WORKLOAD", Constraint::Min(30)),
            ("KIND", Constraint::Length(12)),
            ("PODS", Constraint::Length(4)),
            ("DEVICES", Constraint::Length(7)),
            ("ACTIVITY", Constraint::Length(8)),
            ("BOTTLENECK", Constraint::Length(16)),
            ("USD/H", Constraint::Length(8)),
            ("USD/MTOK", Constraint::Length(8)),
            ("STATE", Constraint::Length(12)),
        ];
        cols.into_iter().unzip()
    } else {
        let cols = [
            ("NAMESPACE/WORKLOAD", Constraint::Min(18)),
            ("KIND", Constraint::Length(11)),
            ("DEV", Constraint::Length(3)),
            ("ACT", Constraint::Length(4)),
            ("BOTTLENECK", Constraint::Length(16)),
            ("USD/H", Constraint::Length(6)),
            ("$/MTOK", Constraint::Length(6)),
            ("STATE", Constraint::Length(8)),
        ];
        cols.into_iter().unzip()
    };
    let header = Row::new(header).style(s.style(Style::new().add_modifier(Modifier::REVERSED)));
    f.render_widget(Table::new(rows, widths).header(header), area);
}
