//! `gpuscale-advisor`: reads a Prometheus range and tells, per workload,
//! what limits it, what it costs per million tokens, and which GPU, MIG
//! slice or neighbour it should have (docs/right-sizing.md).

pub mod assess;
pub mod bottleneck;
pub mod cli;
pub mod colocate;
pub mod history;
pub mod nodes;
pub mod policy;
pub mod prefill;
pub mod prom;
pub mod recommend;
pub mod report;
pub mod sites;
pub mod spot;
pub mod tables;
pub mod thresholds;
pub mod undersized;
pub mod unitcost;
pub mod vllm;

use std::time::Duration;

use serde::Serialize;

use crate::assess::Assessment;
use crate::colocate::Group;
use crate::history::{History, Window};
use crate::policy::Policy;
use crate::prom::Prometheus;
use crate::tables::Tables;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("table: {0}")]
    Table(String),
    #[error("Prometheus {url}: {problem} (query: {query})")]
    Prometheus {
        url: String,
        query: String,
        problem: String,
    },
    #[error("{0}")]
    Usage(String),
    /// Nothing held a GPU in the range: not an error of Prometheus, but
    /// no advice either (its own exit code).
    #[error("no workloads found in [{start}, {end}] (no gpu_pod_allocation series)")]
    NoWorkloads { start: f64, end: f64 },
}

impl Error {
    /// The exit code (docs/right-sizing.md): 2 a usage error (bad flag or
    /// table, as clap), 3 no workloads, 1 anything else (Prometheus).
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Table(_) => 2,
            Self::NoWorkloads { .. } => 3,
            Self::Prometheus { .. } => 1,
        }
    }
}

/// A PromQL duration (`30s`, `5m`, `1h`, `7d`, `1w`) above zero, in
/// seconds. The workspace's grammar, less fractions and spaces: the text
/// goes into the queries as written (`[7d:5m]`) and PromQL has neither.
pub fn parse_duration(s: &str) -> Result<f64, Error> {
    if s.contains(|c: char| c == '.' || c.is_whitespace()) {
        return Err(Error::Usage(format!(
            "{s:?} is not a duration PromQL reads: whole numbers, no spaces (e.g. 90m)"
        )));
    }
    match gpuscale_util::duration::parse(s) {
        Ok(d) if d.is_zero() => Err(Error::Usage(format!("{s:?} is not a duration above zero"))),
        Ok(d) => Ok(d.as_secs_f64()),
        Err(e) => Err(Error::Usage(e.to_string())),
    }
}

/// `--end`: RFC 3339 or Unix seconds.
pub fn parse_end(s: &str) -> Result<f64, Error> {
    if let Ok(v) = s.parse::<f64>() {
        return if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(Error::Usage(format!("--end {s}: not a time")))
        };
    }
    gpuscale_util::rfc3339::parse(s)
        .map(|t| t as f64)
        .map_err(|e| Error::Usage(format!("--end: {e}")))
}

/// What to read and where.
pub struct Options {
    pub prometheus: String,
    /// End of the range, Unix seconds.
    pub end: f64,
    pub range: String,
    pub step: String,
    pub timeout: Duration,
    /// Tiers and who may be time-sliced.
    pub policy: Policy,
}

/// The whole answer.
#[derive(Debug, Serialize)]
pub struct Report {
    pub prometheus: String,
    pub end: f64,
    /// `end` as RFC 3339 (UTC).
    pub end_time: String,
    pub range: String,
    pub step: String,
    pub gpu_table: String,
    pub mig_table: String,
    pub workloads: Vec<Assessment>,
    pub colocation: Vec<Group>,
    /// Co-location groups, plus MIG or GPU type (the larger) for every
    /// workload in no group.
    pub placement_saving_usd_per_month: f64,
    /// What the `too_small` moves cost more.
    pub too_small_cost_increase_usd_per_month: f64,
    /// Scale-to-zero savings (they overlap with placement savings).
    pub scale_to_zero_saving_usd_per_month: f64,
    pub queries: u32,
    /// Series refused on arrival: labels and reason; never advice.
    pub excluded: Vec<String>,
    /// Prometheus' own `warnings`, with the query that drew them.
    pub warnings: Vec<String>,
    /// GPU nodes that could go, per node pool, and parked workloads' nodes.
    pub nodes: nodes::Nodes,
    /// Spot candidates and risks.
    pub spot: spot::Spot,
}

