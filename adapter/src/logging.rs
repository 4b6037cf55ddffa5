//! tracing set-up: `--log-format text|json`, `--log-level` (env
//! `RUST_LOG`, default info).

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

pub fn init(format: LogFormat, filter: &str) -> Result<(), String> {
    let filter =
        EnvFilter::try_new(filter).map_err(|e| format!("invalid --log-level '{filter}': {e}"))?;
    // Colours only on a terminal (log collectors get plain text), and
    // never with NO_COLOR set.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let result = match format {
        LogFormat::Json => b.json().try_init(),
        LogFormat::Text => b.try_init(),
    };
    result.map_err(|e| format!("cannot set up logging: {e}"))
}
