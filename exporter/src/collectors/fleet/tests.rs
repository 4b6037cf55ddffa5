use std::sync::Arc;

use super::*;
use crate::metrics::{DeviceRef, Labels, ProcRef};

fn gpu(index: u32) -> Arc<DeviceRef> {
    Arc::new(DeviceRef::new(index, format!("GPU-{index}").into()))
}

fn family(name: &'static str, samples: Vec<(Subject, Labels, f64)>) -> Family {
    let mut f = Family::gauge(name, "");
    for (subject, labels, value) in samples {
        f.push(subject, labels, value);
    }
    f
}

fn per_gpu(name: &'static str, values: &[f64]) -> Family {
    let samples = values
        .iter()
        .enumerate()
        .map(|(i, v)| (Subject::Device(gpu(i as u32)), vec![], *v))
        .collect();
    family(name, samples)
}

fn served(families: &[Family], name: &str) -> Vec<(Option<u32>, f64)> {
    families
        .iter()
        .filter(|f| f.name == name)
        .flat_map(|f| &f.samples)
        .map(|s| {
            let index = match &s.subject {
                Subject::Device(d) => Some(d.index),
                Subject::Process(p) => Some(p.pid),
                _ => None,
            };
            (index, s.value)
        })
        .collect()
}

#[test]
fn detail_families_are_left_out_and_the_rest_passes() {
    let families = vec![
        per_gpu("gpu_encoder_utilization_ratio", &[0.1]),
        per_gpu("gpu_utilization_ratio", &[0.5]),
    ];
    let out = serve(&families);
    let names: Vec<&str> = out.iter().map(|f| f.name).collect();
    assert_eq!(names, ["gpu_utilization_ratio"]);
}

#[test]
fn a_threshold_is_served_while_its_temperature_is_near() {
    // GPU 0 at 50 °C, GPU 1 at 80 °C: slowdown at 87 is near for GPU 1 only.
    let slowdown = |i| {
        (
            Subject::Device(gpu(i)),
            vec![("threshold", "slowdown".to_string())],
            87.0,
        )
    };
    let families = vec![
        per_gpu("gpu_temperature_celsius", &[50.0, 80.0]),
        family(THRESHOLD, vec![slowdown(0), slowdown(1)]),
    ];
    let out = serve(&families);
    assert_eq!(served(&out, THRESHOLD), [(Some(1), 87.0)]);
}

#[test]
fn the_memory_temperature_is_served_near_its_limit_only() {
    let memory_max = |i| {
        (
            Subject::Device(gpu(i)),
            vec![("threshold", "memory_max".to_string())],
            95.0,
        )
    };
    let families = vec![
        per_gpu(MEMORY_TEMPERATURE, &[60.0, 90.0, 70.0]),
        family(THRESHOLD, vec![memory_max(0), memory_max(1)]),
    ];
    let out = serve(&families);
    // GPU 2 has no threshold read: its temperature is served.
    assert_eq!(
        served(&out, MEMORY_TEMPERATURE),
        [(Some(1), 90.0), (Some(2), 70.0)]
    );
}

#[test]
fn power_limits_are_served_while_the_limit_is_lowered() {
    // GPU 0 at its default, GPU 1 lowered to 500 W; both with GPM.
    let families = vec![
        per_gpu(ACTIVITY, &[0.5, 0.5]),
        per_gpu(LIMIT, &[700.0, 500.0]),
        per_gpu(DEFAULT_LIMIT, &[700.0, 700.0]),
    ];
    let out = serve(&families);
    assert_eq!(served(&out, LIMIT), [(Some(1), 500.0)]);
    assert_eq!(served(&out, DEFAULT_LIMIT), [(Some(1), 700.0)]);
    // No default read: the enforced limit is what the alert compares.
    let out = serve(&[per_gpu(ACTIVITY, &[0.5]), per_gpu(LIMIT, &[700.0])]);
    assert_eq!(served(&out, LIMIT), [(Some(0), 700.0)]);
}

