//! What the self-metrics cost: recording one API request (on every request
//! of the ~20k/s the adapter answers) and one scrape of a full poll cache.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use gpuscale_adapter::selfmetrics::{CacheReport, KeyValue, SelfMetrics};
use http::StatusCode;

fn request(c: &mut Criterion) {
    let m = SelfMetrics::default();
    let took = Duration::from_micros(120);
    c.bench_function("request", |b| {
        b.iter(|| m.request(black_box("external"), black_box("queue_depth"), 200, took));
    });
    c.bench_function("request_timer", |b| {
        b.iter(|| {
            let t = m.request_timer("external", black_box("queue_depth").to_string());
            t.done(StatusCode::OK);
        });
    });
}

/// 1,000 keys: the default `--max-cached-queries` is larger, but 1,000 is
/// what bench/adapter-load.sh asks for.
fn scrape(c: &mut Criterion) {
    let m = SelfMetrics::default();
    m.serving(&["queue_depth"]);
    let values = (0..1000)
        .map(|i| KeyValue {
            metric: "queue_depth".into(),
            namespace: format!("ns-{}", i % 10),
            selector: format!("workload=w{i}"),
            query: format!("sum(q{{workload=\"w{i}\"}})"),
            value: f64::from(i),
        })
        .collect();
    let cache = CacheReport {
        values,
        keys: 1000,
        max_keys: 10_000,
        poll_interval_secs: 5.0,
        ..CacheReport::default()
    };
    c.bench_function("scrape_1000_keys", |b| {
        b.iter(|| m.render(black_box(&cache)))
    });
}

criterion_group!(benches, request, scrape);
criterion_main!(benches);
