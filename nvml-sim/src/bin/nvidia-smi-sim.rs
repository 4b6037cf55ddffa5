//! A stand-in `nvidia-smi` for the simulator.
//!
//! Reads the same scenario as the NVML simulator (`GPUSCALE_SIM_SCENARIO`, the
//! built-in scenario when unset) at the same clock (`GPUSCALE_SIM_EPOCH`, Unix
//! seconds; scenario time 0 when unset), evaluates the curves at "now" and
//! prints what the real `nvidia-smi` prints for
//!
//! ```text
//! nvidia-smi --query-gpu=FIELD,... --format=csv[,noheader][,nounits]
//! nvidia-smi --query-compute-apps=FIELD,... --format=csv[,noheader][,nounits]
//! ```
//!
//! with the simulator's rounding (so both sides agree exactly on a correct
//! exporter). Unknown fields are an error (exit 2), like the real tool.
//!
//! Fault injection for tests of the validation script:
//! `NVIDIA_SMI_SIM_OFFSET="power.draw=50,temperature.gpu=3"` adds the given
//! amounts to those numeric fields.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use gpuscale_nvml_sim::scenario::{self, Feature, Gpu, Scenario};
use gpuscale_nvml_sim::{ENV_EPOCH, ENV_SCENARIO};

/// Environment variable with per-field offsets (fault injection).
const ENV_OFFSET: &str = "NVIDIA_SMI_SIM_OFFSET";
const MIB: f64 = 1024.0 * 1024.0;

const USAGE: &str = "usage: nvidia-smi-sim --query-gpu=FIELD[,FIELD...] --format=csv[,noheader][,nounits]
       nvidia-smi-sim --query-compute-apps=FIELD[,FIELD...] --format=csv[,noheader][,nounits]
environment: GPUSCALE_SIM_SCENARIO (scenario file), GPUSCALE_SIM_EPOCH (Unix seconds of scenario time 0),
             NVIDIA_SMI_SIM_OFFSET (e.g. power.draw=50: add to numeric fields)";

/// GPU fields: (name, unit shown without `nounits`).
const GPU_FIELDS: &[(&str, &str)] = &[
    ("count", ""),
    ("index", ""),
    ("name", ""),
    ("uuid", ""),
    ("serial", ""),
    ("vbios_version", ""),
    ("pci.bus_id", ""),
    ("driver_version", ""),
    ("memory.total", "MiB"),
    ("memory.reserved", "MiB"),
    ("memory.used", "MiB"),
    ("memory.free", "MiB"),
    ("temperature.gpu", ""),
    ("temperature.memory", ""),
    ("fan.speed", "%"),
    ("power.draw", "W"),
    ("power.limit", "W"),
    ("enforced.power.limit", "W"),
    ("clocks.gr", "MHz"),
    ("clocks.sm", "MHz"),
    ("clocks.mem", "MHz"),
    ("clocks.video", "MHz"),
    ("clocks.max.sm", "MHz"),
    ("clocks.max.mem", "MHz"),
    ("utilization.gpu", "%"),
    ("utilization.memory", "%"),
    ("pstate", ""),
];

/// Compute-app fields.
const APP_FIELDS: &[(&str, &str)] = &[
    ("pid", ""),
    ("process_name", ""),
    ("gpu_uuid", ""),
    ("gpu_bus_id", ""),
    ("used_memory", "MiB"),
    ("used_gpu_memory", "MiB"),
];

/// Aliases the real tool accepts.
fn canonical(field: &str) -> &str {
    match field {
        "gpu_name" => "name",
        "gpu_uuid" => "uuid",
        "gpu_serial" => "serial",
        "pci.bus_id" | "gpu_bus_id" => "pci.bus_id",
        "clocks.current.graphics" | "clocks.graphics" => "clocks.gr",
        "clocks.current.sm" => "clocks.sm",
        "clocks.current.memory" | "clocks.memory" => "clocks.mem",
        "clocks.current.video" => "clocks.video",
        "clocks.max.memory" => "clocks.max.mem",
        "clocks.max.graphics" | "clocks.max.gr" => "clocks.max.sm",
        "power.management.limit" => "power.limit",
        "performance_state" => "pstate",
        other => other,
    }
}

