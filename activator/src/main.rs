use clap::Parser as _;
use gpuscale_activator::cli::{Args, LogFormat};
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

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    init_logging(args.log_format, &args.log_level);
    if args.check_config {
        return match gpuscale_activator::config::load(&args.config) {
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
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                std::process::ExitCode::from(2)
            }
        };
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(gpuscale_activator::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("gpuscale-activator: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