/// Reads the range and judges every workload.
pub fn run(o: &Options, tables: &Tables) -> Result<Report, Error> {
    let w = Window {
        range_s: parse_duration(&o.range)?,
        step_s: parse_duration(&o.step)?,
        range: o.range.clone(),
        step: o.step.clone(),
    };
    if w.step_s > w.range_s {
        return Err(Error::Usage(format!(
            "step {} is longer than the range {}",
            o.step, o.range
        )));
    }
    let p = Prometheus::new(&o.prometheus, o.end, o.timeout);
    let h = History::read(&p, &w)?;
    if h.workloads.is_empty() {
        return Err(Error::NoWorkloads {
            start: o.end - w.range_s,
            end: o.end,
        });
    }
    tracing::info!(
        workloads = h.workloads.len(),
        queries = p.queries.get(),
        "history read"
    );
    let prices = h
        .devices
        .values()
        .filter_map(|d| Some((d.model.as_deref()?, d.price_usd_per_hour?)));
    let tables = &tables
        .with_prices(prices)
        .with_sites(sites::Sites::seen(&h, |m| {
            tables.gpu(m).map(|g| g.name.clone())
        }));
    let mut all: Vec<Assessment> = h
        .workloads
        .iter()
        .map(|(k, f)| assess::assess(&h, tables, &o.policy, k, f))
        .collect();
    for a in &mut all {
        undersized::judge(tables, a);
        recommend::add(tables, a);
    }
    let colocation = colocate::plan(tables, &o.policy, &mut all);
    let (placement, stz, more) = totals(&all, &colocation);
    let nodes = nodes::read(&p, &w)?;
    let tiers = all
        .iter()
        .map(|a| (a.workload.clone(), a.tier.clone()))
        .collect();
    let spot = spot::read(&p, &w, &o.policy, &tiers)?;
    Ok(Report {
        prometheus: o.prometheus.clone(),
        end: o.end,
        end_time: gpuscale_util::rfc3339::format(o.end as i64),
        range: o.range.clone(),
        step: o.step.clone(),
        gpu_table: format!("{} ({})", tables.gpus.source, tables.gpus.date),
        mig_table: format!("{} ({})", tables.mig.source, tables.mig.date),
        workloads: all,
        colocation,
        placement_saving_usd_per_month: placement,
        scale_to_zero_saving_usd_per_month: stz,
        too_small_cost_increase_usd_per_month: more,
        queries: p.queries.get(),
        excluded: h.excluded,
        warnings: p.warnings.take(),
        nodes,
        spot,
    })
}

/// Placement saving (each group once, plus the larger of MIG and GPU type
/// of every workload in no group), scale to zero, and what the too-small
/// moves cost more.
fn totals(all: &[Assessment], groups: &[Group]) -> (f64, f64, f64) {
    // A saving that needs a node pool no one saw is not counted.
    let best = |a: &Assessment, kinds: &[&str]| {
        a.recommendations
            .iter()
            .filter(|r| kinds.contains(&r.kind) && r.needs.is_none())
            .map(|r| r.saving_usd_per_month)
            .fold(0.0, f64::max)
    };
    let grouped = |a: &Assessment| a.recommendations.iter().any(|r| r.group.is_some());
    let placement = all
        .iter()
        .filter(|a| !grouped(a))
        .map(|a| best(a, &["mig", "gpu_type"]))
        .sum::<f64>()
        + groups.iter().map(|g| g.saving_usd_per_month).sum::<f64>();
    let stz: f64 = all.iter().map(|a| best(a, &["scale_to_zero"])).sum();
    let more = all
        .iter()
        .flat_map(|a| &a.recommendations)
        .filter(|r| r.kind == "too_small" && r.needs.is_none())
        .map(|r| -r.saving_usd_per_month)
        .sum::<f64>();
    // An empty sum of f64 is -0.0: totals read 0.
    (placement + 0.0, stz + 0.0, more + 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5m").unwrap(), 300.0);
        assert_eq!(parse_duration("7d").unwrap(), 604_800.0);
        assert_eq!(parse_duration("1h30m").unwrap(), 5400.0);
        for bad in [
            "",
            "5",
            "m",
            "0m",
            "5x",
            "-5m",
            "1.5h",
            " 5m",
            "30m1h",
            "99999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
