//! Encoding cost of one 8-GPU node's snapshot (done once per collection).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use gpuscale_exporter::metrics::dcgm::{self, Input, Options};
use gpuscale_exporter::metrics::encode::{self, Format, encode};
use gpuscale_exporter::metrics::{DeviceFacts, DeviceRef, Family, NoPods, Subject};
use gpuscale_exporter::snapshot::Snapshot;

/// About the shape of the built-in scenario: 8 GPUs, 18 NVLinks each.
fn node() -> Vec<Family> {
    let gpus: Vec<Subject> = (0..8)
        .map(|i| {
            let uuid = format!("GPU-{i:08x}-0000-4000-8000-000000000000");
            let mut gpu = DeviceRef::new(i, uuid.into());
            gpu.facts = DeviceFacts {
                model: Some("NVIDIA H100 80GB HBM3".into()),
                pci_bus_id: Some(format!("00000000:{i:02X}:00.0").into()),
                driver_version: Some("570.172.08".into()),
            };
            Subject::Device(Arc::new(gpu))
        })
        .collect();
    let mut fams = Vec::new();
    for name in [
        "gpu_utilization_ratio",
        "gpu_memory_utilization_ratio",
        "gpu_memory_used_bytes",
        "gpu_memory_total_bytes",
        "gpu_power_usage_watts",
        "gpu_temperature_celsius",
        "gpu_sm_active_ratio",
        "gpu_tensor_active_ratio",
    ] {
        let mut f = Family::gauge(
            name,
            "Help text of a typical length for a GPU metric family.",
        );
        for g in &gpus {
            f.push(g.clone(), vec![], 0.93);
        }
        fams.push(f);
    }
    let mut reasons = Family::gauge("gpu_clock_event_active", "Clock event reasons.");
    let mut links = Family::counter("gpu_nvlink_errors_total", "NVLink errors.");
    for g in &gpus {
        for r in [
            "gpu_idle",
            "sw_power_cap",
            "hw_slowdown",
            "sw_thermal",
            "hw_thermal",
            "hw_power_brake",
        ] {
            reasons.push(g.clone(), vec![("reason", r.to_string())], 0.0);
        }
        for l in 0..18 {
            for t in ["crc_flit", "crc_data", "replay", "recovery"] {
                links.push(
                    g.clone(),
                    vec![("link", l.to_string()), ("type", t.to_string())],
                    12.0,
                );
            }
        }
    }
    fams.extend([reasons, links]);
    fams
}

/// The node's GPUs, whose facts the dcgm families take their labels from.
fn devices(fams: &[Family]) -> Vec<Arc<DeviceRef>> {
    fams[0]
        .samples
        .iter()
        .filter_map(|s| match &s.subject {
            Subject::Device(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let fams = node();
    c.bench_function("encode_text_8_gpus", |b| {
        b.iter(|| encode(black_box(&fams), "node-1", &NoPods, Format::Text))
    });
    c.bench_function("encode_openmetrics_8_gpus", |b| {
        b.iter(|| encode(black_box(&fams), "node-1", &NoPods, Format::OpenMetrics))
    });
    // `--compat dcgm`: the native text plus dcgm-exporter's families.
    let devices = devices(&fams);
    let opts = Options {
        hostname_label: "Hostname",
        old_pod_labels: false,
    };
    c.bench_function("encode_text_8_gpus_compat_dcgm", |b| {
        b.iter(|| {
            let mut out = String::with_capacity(2 * encode::capacity(&fams));
            encode::write_families(&mut out, black_box(&fams), "node-1", &NoPods, Format::Text);
            let input = Input {
                families: &fams,
                devices: &devices,
                migs: &[],
                last_xids: None,
                node: "node-1",
                pods: &NoPods,
            };
            dcgm::write(&mut out, &input, &opts, Format::Text);
            encode::finish(out, Format::Text)
        })
    });
    let text = encode(&fams, "node-1", &NoPods, Format::Text);
    c.bench_function("gzip_text_8_gpus", |b| {
        b.iter(|| Snapshot::new(black_box(text.clone()), Vec::new(), true).body(Format::Text, true))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
