//! The exporter core, as a user meets it: start the binary on a simulated
//! node, scrape, and check the numbers against the scenario.

use std::io::Read as _;
use std::process::Command;
use std::sync::OnceLock;

use gpuscale_e2e::bins;
use gpuscale_e2e::exporter::{Exporter, Metrics};

const MIB: f64 = 1024.0 * 1024.0;
const GPU0: &str = "GPU-00000000-0000-4000-8000-000000000000";
const GPU1: &str = "GPU-11111111-0000-4000-8000-000000000000";
const GPU2: &str = "GPU-22222222-0000-4000-8000-000000000000";
const MIG_A: &str = "MIG-aaaaaaaa-0000-4000-8000-000000000000";

fn scenario(name: &str) -> std::path::PathBuf {
    bins::repo_root().join("tests/scenarios").join(name)
}

fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= tolerance * expected.abs().max(1.0)
}

#[track_caller]
fn assert_close(m: &Metrics, name: &str, labels: &[(&str, &str)], expected: f64) {
    let v = m.value(name, labels);
    assert!(
        close(v, expected, 0.01),
        "{name}{labels:?} = {v}, expected {expected}"
    );
}

/// The exporter on `exporter-basic.yaml` and its first scrape with GPM values,
/// shared by the stories below (one start for all of them).
struct Basic {
    exporter: Exporter,
    m: Metrics,
}

fn basic() -> &'static Basic {
    static BASIC: OnceLock<Basic> = OnceLock::new();
    BASIC.get_or_init(|| {
        let exporter = Exporter::simulate_shared(&scenario("exporter-basic.yaml"), &[]);
        // GPM needs two samples, so wait for its first value.
        let m = exporter.scrape_until("GPM values", |m| {
            m.get("gpu_sm_active_ratio", &[("uuid", GPU0)]).is_some()
        });
        Basic { exporter, m }
    })
}

#[test]
fn every_gpu_has_one_identity_series() {
    let m = &basic().m;
    let g0 = [("uuid", GPU0)];
    let info = m.find("gpu_info", &g0);
    assert_eq!(info.len(), 1);
    let l = &info[0].labels;
    assert_eq!(l["model"], "NVIDIA H100 80GB HBM3");
    assert_eq!(l["pci_bus_id"], "00000000:18:00.0");
    assert_eq!(l["driver_version"], "570.172.08");
    assert_eq!(l["cuda_version"], "12.8");
    assert_eq!(l["serial"], "1650000000000");
    assert_eq!(l["architecture"], "hopper");
    assert_eq!(l["node"], "test-node", "the simulated node's name");
    assert_eq!(l["gpu"], "0");
    assert_eq!(m.find("gpu_info", &[]).len(), 3);
}

#[test]
fn utilization_memory_power_thermal_and_clocks_are_the_scenario_values() {
    let m = &basic().m;
    let g0 = [("uuid", GPU0)];
    assert_close(m, "gpu_utilization_ratio", &g0, 0.80);
    assert_close(m, "gpu_memory_utilization_ratio", &g0, 0.40);
    assert_close(m, "gpu_encoder_utilization_ratio", &g0, 0.05);
    assert_close(m, "gpu_decoder_utilization_ratio", &g0, 0.10);
    assert_close(m, "gpu_memory_total_bytes", &g0, 81559.0 * MIB);
    assert_close(m, "gpu_memory_used_bytes", &g0, 10000.0 * MIB);
    assert_close(m, "gpu_memory_reserved_bytes", &g0, 512.0 * MIB);
    assert_close(
        m,
        "gpu_memory_free_bytes",
        &g0,
        (81559.0 - 10000.0 - 512.0) * MIB,
    );
    assert_close(m, "gpu_power_usage_watts", &g0, 350.0);
    assert_close(m, "gpu_power_limit_watts", &g0, 700.0);
    // No default in the scenario: the board's default is the enforced limit.
    assert_close(m, "gpu_power_limit_default_watts", &g0, 700.0);
    let g1 = [("uuid", GPU1)];
    assert_close(m, "gpu_power_limit_watts", &g1, 300.0);
    assert_close(m, "gpu_power_limit_default_watts", &g1, 350.0);
    let energy = m.value("gpu_energy_consumed_joules_total", &g0);
    assert!(
        energy >= 1000.0,
        "energy counter starts at the scenario offset: {energy}"
    );
    assert_close(m, "gpu_temperature_celsius", &g0, 65.0);
    assert_close(m, "gpu_memory_temperature_celsius", &g0, 70.0);
    for (name, key, value, expected) in [
        (
            "gpu_temperature_threshold_celsius",
            "threshold",
            "slowdown",
            87.0,
        ),
        ("gpu_clock_hertz", "clock", "sm", 1755e6),
        ("gpu_clock_hertz", "clock", "memory", 2619e6),
        ("gpu_clock_max_hertz", "clock", "sm", 1980e6),
    ] {
        assert_close(m, name, &[("uuid", GPU0), (key, value)], expected);
    }
    // Static facts no rule compares with are gpu_info labels, not series.
    let info = [
        ("shutdown_celsius", "92"),
        ("slowdown_celsius", "87"),
        ("max_sm_hertz", "1980000000"),
    ];
    assert_eq!(m.find("gpu_info", &[&g0[..], &info[..]].concat()).len(), 1);
    assert!(
        m.find(
            "gpu_temperature_threshold_celsius",
            &[("threshold", "shutdown")]
        )
        .is_empty()
    );
    assert!(
        m.find("gpu_clock_max_hertz", &[("clock", "video")])
            .is_empty()
    );
    assert_eq!(m.value("gpu_performance_state", &g0), 0.0);
}

