//! The one way a story gets its week: the workloads' samples written as
//! OpenMetrics (`synth`), backfilled with promtool into a real Prometheus,
//! and the advisor run over the seven days ending at the last whole step.

use std::time::Duration;

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
