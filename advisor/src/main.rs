//! `gpuscale-advisor`: right-sizing advice from a Prometheus range.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use gpuscale_advisor::cli::{Cli, Format};
use gpuscale_advisor::policy::Policy;
use gpuscale_advisor::tables::Tables;
use gpuscale_advisor::{Error, Options, Report, parse_duration, parse_end, report, run};

fn options(cli: &Cli) -> Result<Options, Error> {
    let end = match &cli.end {
        Some(e) => parse_end(e)?,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    };
    Ok(Options {
        prometheus: cli.prometheus.clone(),
        end,
        range: cli.range.clone(),
        step: cli.step.clone(),
        timeout: Duration::from_secs_f64(parse_duration(&cli.query_timeout)?),
        policy: Policy::new(&cli.tiers, &cli.default_tier, cli.time_slice_production)?,
    })
}

fn print(r: &Report, format: Format) -> ExitCode {
    for w in &r.warnings {
        eprintln!("gpuscale-advisor: Prometheus warning: {w}");
    }
    for x in &r.excluded {
        eprintln!("gpuscale-advisor: {x}");
    }
    match format {
        Format::Table => print!("{}", report::table(r)),
        Format::Markdown => print!("{}", report::markdown(r)),
        Format::Json => match serde_json::to_string_pretty(r) {
            Ok(j) => println!("{j}"),
            Err(e) => {
                eprintln!("gpuscale-advisor: encoding JSON: {e}");
                return ExitCode::FAILURE;
            }
        },
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    // Colours only on a terminal, and never with NO_COLOR set.
    let cli = Cli::parse();
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // --log-level (or RUST_LOG) was checked when the command line was read.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log_level)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();
    let done = Tables::load(cli.gpu_table.as_deref(), cli.mig_table.as_deref())
        .and_then(|t| options(&cli).map(|o| (t, o)))
        .and_then(|(t, o)| run(&o, &t));
    match done {
        Ok(r) => print(&r, cli.output),
        Err(e) => {
            eprintln!("gpuscale-advisor: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
