//! The placement plan on a two-cluster fleet backfilled into a real
//! Prometheus: groups never span clusters, node pools or tiers;
//! production is not time-sliced unless opted in; a time-slice set over
//! the utilization ceiling is refused; a MIG layout the slice count allows
//! but the placement rules do not is refused; idle notebooks share one
//! cheaper GPU of another type; every member keeps its own advice; every
//! saving is checked against a hand computation.

use gpuscale_advisor::Report;
use gpuscale_advisor::colocate::Group;
use gpuscale_advisor::policy::Policy;

use crate::fleet::spare;
use crate::synth::{A100, H100, Workload, workload};
use crate::week::{find, kinds};

const H: f64 = 730.0;

fn at(
    mut w: Workload,
    cluster: &'static str,
    pool: &'static str,
    tier: Option<&'static str>,
) -> Workload {
    w.cluster = Some(cluster);
    w.pool = Some(pool);
    w.tier = tier;
    w
}

/// Levels: VRAM GiB, utilization, SM, tensor, DRAM active.
#[rustfmt::skip]
fn fleet() -> Vec<Workload> {
    let nb = |name, gib| workload("lab", name, "StatefulSet", H100,
        (gib, gib), (0.01, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    let api = |name| workload("shop", name, "Deployment", H100,
        (2.0, 2.0), (0.02, 0.01), (0.01, 0.0), (0.0, 0.0), (0.01, 0.0));
    let p = |name, sm| workload("search", name, "Deployment", H100,
        (6.0, 6.0), (0.35, 0.1), (sm, 0.02), (0.03, 0.01), (0.05, 0.01));
    let etl = |name| workload("batch", name, "Job", H100,
        (8.0, 8.0), (0.45, 0.45), (0.45, 0.45), (0.05, 0.05), (0.1, 0.1));
    let mut nb5 = workload("lab", "nb-5", "StatefulSet", A100,
        (2.0, 2.0), (0.01, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    nb5 = at(nb5, "east", "a100", Some("dev"));
    // West's L4-pool notebook: its pool only as a target label on gpu_info.
    let mut nb6 = at(nb("nb-6", 4.0), "west", "t4", Some("dev"));
    nb6.pool_on_gpu_info = true;
    let mut p3 = p("p-3", 0.08);
    p3.vram_gib = (5.0, 5.0);
    p3.utilization = (0.3, 0.1);
    // The node pools of other types each cluster has (a GPU of each).
    let t4 = crate::synth::Gpu { model: "Tesla T4", memory_gib: 15.0, price: 0.526, gpm: false };
    let a10g = crate::synth::Gpu { model: "NVIDIA A10G", memory_gib: 22.5, price: 1.006, gpm: false };
    vec![
        spare("t4-east", t4, Some("east"), Some("t4")),
        spare("a10g-east", a10g, Some("east"), Some("a10g")),
        spare("t4-west", t4, Some("west"), Some("t4")),
        at(nb("nb-1", 2.0), "east", "h100", Some("dev")),
        at(nb("nb-2", 3.0), "east", "h100", Some("dev")),
        at(nb("nb-4", 4.0), "east", "h100", Some("dev")),
        at(nb("nb-3", 4.0), "west", "h100", Some("dev")),
        nb6,
        nb5,
        at(api("api-1"), "east", "h100", None),
        at(api("api-2"), "east", "h100", None),
        at(p("p-1", 0.3), "east", "h100", None),
        at(p("p-2", 0.3), "east", "h100", None),
        at(p3, "east", "h100", None),
        at(etl("etl-1"), "east", "h100", None),
        at(etl("etl-2"), "east", "h100", None),
    ]
}

fn group_of<'a>(r: &'a Report, name: &str) -> Option<&'a Group> {
    r.colocation
        .iter()
        .find(|g| g.workloads.iter().any(|w| w.ends_with(&format!("/{name}"))))
}

fn saving(r: &Report, name: &str, kind: &str) -> f64 {
    find(r, name)
        .recommendations
        .iter()
        .find(|x| x.kind == kind)
        .unwrap_or_else(|| panic!("{name}: no {kind} in {:?}", find(r, name).recommendations))
        .saving_usd_per_month
}

fn near(got: f64, want: f64) {
    assert!((got - want).abs() < 0.01, "got {got}, by hand {want}");
}

#[test]
fn a_two_cluster_fleet_gets_a_plan_that_can_be_carried_out() {
    let w = crate::fleet::week(&fleet());
    let batch = Policy::new(&["batch=batch".into()], "production", false).expect("test set-up");
    let r = w.advise_with(batch.clone());
    crate::fleet::keeps_its_promises(&r, &fleet(), false);
    no_group_spans_a_cluster_pool_or_tier(&r);
    notebooks_share_one_t4(&r);
    production_is_not_time_sliced(&r);
    a_mig_layout_the_placement_rules_refuse(&r);
    over_the_ceiling_each_is_advised_alone(&r);
    the_total_counts_each_group_once(&r);
    let mut opt_in = batch;
    opt_in.time_slice_production = true;
    let r = w.advise_with(opt_in);
    crate::fleet::keeps_its_promises(&r, &fleet(), true);
    let g = group_of(&r, "api-1").expect("opted in: api-1 time-sliced");
    assert_eq!(g.sharing, "time_slicing");
    assert!(
        g.workloads.contains(&"east/shop/api-2".to_string()),
        "{g:?}"
    );
}

fn no_group_spans_a_cluster_pool_or_tier(r: &Report) {
    for g in &r.colocation {
        for w in &g.workloads {
            let a = r
                .workloads
                .iter()
                .find(|a| a.workload.to_string() == *w)
                .expect("member");
            assert_eq!(a.workload.cluster, g.cluster, "{g:?}");
            assert_eq!(a.node_pool, g.node_pool, "{g:?}");
            assert_eq!(a.tier, g.tier, "{g:?}");
        }
    }
    // The west notebooks (two pools) and the A100-pool notebook stay alone.
    assert!(group_of(r, "nb-3").is_none() && group_of(r, "nb-5").is_none());
    assert!(group_of(r, "nb-6").is_none());
    assert_eq!(find(r, "nb-6").node_pool.as_deref(), Some("t4"));
    assert_eq!(find(r, "nb-3").tier_source, "its pods");
    assert_eq!(
        (
            find(r, "etl-1").tier.as_str(),
            find(r, "etl-1").tier_source.as_str()
        ),
        ("batch", "--tier")
    );
    assert_eq!(find(r, "api-1").tier_source, "--default-tier");
    // Alone, the west notebook goes to a T4: $4.00 - $0.526 an hour.
    near(saving(r, "nb-3", "gpu_type"), (4.0 - 0.526) * H);
}

fn notebooks_share_one_t4(r: &Report) {
    let g = group_of(r, "nb-1").expect("the east notebooks share");
    let mut names = g.workloads.clone();
    names.sort();
    assert_eq!(names, ["east/lab/nb-1", "east/lab/nb-2", "east/lab/nb-4"]);
    assert_eq!((g.gpu_type.as_str(), g.sharing), ("T4", "time_slicing"));
    // Three H100s at $4.00 become one T4 at $0.526.
    near(g.saving_usd_per_month, (3.0 * 4.0 - 0.526) * H);
    near(g.memory_gib, (2.0 + 3.0 + 4.0) * 1.2);
    // Utilization 1 % each on an H100, x 3350 / 320 on the T4.
    assert!(
        (g.utilization - 3.0 * 0.01 * 3350.0 / 320.0).abs() < 1e-6,
        "{}",
        g.utilization
    );
    // Members keep their own advice, and the group's saving is not theirs.
    let own = find(r, "nb-1");
    assert!(kinds(own).contains(&"gpu_type") && kinds(own).contains(&"colocate"));
    let member = crate::fleet::rec(own, "colocate");
    assert_eq!(member.saving_usd_per_month, 0.0);
}

fn production_is_not_time_sliced(r: &Report) {
    for g in r.colocation.iter().filter(|g| g.tier == "production") {
        assert_eq!(g.sharing, "mig", "{g:?}");
    }
    // Two idle production APIs would share a T4 time-sliced; as they are
    // production, each gets its own T4 instead.
    assert!(group_of(r, "api-1").is_none() && group_of(r, "api-2").is_none());
    near(saving(r, "api-1", "gpu_type"), (4.0 - 0.526) * H);
}

fn a_mig_layout_the_placement_rules_refuse(r: &Report) {
    // p-1 and p-2 need 3g.40gb each, p-3 a 1g.10gb: 7 compute slices of 7,
    // but the two 3g instances take memory slices 0-3 and 4-7.
    let g = group_of(r, "p-1").expect("p-1 and p-2 share one H100 as MIG");
    let mut layout = g.mig_layout.clone().expect("a layout");
    layout.sort();
    assert_eq!(layout, ["3g.40gb@0", "3g.40gb@4"]);
    assert_eq!((g.gpu_type.as_str(), g.sharing), ("H100-80GB", "mig"));
    near(g.saving_usd_per_month, (2.0 * 4.0 - 4.0) * H);
    assert!(group_of(r, "p-3").is_none());
    // Alone, p-3 keeps its MIG slice (6 of 7 slices saved) and type advice.
    near(saving(r, "p-3", "mig"), 4.0 * 6.0 / 7.0 * H);
    near(saving(r, "p-3", "gpu_type"), (4.0 - 1.006) * H);
}

fn over_the_ceiling_each_is_advised_alone(r: &Report) {
    // 45 % + 45 % utilization is over 80 %; MIG would need 4g + 4g.
    assert!(group_of(r, "etl-1").is_none() && group_of(r, "etl-2").is_none());
    for w in ["etl-1", "etl-2"] {
        near(saving(r, w, "mig"), 4.0 * 3.0 / 7.0 * H);
    }
}

fn the_total_counts_each_group_once(r: &Report) {
    let groups = (3.0 * 4.0 - 0.526) * H + (2.0 * 4.0 - 4.0) * H;
    let alone = 2.0 * (4.0 - 0.526) * H          // api-1, api-2 on T4s
        + 4.0 * 6.0 / 7.0 * H                      // p-3 as 1g.10gb
        + 2.0 * 4.0 * 3.0 / 7.0 * H                // etl-1, etl-2 as 4g.40gb
        + 2.0 * (4.0 - 0.526) * H                  // nb-3, nb-6 on a T4
        + 2.5 * 6.0 / 7.0 * H; // nb-5 as 1g.10gb of its A100
    near(r.placement_saving_usd_per_month, groups + alone);
    assert_eq!(r.colocation.len(), 2, "{:?}", r.colocation);
}