/// Throttling: power cap active, thermal not.
#[test]
fn throttling_shows_the_power_cap_and_its_time() {
    let m = &basic().m;
    assert_eq!(
        m.value(
            "gpu_clock_event_active",
            &[("uuid", GPU0), ("reason", "sw_power_cap")]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            "gpu_clock_event_active",
            &[("uuid", GPU0), ("reason", "sw_thermal")]
        ),
        0.0
    );
    assert!(
        m.value(
            "gpu_clock_event_seconds_total",
            &[("uuid", GPU0), ("policy", "power")]
        ) > 0.0
    );
}

#[test]
fn gpm_activity_and_pcie_rates_on_hopper() {
    let m = &basic().m;
    for (name, expected) in [
        ("gpu_sm_active_ratio", 0.70),
        ("gpu_sm_occupancy_ratio", 0.40),
        ("gpu_tensor_active_ratio", 0.50),
        ("gpu_dram_active_ratio", 0.30),
        ("gpu_pcie_transmit_bytes_per_second", 1048576000.0),
        ("gpu_pcie_receive_bytes_per_second", 2097152000.0),
    ] {
        assert_close(m, name, &[("uuid", GPU0)], expected);
    }
}

/// NVLink: two links with counters; errors start at zero.
#[test]
fn nvlink_counters_are_summed_over_links_by_default() {
    let m = &basic().m;
    let g0 = [("uuid", GPU0)];
    let tx = m.find("gpu_nvlink_transmit_bytes_total", &g0);
    assert_eq!(tx.len(), 1, "summed over links by default");
    assert!(!tx[0].labels.contains_key("link"));
    assert_eq!(m.find("gpu_nvlink_errors_total", &g0).len(), 4);
}

#[test]
fn memory_errors_remapped_rows_and_retired_pages() {
    let m = &basic().m;
    let g0 = [("uuid", GPU0)];
    assert_eq!(
        m.value(
            "gpu_ecc_errors_total",
            &[("uuid", GPU0), ("type", "corrected"), ("scope", "volatile")]
        ),
        3.0
    );
    assert_eq!(
        m.value(
            "gpu_ecc_errors_total",
            &[
                ("uuid", GPU0),
                ("type", "uncorrected"),
                ("scope", "aggregate")
            ]
        ),
        0.0
    );
    assert_eq!(
        m.value(
            "gpu_remapped_rows",
            &[("uuid", GPU0), ("cause", "correctable")]
        ),
        2.0
    );
    assert_eq!(m.value("gpu_remapped_rows_pending", &g0), 0.0);
    assert_eq!(
        m.value(
            "gpu_retired_pages",
            &[("uuid", GPU0), ("cause", "single_bit_ecc")]
        ),
        1.0
    );
}

#[test]
fn processes_report_memory_and_sm_utilization() {
    let Basic { exporter, m } = basic();
    let p = [("uuid", GPU0), ("pid", "1001")];
    assert_close(m, "gpu_process_memory_used_bytes", &p, 8000.0 * MIB);
    let sm = m.scrape_value_eventually(exporter, "gpu_process_sm_utilization_ratio", &p);
    assert!(close(sm, 0.75, 0.02), "process SM utilization {sm}");
}

