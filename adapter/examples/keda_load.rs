//! Load tool for the KEDA external scaler (run by `bench/keda-load.sh`).
//!
//! `keda_load latency ADDR KEYS CLIENTS SECONDS [PAUSE_MS]`: warm KEYS keys, then
//! CLIENTS connections call GetMetrics and IsActive in turn on random keys;
//! prints p50/p99 per method.
//! `keda_load streams ADDR STREAMS SECONDS`: hold STREAMS StreamIsActive
//! streams (one key each, 100 per connection) open for SECONDS after each
//! has sent its first message.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use gpuscale_adapter::keda::proto::external_scaler_client::ExternalScalerClient;
use gpuscale_adapter::keda::proto::{GetMetricsRequest, ScaledObjectRef};
use tonic::transport::Channel;

type Err = Box<dyn std::error::Error + Send + Sync>;

fn key(k: usize) -> ScaledObjectRef {
    let meta: HashMap<String, String> = [
        ("metric", "bench_queue_depth".to_string()),
        ("labelSelector", format!("workload=w{}", k / 10)),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b))
    .collect();
    ScaledObjectRef {
        name: format!("so-{k}"),
        namespace: format!("bench-{}", k % 10),
        scaler_metadata: meta,
    }
}

async fn connect(addr: &str) -> Result<ExternalScalerClient<Channel>, Err> {
    let ch = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    Ok(ExternalScalerClient::new(ch))
}

fn pct(v: &mut [Duration], p: f64) -> Option<Duration> {
    v.sort_unstable();
    let last = v.len().checked_sub(1)?;
    Some(v[((v.len() as f64 * p) as usize).min(last)])
}

async fn latency(
    addr: &str,
    keys: usize,
    clients: usize,
    secs: u64,
    pause: Duration,
) -> Result<(), Err> {
    if secs == 0 {
        return Err("the duration must be at least 1 s".into());
    }
    let mut c = connect(addr).await?;
    for k in 0..keys {
        c.is_active(key(k)).await?;
    }
    let end = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for t in 0..clients {
        let mut c = connect(addr).await?;
        tasks.push(tokio::spawn(async move {
            let (mut gm, mut ia) = (Vec::new(), Vec::new());
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ t as u64;
            while Instant::now() < end {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = key(x as usize % keys);
                let s = Instant::now();
                c.get_metrics(GetMetricsRequest {
                    scaled_object_ref: Some(r.clone()),
                    metric_name: "bench_queue_depth".into(),
                })
                .await
                .unwrap();
                gm.push(s.elapsed());
                let s = Instant::now();
                c.is_active(r).await.unwrap();
                ia.push(s.elapsed());
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
            (gm, ia)
        }));
    }
    let (mut gm, mut ia) = (Vec::new(), Vec::new());
    for t in tasks {
        let (a, b) = t.await?;
        gm.extend(a);
        ia.extend(b);
    }
    let n = gm.len() + ia.len();
    println!(
        "keys={keys} clients={clients} calls={n} calls/s={:.0}",
        n as f64 / secs as f64
    );
    for (name, v) in [("GetMetrics", &mut gm), ("IsActive", &mut ia)] {
        println!("{name}: p50={:?} p99={:?}", pct(v, 0.50), pct(v, 0.99));
    }
    Ok(())
}

async fn streams(addr: &str, n: usize, secs: u64) -> Result<(), Err> {
    let mut open = Vec::new();
    let mut c = connect(addr).await?;
    for k in 0..n {
        if k % 100 == 0 {
            c = connect(addr).await?;
        }
        let mut s = c.stream_is_active(key(k)).await?.into_inner();
        s.message().await?;
        open.push(s);
    }
    println!("streams open: {}", open.len());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Err> {
    let a: Vec<String> = std::env::args().collect();
    let num = |i: usize| -> usize { a.get(i).and_then(|s| s.parse().ok()).unwrap_or(0) };
    match a.get(1).map(String::as_str) {
        Some("latency") => {
            let pause = Duration::from_millis(num(6) as u64);
            latency(&a[2], num(3), num(4), num(5) as u64, pause).await
        }
        Some("streams") => streams(&a[2], num(3), num(4) as u64).await,
        _ => Err(
            "usage: keda_load latency ADDR KEYS CLIENTS SECONDS [PAUSE_MS] | streams ADDR STREAMS SECONDS"
                .into(),
        ),
    }
}
