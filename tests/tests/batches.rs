//! The poll cache re-reads its keys in batches against a real Prometheus:
//! every key still reads what it would read alone (values that change, a
//! scalar, a selector whose query fails), and Prometheus sees a few
//! requests per round instead of one per key.

use gpuscale_e2e::adapter::batch::{CONFIG, NS, SERVERS, exposition};
use gpuscale_e2e::adapter::client::{Adapter, Identity};
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::adapter::series::Series;

/// (HTTP status, summed value) of one external metric read.
fn read(adapter: &Adapter, metric: &str, selector: &str) -> (u16, Option<f64>) {
    let path = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/{metric}?labelSelector={}",
        gpuscale_e2e::adapter::prom::encode(selector)
    );
    let (code, json) = adapter.curl_as(&Identity::default(), &path, &[]);
    let sum = json["items"].as_array().map(|items| {
        items
            .iter()
            .filter_map(|i| i["value"].as_str())
            .map(quantity)
            .sum()
    });
    (code, sum)
}

/// A Kubernetes quantity as the adapter writes it ("12", "1500m").
fn quantity(q: &str) -> f64 {
    match q.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().unwrap_or(f64::NAN) / 1000.0,
        None => q.parse().unwrap_or(f64::NAN),
    }
}

/// The sum of the samples in `text` whose line starts with `prefix` and
/// contains `having`.
fn sum_of(text: &str, prefix: &str, having: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(having))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Query requests Prometheus has served, by its own counter.
fn prometheus_queries(prom: &Prometheus) -> f64 {
    let (_, text) = gpuscale_e2e::adapter::procs::get(&format!("{}/metrics", prom.url))
        .expect("Prometheus /metrics");
    sum_of(
        &text,
        "prometheus_http_requests_total{",
        "handler=\"/api/v1/query\"",
    )
}

/// Re-reads of keys the adapter counts (one per key, batched or not).
fn key_reads(adapter: &Adapter) -> f64 {
    sum_of(
        &adapter.self_metrics(),
        "gpuscale_adapter_prometheus_queries_total{",
        "",
    )
}

#[test]
fn batched_re_reads_give_each_key_its_own_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (series, port) = Series::serve(&exposition(1));
    let prom = Prometheus::start(port);
    let cfg = gpuscale_e2e::write_file(dir.path(), "metrics.yaml", CONFIG);
    let adapter = Adapter::start(
        &[
            "--dev".into(),
            format!("--config={}", cfg.display()),
            format!("--prometheus-url={}", prom.url),
            "--poll-interval=1s".into(),
        ],
        dir.path().join("adapter.log"),
    );
    eventually("the servers' queues in Prometheus", || {
        (read(&adapter, "queue_depth", "pod=s1-0") == (200, Some(1.0))).then_some(())
    });
    // Every key's first read (alone), then the scrapes change every value.
    for i in 0..SERVERS {
        assert_eq!(
            read(&adapter, "queue_depth", &format!("pod=s{i}-0")),
            (200, Some(i as f64))
        );
    }
    assert_eq!(read(&adapter, "queue_scalar", "pod=s2-0"), (200, Some(2.0)));
    assert_eq!(read(&adapter, "queue_paired", "pod=s3-0"), (200, Some(6.0)));
    assert_eq!(read(&adapter, "queue_paired", "pod=twin-0").0, 503);
    series.set(&exposition(10));

    // The batched re-reads bring every key its own new value.
    eventually("every key re-read with the new values", || {
        let all = (0..SERVERS).all(|i| {
            read(&adapter, "queue_depth", &format!("pod=s{i}-0")) == (200, Some((i * 10) as f64))
        });
        let others = read(&adapter, "queue_scalar", "pod=s2-0") == (200, Some(20.0))
            && read(&adapter, "queue_paired", "pod=s3-0") == (200, Some(60.0));
        (all && others).then_some(())
    });
    // The failing key stays failed: its error is its own.
    let (code, _) = read(&adapter, "queue_paired", "pod=twin-0");
    assert_eq!(code, 503);

    // A few requests per round: 30 keys share one, the scalar and the
    // failing key go alone (3 per round, not 33).
    let (q0, k0) = (prometheus_queries(&prom), key_reads(&adapter));
    eventually("five more rounds of re-reads", || {
        (key_reads(&adapter) - k0 >= 5.0 * 33.0).then_some(())
    });
    let (q1, k1) = (prometheus_queries(&prom), key_reads(&adapter));
    let ratio = (q1 - q0) / (k1 - k0);
    assert!(
        ratio < 0.2,
        "{} Prometheus requests for {} key reads",
        q1 - q0,
        k1 - k0
    );
}