enum Query {
    Gpu(Vec<String>),
    Apps(Vec<String>),
}

struct Format {
    header: bool,
    units: bool,
}

struct Args {
    query: Query,
    format: Format,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut query = None;
    let mut format = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it.next().cloned().ok_or(format!("{key} needs a value")),
            }
        };
        match key {
            "--query-gpu" | "--query-compute-apps" => {
                let fields: Vec<String> = value()?
                    .split(',')
                    .map(|f| f.trim().to_string())
                    .filter(|f| !f.is_empty())
                    .collect();
                if fields.is_empty() {
                    return Err(format!("{key}: no fields given"));
                }
                query = Some(if key == "--query-gpu" {
                    Query::Gpu(fields)
                } else {
                    Query::Apps(fields)
                });
            }
            "--format" => {
                let v = value()?;
                let mut parts = v.split(',').map(str::trim);
                if parts.next() != Some("csv") {
                    return Err(format!("--format={v}: only csv is supported"));
                }
                let mut f = Format {
                    header: true,
                    units: true,
                };
                for p in parts {
                    match p {
                        "noheader" => f.header = false,
                        "nounits" => f.units = false,
                        other => return Err(format!("--format: unknown option {other:?}")),
                    }
                }
                format = Some(f);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let query = query.ok_or("give --query-gpu=... or --query-compute-apps=...")?;
    let format = format.ok_or("give --format=csv[,noheader][,nounits]")?;
    Ok(Args { query, format })
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Scenario time now: Unix time minus `GPUSCALE_SIM_EPOCH` (0 when unset).
fn scenario_time() -> Result<f64, String> {
    match std::env::var(ENV_EPOCH) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<f64>() {
            Ok(e) if e.is_finite() => Ok(unix_now() - e),
            _ => Err(format!(
                "{ENV_EPOCH}={v:?}: expected Unix seconds (a number)"
            )),
        },
        _ => Ok(0.0),
    }
}

fn load_scenario() -> Result<Scenario, String> {
    match std::env::var_os(ENV_SCENARIO) {
        Some(p) if !p.is_empty() => {
            scenario::load(std::path::Path::new(&p)).map_err(|e| e.to_string())
        }
        _ => Ok(scenario::default_scenario()),
    }
}

fn parse_offsets() -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    let Ok(v) = std::env::var(ENV_OFFSET) else {
        return Ok(out);
    };
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, n) = part
            .split_once('=')
            .ok_or(format!("{ENV_OFFSET}: {part:?} is not FIELD=NUMBER"))?;
        let n: f64 = n
            .trim()
            .parse()
            .map_err(|_| format!("{ENV_OFFSET}: {part:?}: not a number"))?;
        out.insert(canonical(k.trim()).to_string(), n);
    }
    Ok(out)
}

/// NVML's rounding of a curve value to an unsigned integer.
fn round_u(v: f64) -> u64 {
    if v.is_nan() || v <= 0.0 {
        0
    } else {
        v.round() as u64
    }
}

/// One value: a number (offsets apply) or text.
enum Val {
    Int(i64),
    Watts(f64),
    Text(String),
    NotAvailable,
}

fn clock(g: &Gpu, curve: Option<&scenario::Curve>, max: u32, t: f64) -> Val {
    if g.unsupported(Feature::Clocks) {
        return Val::NotAvailable;
    }
    Val::Int(match curve {
        Some(c) => round_u(c.at(t)) as i64,
        None => i64::from(max),
    })
}

