//! The DCGM reader, as a team with an A100 and L4 fleet meets it: the
//! exporter on the built-in `pre-hopper` node (no GPM), reading profiling
//! activity from a DCGM host engine through the DCGM simulator library (the
//! real loading, connecting, watching and reading code), while the host
//! engine runs, stops, comes back, refuses fields or stops answering.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuscale_dcgm_sim::hostengine::HostEngine;
use gpuscale_e2e::bins;
use gpuscale_e2e::exporter::{Exporter, Metrics};
use gpuscale_nvml_sim::scenario::{self, Scenario};

/// Collections run every 200 ms in the stories (`Exporter::simulate`).
const INTERVAL: Duration = Duration::from_millis(200);

const GPU_FAMILIES: [&str; 5] = [
    "gpu_graphics_active_ratio",
    "gpu_sm_active_ratio",
    "gpu_sm_occupancy_ratio",
    "gpu_tensor_active_ratio",
    "gpu_dram_active_ratio",
];
const MIG_FAMILIES: [&str; 4] = [
    "gpu_mig_sm_active_ratio",
    "gpu_mig_sm_occupancy_ratio",
    "gpu_mig_tensor_active_ratio",
    "gpu_mig_dram_active_ratio",
];

fn dcgm_lib() -> PathBuf {
    bins::ensure_built();
    bins::target_dir().join(gpuscale_dcgm_sim::LIBRARY_FILE)
}

fn pre_hopper() -> Scenario {
    match scenario::builtin("pre-hopper") {
        Some(Ok(s)) => s,
        other => panic!("built-in pre-hopper scenario: {other:?}"),
    }
}

/// The exporter on `scenario` reading DCGM from `engine` at `addr`.
fn start(scenario: &Path, addr: &str, extra: &[&str]) -> Exporter {
    let lib = dcgm_lib();
    let lib = lib.to_str().expect("utf-8 path");
    let mut args = vec!["--dcgm-hostengine", addr, "--dcgm-lib", lib];
    args.extend_from_slice(extra);
    Exporter::simulate(scenario, &args)
}

fn up(m: &Metrics) -> Option<f64> {
    m.find("gpuscale_exporter_dcgm_up", &[])
        .first()
        .map(|s| s.value)
}

fn served(m: &Metrics, family: &str) -> usize {
    m.find(family, &[]).len()
}

/// Each activity series of the scenario as DCGM serves it: family, the
/// label that tells the GPU or MIG instance, and its load (percent / 100).
fn expected(s: &Scenario) -> Vec<(&'static str, (&'static str, String), f64)> {
    let mut out = Vec::new();
    for (i, g) in s.gpus.iter().enumerate() {
        let l = &g.load;
        let want = [
            &l.utilization,
            &l.sm_active,
            &l.sm_occupancy,
            &l.tensor_active,
            &l.dram_active,
        ];
        for (family, curve) in GPU_FAMILIES.iter().zip(want) {
            out.push((*family, ("gpu", i.to_string()), curve.at(0.0) / 100.0));
        }
        for mig in &g.mig {
            let l = &mig.load;
            let want = [
                &l.sm_active,
                &l.sm_occupancy,
                &l.tensor_active,
                &l.dram_active,
            ];
            for (family, curve) in MIG_FAMILIES.iter().zip(want) {
                let key = ("mig_uuid", mig.uuid.clone());
                out.push((*family, key, curve.at(0.0) / 100.0));
            }
        }
    }
    out
}

/// Every GPU and MIG instance has each activity family, equal to the
/// scenario's load (percent / 100), and says its source is dcgm.
fn assert_scenario_values(m: &Metrics, s: &Scenario) {
    for (family, (label, id), want) in expected(s) {
        let got = m.value(family, &[(label, &id)]);
        assert!((got - want).abs() < 1e-9, "{family} {label} {id}: {got}");
    }
    for i in 0..s.gpus.len() {
        let gpu = i.to_string();
        let source = m.value(
            "gpu_activity_source_info",
            &[("gpu", &gpu), ("source", "dcgm")],
        );
        assert_eq!(source, 1.0, "gpu {gpu} activity comes from DCGM");
    }
}