/// Volta: no GPM, no fan or memory temperature — left out, not zero.
#[test]
fn unsupported_fields_are_left_out_not_zero() {
    let m = &basic().m;
    let g0 = [("uuid", GPU0)];
    let g1 = [("uuid", GPU1)];
    assert_close(m, "gpu_utilization_ratio", &g1, 0.20);
    assert!(
        m.get("gpu_sm_active_ratio", &g1).is_none(),
        "no GPM on Volta"
    );
    assert!(
        m.get("gpu_fan_speed_ratio", &g1).is_none(),
        "unsupported fan left out"
    );
    assert!(
        m.get("gpu_memory_temperature_celsius", &g1).is_none(),
        "unsupported field left out"
    );
    assert_close(m, "gpu_pcie_transmit_bytes_per_second", &g1, 1024000.0);
    assert!(
        m.get("gpu_fan_speed_ratio", &g0).is_none(),
        "unsupported fan left out"
    );
    // A supported fan that stands still is a real 0.
    assert_eq!(m.value("gpu_fan_speed_ratio", &[("uuid", GPU2)]), 0.0);
    // Fanless boards are not a failure: as on a real H200 the fan count is 0
    // and the fan speed is never asked for, so thermal stays healthy.
    assert_eq!(
        m.value(
            "gpuscale_exporter_collector_success",
            &[("collector", "thermal")]
        ),
        1.0
    );
    assert!(
        m.find(
            "gpuscale_exporter_nvml_errors_total",
            &[("function", "nvmlDeviceGetFanSpeed_v2")]
        )
        .is_empty(),
        "no fan errors counted"
    );
}

/// MIG instances with their own memory and GPM activity; processes by instance.
#[test]
fn mig_instances_have_memory_gpm_activity_and_processes() {
    let m = &basic().m;
    let a = [("uuid", GPU2), ("mig_uuid", MIG_A)];
    let mig = m.find("gpu_mig_info", &a);
    assert_eq!(mig.len(), 1);
    assert_eq!(mig[0].labels["profile"], "3g.40gb");
    assert_eq!(mig[0].labels["gpu_instance_id"], "1");
    assert_eq!(m.find("gpu_mig_info", &[("uuid", GPU2)]).len(), 2);
    assert_close(m, "gpu_mig_memory_total_bytes", &a, 40192.0 * MIB);
    assert_close(m, "gpu_mig_memory_used_bytes", &a, 20000.0 * MIB);
    assert_close(m, "gpu_mig_sm_active_ratio", &a, 0.60);
    assert_close(
        m,
        "gpu_process_memory_used_bytes",
        &[("uuid", GPU2), ("pid", "2001"), ("mig_uuid", MIG_A)],
        19000.0 * MIB,
    );
}

#[test]
fn self_metrics_report_nvml_gpus_and_collectors() {
    let m = &basic().m;
    assert_eq!(m.value("gpuscale_exporter_nvml_up", &[]), 1.0);
    assert_eq!(m.value("gpuscale_exporter_gpus", &[]), 3.0);
    assert_eq!(
        m.value(
            "gpuscale_exporter_gpu_state",
            &[("uuid", GPU1), ("state", "ok")]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            "gpuscale_exporter_collector_success",
            &[("collector", "memory")]
        ),
        1.0
    );
    assert!(m.value("gpuscale_exporter_last_collection_timestamp_seconds", &[]) > 1.7e9);
    assert!(m.has("gpuscale_exporter_collector_duration_seconds"));
    assert_eq!(m.find("gpuscale_exporter_build_info", &[]).len(), 1);
}

#[test]
fn every_family_has_help_and_type_and_strict_parsers_accept_both() {
    let Basic { exporter, m } = basic();
    // Every family has HELP and TYPE; promtool and the strict OpenMetrics
    // parser accept both expositions (MIG and per-process series included).
    for (name, (kind, help)) in &m.families {
        assert!(
            !kind.is_empty() && !help.is_empty(),
            "{name} lacks TYPE or HELP"
        );
    }
    exporter.assert_strict_expositions();
}

trait Eventually {
    fn scrape_value_eventually(&self, e: &Exporter, name: &str, labels: &[(&str, &str)]) -> f64;
}

impl Eventually for Metrics {
    /// Per-process utilization needs NVML samples since the previous read.
    fn scrape_value_eventually(&self, e: &Exporter, name: &str, labels: &[(&str, &str)]) -> f64 {
        if let Some(v) = self.get(name, labels) {
            return v;
        }
        e.scrape_until(name, |m| m.get(name, labels).is_some())
            .value(name, labels)
    }
}