fn gpu_value(s: &Scenario, idx: usize, g: &Gpu, field: &str, t: f64) -> Val {
    let l = &g.load;
    let unsupported = |f: Feature, v: Val| {
        if g.unsupported(f) {
            Val::NotAvailable
        } else {
            v
        }
    };
    let total = g.memory_mib;
    let reserved = g.reserved_mib;
    // The simulator's used bytes, as nvidia-smi shows them: whole MiB.
    let used_bytes =
        (round_u(g.memory_used_mib(t) * MIB) as f64).min(((total - reserved) as f64) * MIB);
    let used = (used_bytes / MIB).floor() as i64;
    match field {
        "count" => Val::Int(s.gpus.len() as i64),
        "index" => Val::Int(idx as i64),
        "name" => Val::Text(g.model.clone()),
        "uuid" => Val::Text(g.uuid.clone()),
        "serial" => match (&g.serial, g.unsupported(Feature::Serial)) {
            (Some(sn), false) => Val::Text(sn.clone()),
            _ => Val::NotAvailable,
        },
        "vbios_version" => unsupported(Feature::Vbios, Val::Text(g.vbios_version.clone())),
        "pci.bus_id" => Val::Text(g.pci_bus_id.clone()),
        "driver_version" => Val::Text(s.driver_version.clone()),
        "memory.total" => Val::Int(total as i64),
        "memory.reserved" => Val::Int(reserved as i64),
        "memory.used" => Val::Int(used),
        "memory.free" => Val::Int(total as i64 - reserved as i64 - used),
        "temperature.gpu" => unsupported(
            Feature::Temperature,
            Val::Int(round_u(l.temperature_celsius.at(t)) as i64),
        ),
        "temperature.memory" => unsupported(
            Feature::MemoryTemperature,
            Val::Int(round_u(l.memory_temperature_celsius.at(t)) as i64),
        ),
        "fan.speed" => unsupported(
            Feature::FanSpeed,
            Val::Int(round_u(l.fan_speed.at(t)) as i64),
        ),
        // NVML reports milliwatts; nvidia-smi prints watts with two decimals.
        "power.draw" => unsupported(
            Feature::Power,
            Val::Watts(round_u(l.power_watts.at(t) * 1000.0) as f64 / 1000.0),
        ),
        "power.limit" | "enforced.power.limit" => unsupported(
            Feature::PowerLimit,
            Val::Watts(round_u(g.power_limit_watts * 1000.0) as f64 / 1000.0),
        ),
        "clocks.gr" => clock(
            g,
            l.graphics_clock_mhz.as_ref(),
            g.max_clocks_mhz.graphics,
            t,
        ),
        "clocks.sm" => clock(g, l.sm_clock_mhz.as_ref(), g.max_clocks_mhz.sm, t),
        "clocks.mem" => clock(g, l.memory_clock_mhz.as_ref(), g.max_clocks_mhz.memory, t),
        "clocks.video" => clock(g, l.video_clock_mhz.as_ref(), g.max_clocks_mhz.video, t),
        "clocks.max.sm" => unsupported(Feature::Clocks, Val::Int(i64::from(g.max_clocks_mhz.sm))),
        "clocks.max.mem" => unsupported(
            Feature::Clocks,
            Val::Int(i64::from(g.max_clocks_mhz.memory)),
        ),
        "utilization.gpu" => unsupported(
            Feature::Utilization,
            Val::Int(round_u(l.utilization.at(t)) as i64),
        ),
        "utilization.memory" => {
            if g.unsupported(Feature::Utilization) || g.unsupported(Feature::MemoryUtilization) {
                Val::NotAvailable
            } else {
                Val::Int(round_u(l.memory_utilization.at(t)) as i64)
            }
        }
        "pstate" => unsupported(
            Feature::Pstate,
            Val::Text(format!("P{}", round_u(l.pstate.at(t)).min(15))),
        ),
        _ => Val::NotAvailable,
    }
}

