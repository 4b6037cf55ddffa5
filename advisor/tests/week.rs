//! The advisor against a real Prometheus holding a week of history:
//! `promtool tsdb create-blocks-from openmetrics` backfills the built-in
//! scenario (day/night load, 5-minute samples), Prometheus serves it, and
//! the advisor's findings are checked workload by workload.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuscale_advisor::Report;
use gpuscale_advisor::assess::Assessment;
use gpuscale_advisor::bottleneck::Bottleneck;
use gpuscale_advisor::tables::Tables;

pub(crate) const RANGE_S: i64 = 7 * 86_400;
pub(crate) const STEP_S: i64 = 300;

pub(crate) struct Prom {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn on_path(bin: &str) -> bool {
    Command::new(bin).arg("--version").output().is_ok()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("test set-up")
        .local_addr()
        .expect("test set-up")
        .port()
}

/// Backfills `text` and starts Prometheus on it.
pub(crate) fn prometheus_with(dir: &Path, text: &str) -> Prom {
    for bin in ["promtool", "prometheus"] {
        assert!(
            on_path(bin),
            "`{bin}` is not on PATH: install the Debian package prometheus"
        );
    }
    let input = dir.join("history.om");
    std::fs::write(&input, text).expect("test set-up");
    let data = dir.join("data");
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics", "--quiet"])
        .arg(&input)
        .arg(&data)
        .output()
        .expect("test set-up");
    assert!(
        out.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, "global:\n  scrape_interval: 1m\n").expect("test set-up");
    let port = free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("test set-up");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--storage.tsdb.retention.time=30d")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("test set-up");
    let p = Prom {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let t0 = Instant::now();
    while ureq::get(&format!("{}/-/ready", p.url)).call().is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "Prometheus not ready: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    p
}

pub(crate) fn end_now() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("test set-up")
        .as_secs() as i64;
    now - now % STEP_S - STEP_S
}

pub(crate) fn find<'a>(r: &'a Report, name: &str) -> &'a Assessment {
    r.workloads
        .iter()
        .find(|a| a.workload.name == name)
        .unwrap_or_else(|| panic!("{name} not in the report"))
}

