//! The one way a story gets its week: the workloads' samples written as
//! OpenMetrics (`synth`), backfilled with promtool into a real Prometheus,
//! and the advisor run over the seven days ending at the last whole step.

use std::time::Duration;

use gpuscale_advisor::assess::{Assessment, Recommendation};
use gpuscale_advisor::policy::Policy;
use gpuscale_advisor::tables::Tables;
use gpuscale_advisor::{Options, Report, run};

use crate::synth::{Gpu, Workload, openmetrics, workload};
use crate::week::{Prom, RANGE_S, STEP_S, end_now, prometheus_with};

/// A backfilled week and the Prometheus serving it (stopped on drop).
pub(crate) struct Week {
    pub(crate) end: i64,
    pub(crate) prom: Prom,
    _dir: tempfile::TempDir,
}

/// The week of `ws`, in a Prometheus of its own.
pub(crate) fn week(ws: &[Workload]) -> Week {
    let dir = tempfile::tempdir().expect("test set-up");
    let end = end_now();
    let prom = prometheus_with(dir.path(), &openmetrics(ws, end, RANGE_S, STEP_S));
    Week {
        end,
        prom,
        _dir: dir,
    }
}

impl Week {
    /// The advisor over the week with the default policy, its table
    /// printed for the log (and checked to stay under 120 columns).
    pub(crate) fn advise(&self) -> Report {
        self.advise_with(Policy::default())
    }

    pub(crate) fn advise_with(&self, policy: Policy) -> Report {
        let o = Options {
            prometheus: self.prom.url.clone(),
            end: self.end as f64,
            range: "7d".into(),
            step: "5m".into(),
            timeout: Duration::from_secs(60),
            policy,
        };
        let r = run(&o, &Tables::load(None, None).expect("test set-up")).expect("test set-up");
        crate::week::table(&r);
        r
    }
}

/// A node's GPU nobody holds: its exporter's GPU series, no pod. What
/// tells the advisor a node pool of that type exists in the cluster.
pub(crate) fn spare(
    name: &str,
    gpu: Gpu,
    cluster: Option<&'static str>,
    pool: Option<&'static str>,
) -> Workload {
    let z = (0.0, 0.0);
    let mut w = workload("-", name, "-", gpu, z, z, z, z, z);
    w.spare = true;
    w.cluster = cluster;
    w.pool = pool;
    w
}

/// The GPU type a recommendation moves to, from its action
/// (`L40S instead of ...`, `2 x A100-80GB instead of ...`,
/// `too small: 2 x L4 instead of ...`); none for MIG and the others.
fn target(action: &str) -> Option<&str> {
    let a = action.strip_prefix("too small: ").unwrap_or(action);
    let (to, _) = a.split_once(" instead of ")?;
    Some(to.split_once(" x ").map_or(to, |(_, t)| t))
}

/// Advice is a promise: no printed saving of `r` depends on a move that
/// breaks a constraint the advisor could see. Groups stay within one
/// cluster, node pool and tier; time-slicing stays under the ceiling;
/// MIG layouts follow the placement rules; production is not
/// time-sliced (the default policy); every counted move goes to a type
/// `ws` has a GPU of in that cluster; the totals count nothing else.
pub(crate) fn keeps_its_promises(r: &Report, ws: &[Workload], production_sliced: bool) {
    let tables = Tables::load(None, None).expect("test set-up");
    let there = |cluster: &str, ty: &str| {
        ws.iter().any(|w| {
            w.cluster.unwrap_or("") == cluster
                && tables.gpu(w.gpu.model).is_some_and(|g| g.name == ty)
        })
    };
    for g in &r.colocation {
        for m in &g.workloads {
            let a = r.workloads.iter().find(|a| a.workload.to_string() == *m);
            let a = a.expect("a member is a workload");
            assert_eq!(
                (&a.workload.cluster, &a.node_pool, &a.tier),
                (&g.cluster, &g.node_pool, &g.tier),
                "{g:?}"
            );
        }
        assert!(there(&g.cluster, &g.gpu_type), "no {} in {g:?}", g.gpu_type);
        match g.sharing {
            "time_slicing" => {
                assert!(g.utilization <= 0.8 + 1e-9, "{g:?}");
                assert!(g.memory_gib <= g.gpu_memory_gib, "{g:?}");
                assert!(production_sliced || g.tier != "production", "{g:?}");
            }
            _ => valid_layout(&tables, g),
        }
        let saving = (g.cost_now_usd_per_hour - g.price_usd_per_hour) * 730.0;
        assert!((g.saving_usd_per_month - saving).abs() < 0.01, "{g:?}");
    }
    let mut total: f64 = r.colocation.iter().map(|g| g.saving_usd_per_month).sum();
    for a in &r.workloads {
        let counted = |x: &&gpuscale_advisor::assess::Recommendation| x.needs.is_none();
        for x in a.recommendations.iter().filter(counted) {
            let moves = x.kind == "gpu_type" || x.kind == "too_small";
            if let Some(to) = target(&x.action).filter(|_| moves) {
                assert!(
                    there(&a.workload.cluster, to),
                    "{}: {}",
                    a.workload,
                    x.action
                );
            }
        }
        if a.recommendations.iter().all(|x| x.group.is_none()) {
            let own = a.recommendations.iter().filter(counted);
            total += own
                .filter(|x| x.kind == "mig" || x.kind == "gpu_type")
                .map(|x| x.saving_usd_per_month)
                .fold(0.0, f64::max);
        }
    }
    let got = r.placement_saving_usd_per_month;
    assert!((got - total).abs() < 0.01, "placement {got} vs {total}");
}

/// Every instance at one of its profile's placements, no memory slice
/// shared, at most 7 compute slices (NVIDIA's MIG User Guide).
fn valid_layout(tables: &Tables, g: &gpuscale_advisor::colocate::Group) {
    let gpu = tables.gpus.gpus.iter().find(|t| t.name == g.gpu_type);
    let gpu = gpu.expect("a table type");
    let (mut used, mut compute) = (0u16, 0);
    for inst in g.mig_layout.as_ref().expect("a MIG group has a layout") {
        let (name, at) = inst.split_once('@').expect("profile@slice");
        let p = tables.mig_profile(gpu, name).expect("a profile of its GPU");
        let at: u32 = at.parse().expect("a slice");
        assert!(p.placements.contains(&at), "{inst} in {g:?}");
        let mask = ((1u16 << p.memory_eighths) - 1) << at;
        assert_eq!(used & mask, 0, "{inst} overlaps in {g:?}");
        used |= mask;
        compute += p.compute_slices;
    }
    assert!(compute <= 7, "{g:?}");
}

/// The recommendation of `kind` in `a`; the story fails naming the kinds
/// there were instead.
pub(crate) fn rec<'a>(a: &'a Assessment, kind: &str) -> &'a Recommendation {
    a.recommendations
        .iter()
        .find(|x| x.kind == kind)
        .unwrap_or_else(|| {
            let kinds: Vec<_> = a.recommendations.iter().map(|x| x.kind).collect();
            panic!("{:?}: no {kind} recommendation, only {kinds:?}", a.workload)
        })
}