/// A bare HTTP/1.1 GET; returns the response head and the raw body bytes.
fn raw_get(port: u16, path: &str, extra_headers: &str) -> (String, Vec<u8>) {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra_headers}Connection: close\r\n\r\n"
    )
    .expect("send");
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read");
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head");
    (
        String::from_utf8_lossy(&all[..split]).to_string(),
        all[split + 4..].to_vec(),
    )
}

fn content_type(resp: &ureq::http::Response<ureq::Body>) -> String {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

#[test]
fn openmetrics_and_gzip_are_negotiated_from_the_request_headers() {
    let exporter = Exporter::simulate(
        &scenario("exporter-basic.yaml"),
        &["--collectors", "memory,power"],
    );
    let prometheus_accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let mut resp = ureq::get(&exporter.url("/metrics"))
        .header("Accept", prometheus_accept)
        .call()
        .expect("scrape");
    let ct = content_type(&resp);
    assert!(
        ct.starts_with("application/openmetrics-text; version=1.0.0"),
        "{ct}"
    );
    let body = resp.body_mut().read_to_string().expect("body");
    assert!(body.ends_with("# EOF\n"));
    assert!(body.contains("# TYPE gpu_energy_consumed_joules counter\n"));
    assert!(body.contains("gpu_energy_consumed_joules_total{"));

    let mut resp = ureq::get(&exporter.url("/metrics")).call().expect("scrape");
    let ct = content_type(&resp);
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    assert!(
        !resp
            .body_mut()
            .read_to_string()
            .expect("body")
            .contains("# EOF")
    );

    // gzip when asked: a raw HTTP/1.1 request, so nothing decodes it for us.
    let (head, raw) = raw_get(exporter.port, "/metrics", "Accept-Encoding: gzip\r\n");
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(&raw[..])
        .read_to_string(&mut text)
        .expect("valid gzip");
    assert!(text.contains("gpu_power_usage_watts{"));
    // Only the selected collectors ran.
    assert!(!text.contains("gpu_utilization_ratio"));

    assert_eq!(exporter.status("/"), 200);
    assert_eq!(exporter.status("/healthz"), 200);
    assert_eq!(exporter.status("/readyz"), 200);
    assert_eq!(exporter.status("/nope"), 404);
}

#[test]
fn a_gpu_lost_mid_run_drops_its_series_and_the_others_keep_flowing() {
    let a = "GPU-00000000-0000-4000-8000-00000000aaaa";
    let b = "GPU-00000000-0000-4000-8000-00000000bbbb";
    let exporter = Exporter::simulate(&scenario("exporter-lost.yaml"), &[]);
    // XID 94 at 0.5 s is counted with its last-seen time, before the GPU goes.
    let m = exporter.scrape_until("XID 94", |m| {
        m.get("gpu_xid_errors_total", &[("uuid", b), ("xid", "94")])
            .is_some()
    });
    assert!(
        m.value(
            "gpu_xid_last_seen_timestamp_seconds",
            &[("uuid", b), ("xid", "94")]
        ) > 1.7e9
    );

    // XID 79 comes as the GPU falls off the bus (its UUID no longer
    // answers): it is recorded under the GPU's UUID, and the lost GPU keeps
    // its XID series (with gpu and uuid) while its other series go.
    let m = exporter.scrape_until("GPU b lost with its XID 79", |m| {
        m.get(
            "gpuscale_exporter_gpu_state",
            &[("uuid", b), ("state", "lost")],
        ) == Some(1.0)
            && m.get("gpu_xid_errors_total", &[("uuid", b), ("xid", "79")]) == Some(1.0)
    });
    for xid in ["79", "94"] {
        let l = &[
            ("uuid", b),
            ("gpu", "1"),
            ("node", "test-node"),
            ("xid", xid),
        ];
        assert_eq!(m.value("gpu_xid_errors_total", l), 1.0, "XID {xid}");
        assert!(m.value("gpu_xid_last_seen_timestamp_seconds", l) > 1.7e9);
    }
    assert!(
        m.find("gpu_xid_errors_total", &[])
            .iter()
            .all(|s| s.labels.contains_key("uuid")),
        "no XID without a UUID"
    );
    // The exporter's own series name the node.
    for name in [
        "gpuscale_exporter_nvml_up",
        "gpuscale_exporter_last_collection_timestamp_seconds",
    ] {
        assert_eq!(m.find(name, &[("node", "test-node")]).len(), 1, "{name}");
    }
    assert!(
        m.find("gpu_utilization_ratio", &[("uuid", b)]).is_empty(),
        "lost GPU's series disappear"
    );
    assert!(m.find("gpu_power_usage_watts", &[("uuid", b)]).is_empty());
    assert_eq!(
        m.value(
            "gpuscale_exporter_gpu_state",
            &[("uuid", b), ("state", "ok")]
        ),
        0.0
    );
    assert_close(&m, "gpu_utilization_ratio", &[("uuid", a)], 0.10);
    assert_eq!(
        m.value(
            "gpuscale_exporter_gpu_state",
            &[("uuid", a), ("state", "ok")]
        ),
        1.0
    );
    assert_eq!(m.value("gpuscale_exporter_gpus", &[]), 2.0);
    assert_eq!(exporter.status("/readyz"), 200);
}

#[test]
fn without_nvml_it_serves_self_metrics_and_is_not_ready() {
    let exporter = Exporter::spawn(&["--nvml-lib", "/nonexistent/libnvidia-ml.so.1"]);
    let m = exporter.scrape_until("a published snapshot", |m| {
        m.has("gpuscale_exporter_nvml_up")
    });
    assert_eq!(m.value("gpuscale_exporter_nvml_up", &[]), 0.0);
    assert!(!m.has("gpu_info"));
    assert_eq!(exporter.status("/readyz"), 503);
    assert_eq!(exporter.status("/healthz"), 200);
    let log = exporter.log();
    assert!(
        log.contains("cannot load the NVML library"),
        "log names the cause:\n{log}"
    );
    // SIGTERM stops it cleanly.
    assert_eq!(exporter.terminate(), Some(0));
}

#[test]
fn a_malformed_scenario_is_rejected_with_file_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "node: n\ngpus:\n  - model: X\n    uuid: GPU-1\n    load:\n      power_watts: hot\n",
    )
    .expect("write");
    let out = Command::new(bins::exporter())
        .args(["--simulate", path.to_str().expect("utf-8")])
        .output()
        .expect("run exporter");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml:6:"), "names file and line: {err}");
    assert!(
        err.contains("gpus[0].load.power_watts"),
        "names the field: {err}"
    );
}