/// A100 + L4: every GPU and MIG instance, source dcgm, the scenario's
/// values, and `--compat dcgm` serves them as DCGM_FI_PROF_*.
#[test]
fn activity_of_every_gpu_and_mig_instance_comes_from_dcgm() {
    let engine = HostEngine::start("127.0.0.1:0").expect("host engine");
    let addr = engine.addr().to_string();
    let exporter = start(Path::new("pre-hopper"), &addr, &["--compat", "dcgm"]);
    let m = exporter.scrape_until("DCGM values", |m| {
        up(m) == Some(1.0) && served(m, "gpu_mig_dram_active_ratio") == 2
    });
    let s = pre_hopper();
    assert_scenario_values(&m, &s);
    let tensor = m.value("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", &[("gpu", "1")]);
    assert!(
        (tensor - 0.63).abs() < 1e-9,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE {tensor}"
    );
    let sm = m.find("DCGM_FI_PROF_SM_ACTIVE", &[("GPU_I_ID", "2")]);
    assert_eq!(
        sm.len(),
        1,
        "the 3g.40gb instance as dcgm-exporter names it: {sm:?}"
    );
    assert!((sm[0].value - 0.18).abs() < 1e-9);
    gpuscale_e2e::exposition::assert_unique_family_names(&exporter.scrape_text());
}

fn collections(m: &Metrics) -> f64 {
    m.value("gpuscale_exporter_collections_total", &[])
}

/// Every DCGM series of a scrape is the scenario's value (a failed read is
/// never a 0), and a scrape without them says why in the same collection.
fn assert_served_or_down(m: &Metrics) {
    for (family, (label, id), want) in expected(&pre_hopper()) {
        if let Some(got) = m.get(family, &[(label, &id)]) {
            assert!((got - want).abs() < 1e-9, "{family} {label} {id}: {got}");
        }
    }
    if served(m, "gpu_sm_active_ratio") == 0 {
        assert_eq!(up(m), Some(0.0), "families gone but dcgm_up not 0");
        let reason = &m.find("gpuscale_exporter_dcgm_up", &[])[0].labels["reason"];
        assert!(
            ["connection_lost", "connect_failed"].contains(&reason.as_str()),
            "reason {reason}"
        );
    }
}

/// Stopped: the families are gone within one interval, counted in
/// collections (a loaded machine stretches time, not the count): the
/// collection under way when the host engine stopped may serve what it read
/// before, the next one does not; dcgm_up 0 with the reason in that same
/// collection, no zero anywhere. Restarted on the same port: back without
/// a restart.
#[test]
fn a_stopped_host_engine_leaves_its_families_out_and_a_restarted_one_brings_them_back() {
    let engine = HostEngine::start("127.0.0.1:0").expect("host engine");
    let addr = engine.addr().to_string();
    let exporter = start(Path::new("pre-hopper"), &addr, &[]);
    exporter.scrape_until("DCGM values", |m| up(m) == Some(1.0));
    engine.stop();
    // The first scrape after the stop shows collection `c`; `c + 1` may have
    // begun (and read DCGM) before the stop, `c + 2` began after it.
    let c = collections(&exporter.scrape());
    let m = exporter.scrape_until("the collection after the stop", |m| {
        assert_served_or_down(m);
        let n = collections(m);
        let present = served(m, "gpu_sm_active_ratio");
        assert!(
            n < c + 2.0 || present == 0,
            "collection {n} serves DCGM values though it began after the host engine \
             stopped (first scrape after the stop: collection {c})"
        );
        n >= c + 2.0
    });
    eprintln!(
        "host engine stopped at collection {c}; collection {} serves without",
        collections(&m)
    );
    for family in GPU_FAMILIES.iter().chain(&MIG_FAMILIES) {
        assert_eq!(
            served(&m, family),
            0,
            "{family} served without a host engine"
        );
    }
    assert_eq!(
        m.find("gpu_activity_source_info", &[("source", "none")])
            .len(),
        4
    );
    assert!(m.has("gpu_utilization_ratio"), "NVML families go on");
    let _engine = HostEngine::start(&addr).expect("host engine again, same port");
    let m = exporter.scrape_until("DCGM values again", |m| {
        assert_served_or_down(m);
        up(m) == Some(1.0) && served(m, "gpu_mig_dram_active_ratio") == 2
    });
    assert_scenario_values(&m, &pre_hopper());
}

