//! `gpuscale-advisor`: right-sizing advice from a Prometheus range.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use gpuscale_advisor::cli::{Cli, Format};
use gpuscale_advisor::tables::Tables;
use gpuscale_advisor::{Options, report, run};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let tables = match Tables::load(cli.gpu_table.as_deref(), cli.mig_table.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gpuscale-advisor: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let end = cli.end.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    });
    let o = Options {
        prometheus: cli.prometheus,
        end,
        range: cli.range,
        step: cli.step,
        timeout: Duration::from_secs(cli.query_timeout),
    };
    match run(&o, &tables) {
        Ok(r) => {
            for w in &r.warnings {
                eprintln!("gpuscale-advisor: Prometheus warning: {w}");
            }
            for x in &r.excluded {
                eprintln!("gpuscale-advisor: {x}");
            }
            match cli.output {
                Format::Table => print!("{}", report::table(&r)),
                Format::Json => match serde_json::to_string_pretty(&r) {
                    Ok(j) => println!("{j}"),
                    Err(e) => {
                        eprintln!("gpuscale-advisor: encoding JSON: {e}");
                        return ExitCode::FAILURE;
                    }
                },
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gpuscale-advisor: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
