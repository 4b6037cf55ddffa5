//! `tests/gpu/validate.sh` (the GPU validation script) proven on the NVML
//! simulator: the debug exporter on `tests/scenarios/gpu-validate.yaml`,
//! compared with `nvidia-smi-sim` reading the same scenario at the same clock.
//! The scenario turns GPU 0 busy at 8 s; the script times its idle and load
//! phases around that (`--sim-load-at 8`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuscale_e2e::bins;

/// The fields every report must compare for the loaded GPU, with their verdict.
const COMPARED: &[(&str, &str)] = &[
    ("index", "pass"),
    ("name", "pass"),
    ("uuid", "pass"),
    ("pci.bus_id", "pass"),
    ("driver_version", "pass"),
    ("serial", "pass"),
    ("memory.total", "pass"),
    ("memory.reserved", "pass"),
    ("memory.used", "pass"),
    ("memory.free", "pass"),
    ("temperature.gpu", "pass"),
    ("temperature.memory", "pass"),
    ("power.draw", "pass"),
    ("enforced.power.limit", "pass"),
    ("power.limit", "info"),
    ("clocks.sm", "pass"),
    ("clocks.mem", "pass"),
    ("clocks.gr", "pass"),
    ("utilization.gpu", "pass"),
    ("utilization.memory", "pass"),
    ("pstate", "pass"),
];

const MOVES: &[&str] = &[
    "utilization moves",
    "power moves",
    "SM clock moves (Hz)",
    "energy counter increases (J)",
    "energy rate vs mean power (W)",
    "GPM sm_active moves",
    "GPM tensor_active moves",
    "GPM dram_active moves",
    "load process 4242 memory (MiB)",
];

const GPU0: &str = "0 GPU-0a0b0c0d…";

struct Validation {
    output: Output,
    report: String,
    _dir: tempfile::TempDir,
}

/// Runs the script in simulator mode with short phases; `smi_offset` is passed
/// to nvidia-smi-sim as `NVIDIA_SMI_SIM_OFFSET` (fault injection).
fn validate(smi_offset: Option<&str>) -> Validation {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("report.md");
    let root = bins::repo_root();
    let exporter = bins::exporter();
    let sim_lib = bins::simulator_lib();
    let smi = bins::target_dir().join("nvidia-smi-sim");
    assert!(
        smi.exists(),
        "nvidia-smi-sim was not built at {}",
        smi.display()
    );
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("tests/gpu/validate.sh"))
        .arg("--exporter")
        .arg(&exporter)
        .arg("--simulate")
        .arg(root.join("tests/scenarios/gpu-validate.yaml"))
        .arg("--simulator-lib")
        .arg(&sim_lib)
        .arg("--nvidia-smi")
        .arg(&smi)
        .args([
            "--sim-load-at",
            "8",
            "--expect-pid",
            "4242",
            "--interval",
            "250ms",
            "--idle-seconds",
            "0.5",
            "--load-seconds",
            "4",
            "--settle-seconds",
            "1",
            "--max-seconds",
            "120",
        ])
        .arg("--report")
        .arg(&report)
        .current_dir(dir.path())
        .env_remove("GPUSCALE_SIM_SCENARIO")
        .env_remove("GPUSCALE_SIM_EPOCH")
        .env_remove("NVIDIA_SMI_SIM_OFFSET");
    if let Some(off) = smi_offset {
        cmd.env("NVIDIA_SMI_SIM_OFFSET", off);
    }
    let output = cmd.output().expect("run tests/gpu/validate.sh");
    let report = read(&report, &output);
    Validation {
        output,
        report,
        _dir: dir,
    }
}

fn read(path: &Path, output: &Output) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "no report at {}: {e}\nstdout:\n{}\nstderr:\n{}",
            path.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Table rows of `section` (a `## ` heading prefix), split into cells.
fn rows<'a>(report: &'a str, section: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in report.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h.starts_with(section);
            continue;
        }
        if inside && line.starts_with("| ") && !line.starts_with("| GPU |") {
            out.push(line.trim_matches('|').split(" | ").map(str::trim).collect());
        }
    }
    out
}

/// The verdict of `field` on GPU 0 in `section`.
fn verdict<'a>(report: &'a str, section: &str, field: &str) -> Option<&'a str> {
    rows(report, section)
        .into_iter()
        .find(|r| r.len() >= 6 && r[0] == GPU0 && r[1] == field)
        .map(|r| r[5])
}

fn context(v: &Validation) -> String {
    format!(
        "exit {:?}\nstderr:\n{}\nreport:\n{}",
        v.output.status.code(),
        String::from_utf8_lossy(&v.output.stderr),
        v.report
    )
}