#[test]
fn clocks_are_served_below_their_maximum_only() {
    let info = |i| {
        (
            Subject::Device(gpu(i)),
            vec![
                ("max_sm_hertz", "1980000000".to_string()),
                ("max_memory_hertz", "2619000000".to_string()),
            ],
            1.0,
        )
    };
    let clock = |i, clock: &str, hz| {
        (
            Subject::Device(gpu(i)),
            vec![("clock", clock.to_string())],
            hz,
        )
    };
    let families = vec![
        family("gpu_info", vec![info(0), info(1)]),
        family(
            CLOCK,
            vec![
                clock(0, "sm", 1.98e9),
                clock(0, "memory", 2.619e9),
                clock(1, "sm", 3.45e8),
                clock(1, "memory", 1.5e9),
                clock(1, "video", 1.5e9),
            ],
        ),
    ];
    let out = serve(&families);
    assert_eq!(served(&out, CLOCK), [(Some(1), 3.45e8), (Some(1), 1.5e9)]);
}

#[test]
fn process_series_only_where_processes_share_a_gpu_or_have_no_pod() {
    let process = |gpu_index, pid| {
        Subject::Process(Arc::new(ProcRef {
            gpu: gpu(gpu_index),
            mig_uuid: None,
            pid,
        }))
    };
    // GPU 0 runs pid 1 alone, GPU 1 pids 2 and 3, GPU 2 pid 4 without a pod.
    let memory = family(
        "gpu_process_memory_used_bytes",
        [(0, 1), (1, 2), (1, 3), (2, 4)]
            .into_iter()
            .map(|(g, pid)| (process(g, pid), vec![], 1.0))
            .collect(),
    );
    let orphan = family(
        "gpu_process_unattributed",
        vec![(process(2, 4), vec![("reason", "pod_unknown".into())], 1.0)],
    );
    let out = serve(&[memory, orphan]);
    let pids: Vec<_> = served(&out, "gpu_process_memory_used_bytes")
        .into_iter()
        .filter_map(|(pid, _)| pid)
        .collect();
    assert_eq!(pids, [2, 3, 4]);
    assert_eq!(served(&out, "gpu_process_unattributed").len(), 1);
}

#[test]
fn every_family_named_exists() {
    let names: Vec<&str> = crate::catalog::native().iter().map(|d| d.name).collect();
    for name in LEFT_OUT.iter().chain(NON_ZERO).chain(PROXIES) {
        assert!(names.contains(name), "fleet names unknown family {name}");
    }
}

#[test]
fn nvml_proxies_and_limits_are_served_for_gpus_without_activity_ratios() {
    // GPU 0 has GPM, GPU 1 has not: its proxies and limits are served.
    let families = vec![
        per_gpu(ACTIVITY, &[0.5]),
        per_gpu("gpu_memory_utilization_ratio", &[0.3, 0.4]),
        per_gpu("gpu_pcie_transmit_bytes_per_second", &[1e9, 2e9]),
        per_gpu(LIMIT, &[700.0, 300.0]),
        per_gpu(DEFAULT_LIMIT, &[700.0, 300.0]),
    ];
    let out = serve(&families);
    assert_eq!(
        served(&out, "gpu_memory_utilization_ratio"),
        [(Some(1), 0.4)]
    );
    assert_eq!(
        served(&out, "gpu_pcie_transmit_bytes_per_second"),
        [(Some(1), 2e9)]
    );
    assert_eq!(served(&out, LIMIT), [(Some(1), 300.0)]);
    assert_eq!(served(&out, DEFAULT_LIMIT), [(Some(1), 300.0)]);
}

#[test]
fn operations_md_names_every_family_the_fleet_profile_trims() {
    let doc = include_str!("../../../../docs/operations.md");
    let section = doc
        .split("### What the fleet profile leaves out")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .expect("docs/operations.md: What the fleet profile leaves out");
    let trimmed = crate::collectors::profile::FLEET.iter().map(|(n, _)| *n);
    let own = crate::selfmetrics::FLEET_LEFT_OUT.iter().map(|d| d.name);
    let all = LEFT_OUT.iter().chain(NON_ZERO).chain(PROXIES).copied();
    let served_while = [
        THRESHOLD,
        LIMIT,
        DEFAULT_LIMIT,
        CLOCK,
        MEMORY_TEMPERATURE,
        ACTIVITY_SOURCE,
    ];
    for name in all.chain(trimmed).chain(own).chain(served_while) {
        assert!(
            section.contains(&format!("`{name}`")),
            "docs/operations.md does not say what fleet does with {name}"
        );
    }
}