#[test]
fn bad_flags_exit_with_code_2_and_say_why() {
    for (args, says) in [
        (vec!["--collect-interval", "10ms"], "between 100ms and 1h"),
        // A leading '-' is a value here, so the message names the flag.
        (vec!["--collect-interval", "-5s"], "--collect-interval"),
        (vec!["--collectors", "memory,bogus"], "bogus"),
        (vec!["--listen", "nowhere"], "--listen"),
        (vec!["--log-format", "xml"], "xml"),
        (vec!["--compat", "dcgm-exporter"], "--compat"),
        (vec!["--compat-hostname-label", "host"], "Hostname"),
        (
            vec!["--web-config-file", "/nonexistent/web.yml"],
            "cannot read",
        ),
        (vec!["--max-connections", "0"], "--max-connections"),
        (vec!["--read-header-timeout", "1d"], "--read-header-timeout"),
    ] {
        let out = Command::new(bins::exporter())
            .args(&args)
            .output()
            .expect("run exporter");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn the_built_in_default_scenario_is_an_eight_gpu_node() {
    let exporter = Exporter::spawn(&["--simulate", "--collect-interval", "200ms"]);
    exporter.wait_ready();
    let m = exporter.scrape_until("8 GPUs", |m| m.find("gpu_info", &[]).len() == 8);
    assert_eq!(m.value("gpuscale_exporter_gpus", &[]), 8.0);
    assert!(m.find("gpu_mig_info", &[]).len() >= 3);
    // The thermally throttled GPU shows thermal slowdown.
    assert!(
        m.find("gpu_clock_event_active", &[("reason", "sw_thermal")])
            .iter()
            .any(|s| s.value == 1.0)
    );
    exporter.assert_strict_expositions();
}

#[test]
fn web_config_enables_tls_and_basic_auth_in_the_exporter_toolkit_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    std::fs::write(dir.path().join("tls.crt"), cert.cert.pem()).expect("write cert");
    std::fs::write(dir.path().join("tls.key"), cert.signing_key.serialize_pem())
        .expect("write key");
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n  prometheus: {hash}\n"),
    )
    .expect("write web config");
    let exporter = Exporter::spawn_with_probe(
        &[
            "--simulate",
            "--collect-interval",
            "200ms",
            "--web-config-file",
            web.to_str().expect("utf-8"),
        ],
        false,
    );
    let curl_path = |path: &str, extra: &[&str]| {
        let url = format!("https://localhost:{}{path}", exporter.port);
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--resolve"])
            .arg(format!("localhost:{}:127.0.0.1", exporter.port))
            .arg("--cacert")
            .arg(dir.path().join("tls.crt"))
            .args(extra)
            .arg(&url)
            .output()
            .expect("curl (Debian package curl) must be installed");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let curl = |extra: &[&str]| curl_path("/metrics", extra);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while curl(&["-u", "prometheus:s3cret"]) != "200" {
        assert!(
            std::time::Instant::now() < deadline,
            "TLS scrape never succeeded; log:\n{}",
            exporter.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(curl(&[]), "401", "no credentials");
    assert_eq!(curl(&["-u", "prometheus:wrong"]), "401", "wrong password");
    // The kubelet's probes carry no credentials: health endpoints stay open.
    assert_eq!(curl_path("/healthz", &[]), "200", "liveness probe");
    assert_eq!(curl_path("/readyz", &[]), "200", "readiness probe");
    assert_eq!(curl_path("/", &[]), "401", "only the probes are open");
    // Plain HTTP is not served on a TLS port.
    assert!(ureq::get(&exporter.url("/metrics")).call().is_err());
}

#[test]
fn a_web_config_with_unknown_keys_or_no_users_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let web = dir.path().join("web.yml");
    for (text, says) in [
        (
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  cert_fil: typo\n",
            "cert_fil",
        ),
        // An empty map must not silently turn authentication off.
        ("basic_auth_users: {}\n", "basic_auth_users is empty"),
    ] {
        std::fs::write(&web, text).expect("write");
        let out = Command::new(bins::exporter())
            .args([
                "--simulate",
                "--web-config-file",
                web.to_str().expect("utf-8"),
            ])
            .output()
            .expect("run exporter");
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("web.yml") && err.contains(says), "{err}");
    }
}

#[test]
fn nvlink_per_link_series_on_request() {
    let exporter = Exporter::simulate(
        &scenario("exporter-basic.yaml"),
        &["--collectors", "nvlink", "--nvlink-per-link"],
    );
    let m = exporter.scrape();
    let links: Vec<_> = m
        .find("gpu_nvlink_transmit_bytes_total", &[("uuid", GPU0)])
        .iter()
        .map(|s| s.labels["link"].clone())
        .collect();
    assert_eq!(links, ["0", "1"]);
    assert_eq!(
        m.find("gpu_nvlink_errors_total", &[("uuid", GPU0), ("link", "1")])
            .len(),
        4
    );
    // The counters grow at the scenario's rate (1e9 B/s per link): sample twice.
    let first = m.value(
        "gpu_nvlink_receive_bytes_total",
        &[("uuid", GPU0), ("link", "1")],
    );
    let m = exporter.scrape_until("NVLink traffic", |m| {
        m.get(
            "gpu_nvlink_receive_bytes_total",
            &[("uuid", GPU0), ("link", "1")],
        )
        .is_some_and(|v| v > first)
    });
    assert!(
        m.value(
            "gpu_nvlink_receive_bytes_total",
            &[("uuid", GPU0), ("link", "1")]
        ) > first
    );
}

/// The DaemonSet in deploy/exporter starts the binary with flags it accepts.
#[test]
fn the_deployed_daemonset_args_are_accepted() {
    let text = std::fs::read_to_string(bins::repo_root().join("deploy/exporter/daemonset.yaml"))
        .expect("daemonset.yaml");
    let ds: yaml_serde::Value = yaml_serde::from_str(&text).expect("valid YAML");
    let container = &ds["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["command"][0].as_str(),
        Some("/usr/local/bin/gpuscale-exporter")
    );
    let args: Vec<String> = container["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect();
    assert!(!args.is_empty());
    // Same flags, on the simulated node instead of a real GPU.
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.push("--simulate");
    let exporter = Exporter::spawn(&all);
    exporter.wait_ready();
    assert!(exporter.scrape().has("gpu_info"));
    let port = container["ports"][0]["containerPort"].as_u64();
    assert_eq!(port, Some(9400), "the port the probes and the Service use");
}
