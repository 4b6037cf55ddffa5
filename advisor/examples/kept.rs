//! What the advisor keeps of the large answer of `bench/advisor-rss.py`:
//! the same N devices in the map `read_allocations` folds them into, and
//! nothing else, for the "kept" row of docs/performance.md ("Advisor"):
//! `/usr/bin/time -v target/release/examples/kept 1500000`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use gpuscale_advisor::history::DeviceId;

fn main() -> ExitCode {
    let Some(n) = std::env::args().nth(1).and_then(|a| a.parse::<u64>().ok()) else {
        eprintln!("usage: kept SERIES");
        return ExitCode::from(2);
    };
    let mut sharing: BTreeMap<DeviceId, f64> = BTreeMap::new();
    for i in 0..n {
        let (node, uuid) = (
            format!("node-{i:07}"),
            format!("GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}"),
        );
        // Copies of exact length, as `DeviceId::of` makes from a series.
        let d = DeviceId {
            cluster: "cluster-a".to_owned(),
            node: node.as_str().to_owned(),
            uuid: uuid.as_str().to_owned(),
            mig_uuid: String::new(),
        };
        sharing.insert(d, 1.0);
    }
    println!("{} devices kept", std::hint::black_box(&sharing).len());
    ExitCode::SUCCESS
}
