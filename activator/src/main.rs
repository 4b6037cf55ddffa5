use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory as _, Parser as _};
use gpuscale_activator::cli::{Args, Command, LogFormat};
use tracing_subscriber::EnvFilter;

fn init_logging(format: LogFormat, filter: &str) {
    // --log-level (or RUST_LOG) was checked when the command line was read.
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal, and never with NO_COLOR set.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let _ = match format {
        LogFormat::Json => b.json().try_init(),
        LogFormat::Text => b.try_init(),
    };
}

/// `check-config`: the routes of `--config` printed, or exit 2 naming
/// the problem.
fn check_config(path: &std::path::Path) -> ExitCode {
    match gpuscale_activator::config::load(path) {
        Ok(f) => {
            for r in f.routes {
                println!(
                    "{}: host={} pathPrefix={} model={} -> {}/{} ({} {})",
                    r.name,
                    r.host.as_deref().unwrap_or("*"),
                    r.path_prefix,
                    r.model.as_deref().unwrap_or("*"),
                    r.service.namespace,
                    r.service.name,
                    r.target.kind,
                    r.target.name
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// A usage error as clap prints its own (exit 2).
fn usage(message: impl std::fmt::Display) -> ! {
    Args::command()
        .error(ErrorKind::ArgumentConflict, message)
        .exit()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mode = args.mode().unwrap_or_else(|e| usage(e));
    let Some(config) = args.config.clone() else {
        Args::command()
            .error(
                ErrorKind::MissingRequiredArgument,
                "the following required arguments were not provided:\n  --config <CONFIG>",
            )
            .exit()
    };
    init_logging(args.log_format, &args.log_level);
    if let Some(flag) = mode.deprecated {
        tracing::warn!(
            "{flag} is deprecated and will be removed in the next release: use `gpuscale-activator {}`",
            mode.command.name()
        );
    }
    if mode.command == Command::CheckConfig {
        return check_config(&config);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(gpuscale_activator::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("gpuscale-activator: {e}");
            ExitCode::FAILURE
        }
    }
}