/// A scenario file: the built-in pre-hopper node with `extra` as its
/// `dcgm:` section.
fn pre_hopper_with(dir: &Path, extra: &str) -> PathBuf {
    let (_, yaml) = scenario::BUILTIN_SCENARIOS
        .iter()
        .find(|(n, _)| *n == "pre-hopper")
        .expect("pre-hopper");
    let yaml = yaml.replace("dcgm: {}\n", extra);
    assert!(
        yaml.contains(extra),
        "the built-in scenario has a dcgm: section"
    );
    gpuscale_e2e::write_file(dir, "scenario.yaml", &yaml)
}

/// DCGM refuses the field group of dram_active (a metric group of its own),
/// cannot watch sm_occupancy with the others and has no profiling for the
/// idle L4: those are left out and counted, the other fields and GPUs are
/// served.
#[test]
fn fields_dcgm_refuses_or_cannot_watch_together_are_left_out_and_the_others_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = "dcgm:\n  own_group: [dram_active]\n  refuse: [dram_active]\n  multi_pass: [sm_occupancy]\n  no_profiling: [GPU-14000030-0000-4000-8000-000000000000]\n";
    let file = pre_hopper_with(dir.path(), extra);
    let engine = HostEngine::start("127.0.0.1:0").expect("host engine");
    let exporter = start(&file, &engine.addr().to_string(), &[]);
    let m = exporter.scrape_until("DCGM values", |m| served(m, "gpu_sm_active_ratio") == 3);
    assert_eq!(served(&m, "gpu_dram_active_ratio"), 0);
    assert_eq!(served(&m, "gpu_sm_occupancy_ratio"), 0);
    assert_eq!(served(&m, "gpu_mig_dram_active_ratio"), 0);
    assert_eq!(served(&m, "gpu_tensor_active_ratio"), 3);
    assert_eq!(served(&m, "gpu_mig_sm_active_ratio"), 2);
    let none = m.find("gpu_activity_source_info", &[("source", "none")]);
    assert_eq!(none.len(), 1, "the L4 without profiling: {none:?}");
    assert_eq!(none[0].labels["gpu"], "3");
    let left = "gpuscale_exporter_dcgm_fields_left_out";
    assert_eq!(
        m.value(left, &[("field", "dram_active"), ("reason", "refused")]),
        3.0
    );
    assert_eq!(
        m.value(left, &[("field", "sm_occupancy"), ("reason", "multi_pass")]),
        3.0
    );
    assert_eq!(
        m.value(left, &[("field", "sm_active"), ("reason", "not_supported")]),
        1.0
    );
    assert_eq!(up(&m), Some(1.0));
    let log = exporter.log();
    assert!(log.contains("DCGM refused to watch these fields"), "{log}");
    assert!(
        log.contains("no profiling metric groups for this GPU"),
        "{log}"
    );
}

/// No library at the path: the exporter starts, says why once, serves NVML.
#[test]
fn without_a_dcgm_library_the_exporter_says_why_once_and_serves_nvml() {
    let missing = "/nonexistent/libdcgm.so.4";
    let exporter = Exporter::simulate(
        Path::new("pre-hopper"),
        &["--dcgm-hostengine", "127.0.0.1:5555", "--dcgm-lib", missing],
    );
    let m = exporter.scrape_until("dcgm_up 0", |m| up(m) == Some(0.0));
    assert_eq!(
        m.value("gpuscale_exporter_dcgm_up", &[("reason", "no_library")]),
        0.0
    );
    assert_eq!(served(&m, "gpu_utilization_ratio"), 4);
    assert_eq!(served(&m, "gpu_sm_active_ratio"), 0);
    std::thread::sleep(INTERVAL * 5);
    let log = exporter.log();
    let told = log.matches("cannot load the DCGM library").count();
    assert_eq!(told, 1, "said why {told} times:\n{log}");
    assert!(log.contains(missing), "{log}");
}

