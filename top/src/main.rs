use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use gpuscale_top::cli::{Cli, Output};
use gpuscale_top::model::{self, Filter};
use gpuscale_top::render;
use gpuscale_top::source::Source;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            // --log-level (or RUST_LOG) was checked when the command line was read.
            tracing_subscriber::EnvFilter::try_new(&cli.log_level)
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    match source(&cli) {
        Ok(src) if cli.once => once(&cli, &src),
        Ok(src) if std::io::stdout().is_terminal() => interactive(&cli, src),
        Ok(src) => watch(&cli, &src),
        Err(e) => {
            eprintln!("gpuscale-top: {e}");
            ExitCode::from(2)
        }
    }
}

fn source(cli: &Cli) -> Result<Source, String> {
    let tls = gpuscale_top::tls::Options {
        ca_file: cli.ca_file.clone(),
        cert_file: cli.cert_file.clone(),
        key_file: cli.key_file.clone(),
        insecure_skip_verify: cli.insecure_skip_verify,
    };
    let src = match (&cli.exporter, &cli.prometheus) {
        (Some(url), _) => Source::exporter(url, cli.timeout, &tls),
        (None, Some(url)) => Source::prometheus(url, cli.node.clone(), cli.timeout, &tls),
        (None, None) => return Err("give --exporter URL or --prometheus URL".into()),
    }
    .map_err(|e| e.to_string())?;
    match (&cli.username, &cli.password_file) {
        (Some(user), Some(path)) => {
            let pw = std::fs::read_to_string(path)
                .map_err(|e| format!("--password-file {}: {e}", path.display()))?;
            Ok(src.with_basic_auth(user, pw.trim_end_matches(['\n', '\r'])))
        }
        _ => Ok(src),
    }
}

fn filter(cli: &Cli) -> Filter {
    Filter {
        node: cli.node.clone(),
        node_pool: cli.node_pool.clone(),
        namespace: cli.namespace.clone(),
    }
}

fn once(cli: &Cli, src: &Source) -> ExitCode {
    let samples = match src.fetch() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gpuscale-top: {e}");
            return ExitCode::FAILURE;
        }
    };
    let snap = model::build(&src.name(), &src.families(), &samples, &filter(cli));
    let out = match cli.output {
        Output::Text => render::text(&snap),
        Output::Json => match serde_json::to_string_pretty(&snap) {
            Ok(j) => j + "\n",
            Err(e) => {
                eprintln!("gpuscale-top: encoding JSON: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    print!("{out}");
    ExitCode::SUCCESS
}

fn interactive(cli: &Cli, src: Source) -> ExitCode {
    match gpuscale_top::tui::run(src, filter(cli), cli.interval) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpuscale-top: terminal: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Without a terminal (piped, logged): redraws the snapshot every interval; a failed read is shown with the
/// last good snapshot and retried on the next tick.
fn watch(cli: &Cli, src: &Source) -> ExitCode {
    let mut last: Option<String> = None;
    loop {
        let screen = match src.fetch() {
            Ok(samples) => {
                let t = render::text(&model::build(
                    &src.name(),
                    &src.families(),
                    &samples,
                    &filter(cli),
                ));
                last = Some(t.clone());
                t
            }
            Err(e) => format!(
                "SOURCE DOWN: {e} (retrying every {})\n{}",
                gpuscale_util::duration::format(cli.interval),
                last.as_deref().unwrap_or("")
            ),
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{screen}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::SUCCESS; // the reader went away
        }
        drop(out);
        std::thread::sleep(cli.interval);
    }
}
