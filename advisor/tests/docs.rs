//! docs/right-sizing.md and the code agree: every flag, every GPU type and
//! MIG profile of the built-in tables, every bottleneck class and every
//! series `alerts/rightsizing.rules.yml` records.

use clap::CommandFactory;
use gpuscale_advisor::cli::Cli;
use gpuscale_advisor::tables::Tables;

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/right-sizing.md");
    std::fs::read_to_string(path).expect("docs/right-sizing.md")
}

#[test]
fn every_flag_is_documented() {
    let doc = doc();
    for arg in Cli::command().get_arguments() {
        if let Some(long) = arg.get_long() {
            assert!(
                doc.contains(&format!("`--{long}")),
                "docs/right-sizing.md lacks --{long}"
            );
        }
    }
}

#[test]
fn every_table_entry_is_documented() {
    let doc = doc();
    let t = Tables::load(None, None).expect("tables");
    for g in &t.gpus.gpus {
        let tflops = |x: Option<f64>| x.map_or("–".to_string(), |x| x.to_string());
        let row = format!(
            "| {} | {} | {} | {} | {} |",
            g.name,
            g.memory_gib,
            g.bandwidth_gbps,
            tflops(g.fp16_tflops),
            tflops(g.fp8_tflops)
        );
        assert!(
            doc.contains(&row),
            "docs/right-sizing.md lacks the row {row}"
        );
        assert!(
            doc.contains(&format!("| {} |", g.price_usd_per_hour)),
            "{}: price",
            g.name
        );
    }
    for (model, profiles) in &t.mig.models {
        for p in profiles {
            let cell = format!("`{}` ({}, {})", p.profile, p.compute_slices, p.memory_gib);
            assert!(
                doc.contains(&cell),
                "docs/right-sizing.md lacks {model} {cell}"
            );
        }
    }
}

#[test]
fn every_class_and_recorded_series_is_documented() {
    let doc = doc();
    for class in [
        "idle",
        "memory_capacity",
        "memory_bandwidth",
        "compute",
        "host_input",
        "balanced",
        "unknown_no_gpm",
        "memory_bandwidth_proxy",
        "compute_proxy",
        "host_input_proxy",
        "balanced_proxy",
    ] {
        assert!(doc.contains(&format!("| `{class}` |")), "class {class}");
    }
    let rules = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../alerts/rightsizing.rules.yml"
    ))
    .expect("rules");
    for line in rules.lines() {
        if let Some(name) = line.trim().strip_prefix("- record: ") {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/right-sizing.md lacks {name}"
            );
        }
    }
}