/// The report's table, printed for the test log and checked to stay
/// under 120 columns.
pub(crate) fn table(r: &Report) -> String {
    let t = gpuscale_advisor::report::table(r);
    eprintln!("{t}");
    for line in t.lines() {
        assert!(
            line.chars().count() < 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    t
}

pub(crate) fn kinds(a: &Assessment) -> Vec<&str> {
    a.recommendations.iter().map(|r| r.kind).collect()
}

#[test]
fn a_week_of_history_gets_the_right_advice() {
    let scenario = crate::synth::scenario();
    let w = crate::fleet::week(&scenario);
    let (end, prom) = (w.end, &w.prom);
    let tables = Tables::load(None, None).expect("test set-up");
    let r = w.advise();
    assert_eq!(r.workloads.len(), scenario.len());

    // The built-in example keeps the constraint promise (its cluster has
    // H100 and A100 nodes only: an A10G move is conditional, not counted).
    crate::fleet::keeps_its_promises(&r, &scenario, false);
    embedder_gets_the_smallest_mig_slice(&r);
    the_70b_model_is_not_downsized(&r);
    notebooks_and_classifier_share_one_gpu(&r);
    decode_is_bandwidth_bound_and_keeps_its_bandwidth(&r, &tables);
    twenty_minutes_get_no_advice(&r);
    cost_per_million_tokens_matches_the_counters(&r, &scenario, end);
    the_binary_prints_json(&prom.url, end);
}

fn embedder_gets_the_smallest_mig_slice(r: &Report) {
    let a = find(r, "embedder");
    assert_eq!(a.confidence, gpuscale_advisor::assess::Confidence::High);
    assert!((a.vram_peak_gib.expect("test set-up") - 6.0).abs() < 0.01);
    assert!((a.sm_active_p95.expect("test set-up") - 0.08).abs() < 1e-6);
    let mig = a
        .recommendations
        .iter()
        .find(|r| r.kind == "mig")
        .expect("a MIG recommendation");
    assert!(mig.action.contains("1g.10gb"), "{}", mig.action);
    // Six of seven slices of a $4.00/h GPU, 730 h a month.
    let want = 4.0 * 6.0 / 7.0 * 730.0;
    assert!(
        (mig.saving_usd_per_month - want).abs() < 0.01,
        "{}",
        mig.saving_usd_per_month
    );
}

fn the_70b_model_is_not_downsized(r: &Report) {
    let a = find(r, "llama-70b");
    assert_eq!(
        a.bottleneck,
        Bottleneck::MemoryCapacity,
        "{}",
        a.bottleneck_reason
    );
    let k = kinds(a);
    assert!(
        !k.contains(&"mig") && !k.contains(&"gpu_type") && !k.contains(&"colocate"),
        "{k:?}"
    );
}

fn notebooks_and_classifier_share_one_gpu(r: &Report) {
    assert_eq!(r.colocation.len(), 1, "{:?}", r.colocation);
    let g = &r.colocation[0];
    let mut names = g.workloads.clone();
    names.sort();
    assert_eq!(
        names,
        [
            "research/classifier",
            "research/nb-alice",
            "research/nb-bob"
        ]
    );
    assert_eq!(g.gpus_freed, 2);
    // Dev tier, one cluster and pool: time-sliced on the cheapest GPU that
    // holds them of the types the cluster has (H100, A100): one A100.
    assert_eq!(
        (g.gpu_type.as_str(), g.sharing),
        ("A100-80GB", "time_slicing")
    );
    let by_hand = (3.0 * 2.5 - 2.5) * 730.0;
    assert!(
        (g.saving_usd_per_month - by_hand).abs() < 0.01,
        "{}",
        g.saving_usd_per_month
    );
    assert!((g.utilization - (0.2 + 0.01)).abs() < 1e-6);
    // An A10G would be cheaper: the classifier's 20 % on an A100 (2039
    // GB/s) is 68 % of an A10G (600 GB/s); a T4 or L4 (~300 GB/s) would
    // be over 80 %. No A10G node in the cluster: conditional, apart.
    let o = g.if_added.as_ref().expect("the A10G, conditional");
    assert_eq!(o.gpu_type, "A10G");
    let by_hand = (3.0 * 2.5 - 1.006) * 730.0;
    assert!((o.saving_usd_per_month - by_hand).abs() < 0.01, "{o:?}");
    assert!(o.needs.starts_with("a node pool of A10G in the cluster"));
    // Placement: the group's $3,650 and the embedder's MIG slice.
    let placement = (3.0 * 2.5 - 2.5) * 730.0 + 4.0 * 6.0 / 7.0 * 730.0;
    assert!((r.placement_saving_usd_per_month - placement).abs() < 0.01);
    // Each member keeps its own advice beside the group's.
    assert!(kinds(find(r, "classifier")).contains(&"mig"));
    // A100s have no GPM: the classifier's limit is not guessed.
    assert_eq!(find(r, "classifier").bottleneck, Bottleneck::NoGpm);
    assert_eq!(find(r, "nb-alice").bottleneck, Bottleneck::Idle);
    assert!(kinds(find(r, "nb-bob")).contains(&"scale_to_zero"));
}

fn decode_is_bandwidth_bound_and_keeps_its_bandwidth(r: &Report, tables: &Tables) {
    let a = find(r, "chat");
    assert_eq!(
        a.bottleneck,
        Bottleneck::MemoryBandwidth,
        "{}",
        a.bottleneck_reason
    );
    let h100 = tables.gpu("NVIDIA H100 80GB HBM3").expect("test set-up");
    for rec in a.recommendations.iter().filter(|r| r.kind == "gpu_type") {
        let to = tables
            .gpus
            .gpus
            .iter()
            .find(|g| rec.action.starts_with(&format!("{} ", g.name)))
            .expect("test set-up");
        assert!(to.bandwidth_gbps >= h100.bandwidth_gbps, "{}", rec.action);
    }
    assert!(!kinds(a).contains(&"mig"), "{:?}", a.recommendations);
}

fn twenty_minutes_get_no_advice(r: &Report) {
    let a = find(r, "fresh");
    assert!(a.recommendations.is_empty(), "{:?}", a.recommendations);
    assert!(
        (a.history_hours - 20.0 / 60.0).abs() < 0.01,
        "{}",
        a.history_hours
    );
    assert!(a.notes.iter().any(|n| n.contains("no recommendation")));
}

fn cost_per_million_tokens_matches_the_counters(
    r: &Report,
    s: &[crate::synth::Workload],
    end: i64,
) {
    let w = s.iter().find(|w| w.name == "chat").expect("test set-up");
    let (tokens, cost) = crate::synth::tokens_and_cost(w, end, RANGE_S, STEP_S);
    let want = cost / tokens * 1e6;
    let got = find(r, "chat")
        .cost_usd_per_million_tokens
        .expect("test set-up");
    assert!((got / want - 1.0).abs() < 0.01, "got {got}, by hand {want}");
    assert!((find(r, "chat").cost_usd_per_hour.expect("test set-up") - 4.0).abs() < 1e-9);
    assert!(find(r, "embedder").cost_usd_per_million_tokens.is_none());
}

fn the_binary_prints_json(url: &str, end: i64) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuscale-advisor"))
        .args(["--prometheus", url, "--output", "json", "--end"])
        .arg(end.to_string())
        .output()
        .expect("test set-up");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("test set-up");
    assert_eq!(v["workloads"].as_array().expect("test set-up").len(), 7);
    assert!(
        v["placement_saving_usd_per_month"]
            .as_f64()
            .expect("test set-up")
            > 0.0
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_gpuscale-advisor"))
        .args(["--prometheus", url, "--range", "7x"])
        .output()
        .expect("test set-up");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a duration"));
}
