//! Writes a synthetic week of history for N workloads as OpenMetrics, for
//! `bench/advisor.sh`: `cargo run --release -p gpuscale-advisor --example
//! synth -- N END_UNIX_SECONDS > history.om`.

#[path = "../tests/synth/mod.rs"]
mod synth;

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(n), Some(end)) = (
        args.first().and_then(|a| a.parse::<usize>().ok()),
        args.get(1).and_then(|a| a.parse::<i64>().ok()),
    ) else {
        eprintln!("usage: synth WORKLOADS END_UNIX_SECONDS");
        return ExitCode::from(2);
    };
    let end = end - end % 300;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = synth::write_openmetrics(&synth::fleet(n), end, 7 * 86_400, 300, &mut out);
    if let Err(e) = written.and_then(|()| out.flush()) {
        eprintln!("synth: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