/// An H100 node with the reader on: GPM serves, DCGM is asked for nothing.
#[test]
fn on_an_h100_node_gpm_serves_and_dcgm_is_not_asked() {
    let engine = HostEngine::start("127.0.0.1:0").expect("host engine");
    let exporter = start(Path::new(""), &engine.addr().to_string(), &[]);
    let m = exporter.scrape_until("GPM values", |m| served(m, "gpu_sm_active_ratio") == 8);
    assert_eq!(
        m.find("gpu_activity_source_info", &[("source", "gpm")])
            .len(),
        8
    );
    std::thread::sleep(INTERVAL * 3);
    let asked: Vec<String> = engine
        .requests()
        .into_iter()
        .filter(|r| {
            [
                "dcgmGroupAddEntity",
                "dcgmWatchFields",
                "dcgmProfGetSupportedMetricGroups",
                "dcgmEntitiesGetLatestValues",
            ]
            .iter()
            .any(|f| r.starts_with(f))
        })
        .collect();
    assert!(asked.is_empty(), "DCGM was asked about GPM GPUs: {asked:?}");
}

/// A host engine that stops answering: /metrics answers as fast as before,
/// NVML collections go on at their interval, and the DCGM families leave
/// with the first collection whose read does not come back within half an
/// interval, with reason timeout; answering again brings them back.
#[test]
fn a_host_engine_that_never_answers_delays_neither_metrics_nor_nvml() {
    let engine = HostEngine::start("127.0.0.1:0").expect("host engine");
    let exporter = start(Path::new("pre-hopper"), &engine.addr().to_string(), &[]);
    exporter.scrape_until("DCGM values", |m| up(m) == Some(1.0));
    let before = scrape_times(&exporter, 20);
    let at_hang = collections(&exporter.scrape());
    engine.hang(true);
    let hung = Instant::now();
    // As for a stop: collection `c + 2` began after the hang, and serves
    // nothing of a read that did not come back.
    let c = collections(&exporter.scrape());
    let m = exporter.scrape_until("the collection after the hang", |m| {
        let n = collections(m);
        assert!(
            n < c + 2.0 || served(m, "gpu_sm_active_ratio") == 0,
            "collection {n} serves DCGM values of a hung host engine (hung at {c})"
        );
        n >= c + 2.0
    });
    assert_eq!(
        m.get("gpuscale_exporter_dcgm_up", &[("reason", "timeout")]),
        Some(0.0),
        "dcgm_up says timeout in the collection that leaves the values out"
    );
    let during = scrape_times(&exporter, 20);
    let elapsed = hung.elapsed();
    let ran = collections(&exporter.scrape()) - at_hang;
    let expected = elapsed.as_secs_f64() / INTERVAL.as_secs_f64();
    eprintln!(
        "/metrics before the hang: median {:?}, max {:?}; during: median {:?}, max {:?}; \
         {ran} collections in {elapsed:?} of hang (interval {INTERVAL:?})",
        before[10], before[19], during[10], during[19]
    );
    assert!(
        during[19] < Duration::from_millis(500),
        "a scrape waited: {during:?}"
    );
    assert!(
        ran >= expected * 0.5,
        "NVML collections slowed: {ran} in {elapsed:?}"
    );
    engine.hang(false);
    exporter.scrape_until("DCGM values again", |m| up(m) == Some(1.0));
}

/// `n` scrape durations, sorted (20 ms apart).
fn scrape_times(exporter: &Exporter, n: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let _ = exporter.scrape_text();
        times.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    }
    times.sort();
    times
}