#[test]
fn script_passes_against_the_simulator_with_a_row_per_field() {
    let v = validate(None);
    assert_eq!(v.output.status.code(), Some(0), "{}", context(&v));
    assert!(v.report.contains("- Result: **PASS**"), "{}", context(&v));
    assert!(
        v.report.contains("- GPU(s): NVIDIA H200"),
        "{}",
        context(&v)
    );
    assert!(
        v.report.contains("- Driver: 580.95.05, CUDA 13.0"),
        "{}",
        context(&v)
    );
    for section in ["Idle", "Under load"] {
        for (field, want) in COMPARED {
            assert_eq!(
                verdict(&v.report, section, field),
                Some(*want),
                "{section}: {field}\n{}",
                context(&v)
            );
        }
    }
    // GPU 1 lacks a fan, a memory temperature and a serial: n/a on both sides.
    let idle = rows(&v.report, "Idle");
    for field in ["fan.speed", "temperature.memory", "serial"] {
        let row = idle
            .iter()
            .find(|r| r[0].starts_with("1 ") && r[1] == field)
            .unwrap_or_else(|| panic!("GPU 1 {field} row\n{}", context(&v)));
        assert_eq!(row[5], "n/a", "{}", context(&v));
    }
    // nvidia-smi-sim lacks power.draw.average/instant: the per-field probe skips them.
    assert!(
        v.report
            .contains("nvidia-smi does not know the field `power.draw.average`: not compared."),
        "{}",
        context(&v)
    );
    // The process list matches nvidia-smi's compute apps in both phases.
    for section in ["Idle", "Under load"] {
        assert!(
            rows(&v.report, section)
                .iter()
                .any(|r| r[1] == "process 4242 memory" && r[5] == "pass"),
            "{section}: process row\n{}",
            context(&v)
        );
    }
    for check in MOVES {
        assert_eq!(
            verdict(&v.report, "Load phase", check),
            Some("pass"),
            "{check}\n{}",
            context(&v)
        );
    }
    // Cost and memory are measured, and the exporter stops cleanly.
    let cost = v
        .report
        .lines()
        .filter(|l| {
            l.starts_with("| collection duration, mean") || l.starts_with("| RSS at the end")
        })
        .collect::<Vec<_>>();
    assert_eq!(cost.len(), 2, "{}", context(&v));
    for l in cost {
        assert!(!l.contains("| — |"), "unmeasured: {l}\n{}", context(&v));
    }
    assert_eq!(
        verdict_any(&v.report, "Run", "exporter exits 0 on SIGTERM"),
        Some("pass".to_string()),
        "{}",
        context(&v)
    );
}

fn verdict_any(report: &str, section: &str, field: &str) -> Option<String> {
    rows(report, section)
        .into_iter()
        .find(|r| r.len() >= 6 && r[1] == field)
        .map(|r| r[5].to_string())
}

#[test]
fn script_fails_and_marks_the_field_when_nvidia_smi_disagrees() {
    let v = validate(Some("power.draw=50"));
    assert_eq!(v.output.status.code(), Some(1), "{}", context(&v));
    assert!(v.report.contains("- Result: **FAIL**"), "{}", context(&v));
    for section in ["Idle", "Under load"] {
        assert_eq!(
            verdict(&v.report, section, "power.draw"),
            Some("**FAIL**"),
            "{section}\n{}",
            context(&v)
        );
        // Only the skewed field fails.
        assert_eq!(
            verdict(&v.report, section, "temperature.gpu"),
            Some("pass"),
            "{section}\n{}",
            context(&v)
        );
    }
    let stderr = String::from_utf8_lossy(&v.output.stderr);
    assert!(
        stderr.contains("FAIL [idle] 0 GPU-0a0b0c0d… power.draw"),
        "{}",
        context(&v)
    );
}

#[test]
fn nvidia_smi_sim_prints_the_real_tools_csv() {
    let smi: PathBuf = {
        bins::ensure_built();
        bins::target_dir().join("nvidia-smi-sim")
    };
    let scenario = bins::repo_root().join("tests/scenarios/gpu-validate.yaml");
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let run = |args: &[&str], offset: Option<&str>| {
        let mut c = Command::new(&smi);
        c.args(args)
            .env("GPUSCALE_SIM_SCENARIO", &scenario)
            .env("GPUSCALE_SIM_EPOCH", format!("{epoch}"))
            .env_remove("NVIDIA_SMI_SIM_OFFSET");
        if let Some(o) = offset {
            c.env("NVIDIA_SMI_SIM_OFFSET", o);
        }
        c.output().expect("run nvidia-smi-sim")
    };
    let q = "--query-gpu=index,uuid,pci.bus_id,driver_version,memory.total,memory.used,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,utilization.gpu,pstate";
    let out = run(&[q, "--format=csv,noheader,nounits"], None);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "0, GPU-0a0b0c0d-0000-4000-8000-000000000000, 00000000:18:00.0, 580.95.05, 143771, 1536, 31, 75.50, 700.00, 345, 3201, 0, P0"
    );
    assert_eq!(text.lines().count(), 2);

    // Header and units, as without noheader/nounits.
    let out = run(
        &[
            "--query-gpu=memory.used,power.draw,fan.speed",
            "--format=csv",
        ],
        Some("power.draw=50"),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "memory.used [MiB], power.draw [W], fan.speed [%]");
    assert_eq!(lines[1], "1536 MiB, 125.50 W, 0 %");
    assert_eq!(lines[2], "0 MiB, 124.20 W, [N/A]");

    // Compute apps.
    let out = run(
        &[
            "--query-compute-apps=pid,process_name,used_memory",
            "--format=csv,noheader,nounits",
        ],
        None,
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "4242, python3, 1536\n"
    );

    // Unknown fields are an error naming the field.
    let out = run(&["--query-gpu=index,bogus", "--format=csv"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Field \"bogus\" is not a valid field to query.")
    );
}