fn render(
    v: Val,
    field: &str,
    unit: &str,
    fmt: &Format,
    offsets: &BTreeMap<String, f64>,
) -> String {
    let off = offsets.get(field).copied().unwrap_or(0.0);
    let suffix = if fmt.units && !unit.is_empty() {
        format!(" {unit}")
    } else {
        String::new()
    };
    match v {
        Val::Int(n) => {
            if off == 0.0 {
                format!("{n}{suffix}")
            } else {
                format!("{}{suffix}", (n as f64 + off).round() as i64)
            }
        }
        Val::Watts(w) => format!("{:.2}{suffix}", w + off),
        Val::Text(s) => s,
        Val::NotAvailable => "[N/A]".to_string(),
    }
}

fn header(fields: &[String], table: &[(&str, &str)], fmt: &Format) -> String {
    fields
        .iter()
        .map(|f| {
            let unit = unit_of(table, canonical(f)).unwrap_or("");
            if fmt.units && !unit.is_empty() {
                format!("{f} [{unit}]")
            } else {
                f.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn unit_of<'a>(table: &'a [(&str, &str)], field: &str) -> Option<&'a str> {
    table.iter().find(|(n, _)| *n == field).map(|(_, u)| *u)
}

/// Checks every field against `table`; the error names the first unknown one.
fn check_fields(fields: &[String], table: &[(&str, &str)]) -> Result<(), String> {
    for f in fields {
        let c = canonical(f);
        // compute-app aliases
        let known = unit_of(table, c).is_some() || unit_of(table, f).is_some();
        if !known {
            return Err(format!(
                "Field \"{f}\" is not a valid field to query.\n\n{USAGE}"
            ));
        }
    }
    Ok(())
}

fn run(argv: &[String]) -> Result<String, String> {
    let args = parse_args(argv)?;
    let offsets = parse_offsets()?;
    let mut out = String::new();
    match &args.query {
        Query::Gpu(fields) => {
            check_fields(fields, GPU_FIELDS)?;
            let s = load_scenario()?;
            let t = scenario_time()?;
            if args.format.header {
                out.push_str(&header(fields, GPU_FIELDS, &args.format));
                out.push('\n');
            }
            for (i, g) in s.gpus.iter().enumerate() {
                let row: Vec<String> = fields
                    .iter()
                    .map(|f| {
                        let c = canonical(f);
                        let unit = unit_of(GPU_FIELDS, c).unwrap_or("");
                        if g.is_lost(t) {
                            "[GPU requires reset]".to_string()
                        } else {
                            render(gpu_value(&s, i, g, c, t), c, unit, &args.format, &offsets)
                        }
                    })
                    .collect();
                out.push_str(&row.join(", "));
                out.push('\n');
            }
        }
        Query::Apps(fields) => {
            check_fields(fields, APP_FIELDS)?;
            let s = load_scenario()?;
            let t = scenario_time()?;
            if args.format.header {
                out.push_str(&header(fields, APP_FIELDS, &args.format));
                out.push('\n');
            }
            for g in s.gpus.iter().filter(|g| !g.is_lost(t)) {
                if g.unsupported(Feature::Processes) {
                    continue;
                }
                for p in &g.processes {
                    let row: Vec<String> = fields
                        .iter()
                        .map(|f| {
                            let (v, unit) = match f.as_str() {
                                "pid" => (Val::Int(i64::from(p.pid)), ""),
                                "process_name" => (Val::Text(p.name.clone()), ""),
                                "gpu_uuid" => (Val::Text(g.uuid.clone()), ""),
                                "gpu_bus_id" => (Val::Text(g.pci_bus_id.clone()), ""),
                                _ => (Val::Int(p.memory_mib as i64), "MiB"),
                            };
                            render(v, f, unit, &args.format, &offsets)
                        })
                        .collect();
                    out.push_str(&row.join(", "));
                    out.push('\n');
                }
            }
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match run(&argv) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(msg) if msg.is_empty() => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("{msg}");
            ExitCode::from(2)
        }
    }
}
