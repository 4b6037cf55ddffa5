//! A move goes only where a node of that type is: on a backfilled week of
//! two clusters (east has H100 and L4 nodes, west H100 nodes alone), a
//! light service that a T4 would serve cheapest is moved to an L4 in east
//! and gets the T4 only as a conditional saving ("needs a node pool of
//! T4"); in west it gets no type it could be moved to, and two notebooks
//! share one of west's own H100s, the T4 printed apart. Nothing
//! conditional is totalled; every saving checked by hand.

use gpuscale_advisor::Report;
use gpuscale_advisor::assess::Recommendation;

use crate::fleet::{keeps_its_promises, spare, week};
use crate::synth::{H100, L4, Workload, workload};
use crate::week::find;

const H: f64 = 730.0;

/// Levels: VRAM GiB, utilization, SM, tensor, DRAM active.
#[rustfmt::skip]
fn fleet() -> Vec<Workload> {
    let ocr = |name, cluster| {
        let mut w = workload("docs", name, "Deployment", H100,
            (4.0, 4.0), (0.1, 0.05), (0.03, 0.01), (0.01, 0.0), (0.02, 0.01));
        w.cluster = Some(cluster);
        w
    };
    let nb = |name| {
        let mut w = workload("lab", name, "StatefulSet", H100,
            (2.0, 2.0), (0.01, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
        (w.cluster, w.tier) = (Some("west"), Some("dev"));
        w
    };
    vec![
        spare("l4-east", L4, Some("east"), Some("l4")),
        ocr("ocr-east", "east"),
        ocr("ocr-west", "west"),
        nb("nb-a"),
        nb("nb-b"),
    ]
}

fn types<'a>(r: &'a Report, name: &str) -> Vec<&'a Recommendation> {
    let a = find(r, name);
    a.recommendations
        .iter()
        .filter(|x| x.kind == "gpu_type")
        .collect()
}

fn near(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() < 0.01,
        "{what}: got {got}, by hand {want}"
    );
}

#[test]
fn a_move_goes_only_where_the_cluster_has_that_gpu() {
    let ws = fleet();
    let r = week(&ws).advise();
    keeps_its_promises(&r, &ws, false);
    // ocr on an L4: SM 3 % x 3350 / 300 = 34 %; on a T4 31 %: the T4 is
    // cheaper, but east has no T4 node.
    let east = types(&r, "ocr-east");
    let firm = east.iter().find(|x| x.needs.is_none()).expect("an L4");
    assert!(
        firm.action.starts_with("L4 instead of H100-80GB"),
        "{}",
        firm.action
    );
    near(firm.saving_usd_per_month, (4.0 - 0.805) * H, "L4");
    let cond = east
        .iter()
        .find(|x| x.needs.is_some())
        .expect("a T4, conditional");
    assert!(cond.action.starts_with("T4 instead of"), "{}", cond.action);
    near(cond.saving_usd_per_month, (4.0 - 0.526) * H, "T4");
    let needs = cond.needs.as_deref().unwrap_or_default();
    assert!(
        needs.starts_with("a node pool of T4 in cluster east: no T4"),
        "{needs}"
    );
    // West has H100s alone: the T4 is all there is, and conditional.
    let west = types(&r, "ocr-west");
    assert_eq!(west.len(), 1, "{west:?}");
    assert!(
        west[0]
            .needs
            .as_deref()
            .is_some_and(|n| n.contains("cluster west"))
    );
    // The notebooks share one of west's H100s; a T4 is printed apart.
    let g = &r.colocation[0];
    assert_eq!((r.colocation.len(), g.gpu_type.as_str()), (1, "H100-80GB"));
    near(g.saving_usd_per_month, (2.0 * 4.0 - 4.0) * H, "group");
    let o = g
        .if_added
        .as_ref()
        .expect("a T4 for the group, conditional");
    assert_eq!(o.gpu_type, "T4");
    near(
        o.saving_usd_per_month,
        (2.0 * 4.0 - 0.526) * H,
        "group on a T4",
    );
    // Counted: each ocr's MIG 1g.10gb (6 of 7 slices, more than the L4's
    // saving) and the group; none of the conditional T4s.
    let mig = 4.0 * 6.0 / 7.0 * H;
    near(
        r.placement_saving_usd_per_month,
        2.0 * mig + (2.0 * 4.0 - 4.0) * H,
        "placement",
    );
    let table = crate::week::table(&r);
    assert!(
        table.contains("would save $2,536/month; not in the totals"),
        "{table}"
    );
}
