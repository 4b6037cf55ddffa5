//! `gpuscale-replay`: how many GPU-hours each scaling policy uses on a
//! trace, and at what SLO cost.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::compare::{Knobs, compare};
use crate::idle::IdleSignal;
use crate::model::Service;
use crate::sweep::Sweep;
use crate::trace::{self, Arrival, RangeQuery};
use crate::{derive, frontier, limits, report};
use clap::{ArgGroup, Args, Parser, Subcommand};
use gpuscale_util::duration;

mod fleet_cmd;

/// The environment variables replay reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  RUST_LOG  the log filter (--log-level)
  NO_COLOR  no colour codes in the log (none either off a terminal)";

#[derive(Parser)]
#[command(version, about, after_help = ENVIRONMENT)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Log filter, e.g. warn, info, gpuscale_replay=debug.
    #[arg(long, global = true, env = "RUST_LOG", default_value = "warn", value_parser = gpuscale_util::log::filter)]
    log_level: String,
}

#[derive(Subcommand)]
enum Cmd {
    /// Replay a trace through every policy and print the table.
    #[command(after_help = ENVIRONMENT)]
    Run(Box<Run>),
    /// Many long-tail models, each with its own trace derived from CSV
    /// traces: dedicated GPUs (KEDA, gpuscale at zero) against shared GPUs
    /// with the sleep tier.
    #[command(after_help = ENVIRONMENT)]
    Fleet(Box<fleet_cmd::Fleet>),
    /// Write the sparse long-tail trace derived from CSV traces.
    #[command(after_help = ENVIRONMENT)]
    Derive {
        /// Fraction of requests kept (every round(1/keep)-th row).
        #[arg(long, value_name = "FRACTION", default_value_t = 0.01)]
        keep: f64,
        /// Time stretch factor (24 turns an hour into a day).
        #[arg(long, value_name = "FACTOR", default_value_t = 24.0)]
        stretch: f64,
        /// Where to write the derived CSV trace.
        #[arg(long, short, value_name = "FILE")]
        output: PathBuf,
        /// The CSV traces to derive from.
        #[arg(value_name = "TRACE")]
        inputs: Vec<PathBuf>,
    },
}

#[derive(Args)]
#[command(group(ArgGroup::new("input").required(true).args(["trace", "prometheus"])))]
struct Run {
    /// A CSV trace: TIMESTAMP,ContextTokens,GeneratedTokens (or --prometheus).
    #[arg(long, value_name = "FILE", conflicts_with = "prometheus")]
    trace: Option<PathBuf>,
    /// Prometheus base URL to read the trace from (or --trace); with
    /// --query, --start, --end.
    #[arg(long, value_name = "URL", requires_all = ["query", "start", "end"])]
    prometheus: Option<String>,
    /// PromQL giving requests per second, one series.
    #[arg(long, value_name = "PROMQL")]
    query: Option<String>,
    /// Range start, Unix seconds.
    #[arg(long, value_name = "UNIX_SECONDS")]
    start: Option<f64>,
    /// Range end, Unix seconds.
    #[arg(long, value_name = "UNIX_SECONDS")]
    end: Option<f64>,
    /// Range query step, a duration (e.g. 60s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = fractional)]
    step: f64,
    /// How long the range query may take, connecting included: a duration.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = fractional)]
    prometheus_timeout: f64,
    /// Prompt tokens per request of a Prometheus trace.
    #[arg(long, value_name = "TOKENS", default_value_t = 1000)]
    input_tokens: u32,
    /// Generated tokens per request of a Prometheus trace.
    #[arg(long, value_name = "TOKENS", default_value_t = 200)]
    output_tokens: u32,
    #[command(flatten)]
    svc: SvcArgs,
    #[command(flatten)]
    knobs: KnobArgs,
    /// Write the per-policy picture (requests, replicas, SLO) here.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Vary one knob: idle-for=1m,5m | cooldown=1m,5m | activation=0,1
    /// (durations for the first two, requests for activation).
    #[arg(long, value_name = "NAME=V1,V2,…", value_parser = Sweep::parse)]
    sweep: Option<Sweep>,
    /// KEDA cooldowns (durations, comma-separated, e.g. 1m,5m) to find
    /// dominating gpuscale settings for: the Pareto frontier.
    #[arg(long, value_name = "DURATIONS", value_delimiter = ',', value_parser = seconds)]
    frontier: Vec<u64>,
    /// Write the frontier's picture here; needs --frontier.
    #[arg(long, value_name = "FILE", requires = "frontier")]
    frontier_svg: Option<PathBuf>,
}

#[derive(Args)]
struct SvcArgs {
    /// Prompt tokens per second a request is prefilled at.
    #[arg(long, value_name = "TOKENS_PER_S", default_value_t = Service::default().prefill_tps)]
    prefill_tps: f64,
    /// Tokens per second one running sequence decodes at, batch full.
    #[arg(long, value_name = "TOKENS_PER_S", default_value_t = Service::default().decode_tps)]
    decode_tps: f64,
    /// Sequences a replica runs at once; more wait in its queue.
    #[arg(long, value_name = "SEQUENCES", default_value_t = Service::default().max_seqs)]
    max_seqs: u32,
    /// Replica created to Ready (pull, model load): a duration.
    #[arg(long, value_name = "DURATION", default_value = "90s", value_parser = seconds)]
    cold_start: u64,
    /// GPUs each replica holds.
    #[arg(long, value_name = "GPUS", default_value_t = Service::default().gpus_per_replica,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    gpus_per_replica: u32,
    /// Price of one GPU-hour (any currency).
    #[arg(long, value_name = "PER_GPU_HOUR", default_value_t = Service::default().price_per_gpu_hour)]
    price: f64,
    /// Time-to-first-token SLO on each minute's p95: a duration, at most 1h.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = fractional)]
    ttft_slo: f64,
    /// How long a client waits for its first token before it gives up: a
    /// duration, at most 1h.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = fractional)]
    client_deadline: f64,
}

#[derive(Args)]
struct KnobArgs {
    /// HPA target in-flight requests per replica (default 0.75 × max-seqs).
    #[arg(long, value_name = "REQUESTS")]
    hpa_target: Option<f64>,
    /// HPA maxReplicas.
    #[arg(long, value_name = "REPLICAS", default_value_t = 64,
          value_parser = clap::value_parser!(i32).range(1..=i64::from(limits::MAX_REPLICAS)))]
    max_replicas: i32,
    /// Wake when in-flight requests are above this (KEDA activationThreshold).
    #[arg(long, value_name = "REQUESTS", default_value_t = 0.0)]
    activation: f64,
    /// KEDA cooldownPeriod: a duration.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = seconds)]
    cooldown: u64,
    /// gpuscale idleFor: a duration.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = seconds)]
    idle_for: u64,
    /// gpuscale minUpDuration: a duration.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = seconds)]
    min_up: u64,
    /// What gpuscale idles on: rate, in-flight or activator.
    #[arg(long, value_name = "SIGNAL", default_value = "rate", value_parser = IdleSignal::parse)]
    idle_signal: IdleSignal,
    /// gpuscale controller's resync: a duration, at least 1s.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = interval)]
    sync: u64,
    /// Prometheus scrape interval: a duration, at least 1s.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = interval)]
    scrape_interval: u64,
    /// The adapter's poll of Prometheus: a duration, at least 1s.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = interval)]
    adapter_poll: u64,
    /// KEDA pollingInterval: a duration, at least 1s.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = interval)]
    keda_polling: u64,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Trace {
        path: String,
        source: trace::TraceError,
    },
    #[error(transparent)]
    Prometheus(trace::TraceError),
    #[error("invalid value: {0}")]
    Invalid(String),
}

const MAX_DURATION: Duration = Duration::from_secs(limits::MAX_SECONDS);

/// A duration of whole seconds, from 0s to 366 days.
fn seconds(s: &str) -> Result<u64, String> {
    whole(s, Duration::ZERO)
}

/// A duration of whole seconds, from 1s to 366 days.
fn interval(s: &str) -> Result<u64, String> {
    whole(s, Duration::from_secs(1))
}

fn whole(s: &str, min: Duration) -> Result<u64, String> {
    let d = duration::parse_within(s, min, MAX_DURATION).map_err(|e| e.to_string())?;
    if d.subsec_nanos() != 0 {
        return Err(format!("{s:?} is not a whole number of seconds"));
    }
    Ok(d.as_secs())
}

/// A duration in seconds, fractions kept (ranges are checked with the rest
/// of the input).
fn fractional(s: &str) -> Result<f64, String> {
    duration::parse_within(s, Duration::ZERO, MAX_DURATION)
        .map(|d| d.as_secs_f64())
        .map_err(|e| e.to_string())
}

/// The `gpuscale-replay` command line.
pub fn main() -> ExitCode {
    // Colours only on a terminal, and never with NO_COLOR set.
    let cli = Cli::parse();
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // --log-level (or RUST_LOG) was checked when the command line was read.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log_level)
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let result = match cli.cmd {
        Cmd::Run(run) => cmd_run(&run),
        Cmd::Fleet(f) => fleet_cmd::run(&f),
        Cmd::Derive {
            keep,
            stretch,
            output,
            inputs,
        } => cmd_derive(keep, stretch, &output, &inputs),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpuscale-replay: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &PathBuf) -> Result<Vec<Arrival>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.clone(),
        source,
    })?;
    trace::parse_csv(&text).map_err(|source| Error::Trace {
        path: path.display().to_string(),
        source,
    })
}

fn arrivals(run: &Run) -> Result<Vec<Arrival>, Error> {
    if let Some(path) = &run.trace {
        return load(path);
    }
    let url = run.prometheus.as_deref().unwrap_or_default();
    let t = run.prometheus_timeout;
    if !(t.is_finite() && t > 0.0 && t <= 3600.0) {
        return Err(Error::Invalid(format!(
            "--prometheus-timeout {t}: must be more than 0 and at most 3600 seconds"
        )));
    }
    let q = RangeQuery {
        url,
        query: run.query.as_deref().unwrap_or_default(),
        start: run.start.unwrap_or_default(),
        end: run.end.unwrap_or_default(),
        step: run.step,
        timeout: std::time::Duration::from_secs_f64(t),
    };
    trace::from_prometheus(&q, run.input_tokens, run.output_tokens).map_err(Error::Prometheus)
}

fn service(a: &SvcArgs) -> Result<Service, Error> {
    let positive = [a.prefill_tps, a.decode_tps, a.price, a.ttft_slo];
    if positive.iter().any(|v| !v.is_finite() || *v <= 0.0) || a.max_seqs == 0 {
        return Err(Error::Invalid(
            "--prefill-tps, --decode-tps, --price, --ttft-slo and --max-seqs must be > 0".into(),
        ));
    }
    if !(a.client_deadline.is_finite() && a.client_deadline > 0.0 && a.client_deadline <= 3600.0) {
        return Err(Error::Invalid(format!(
            "--client-deadline {}: must be more than 0 and at most 3600 seconds",
            a.client_deadline
        )));
    }
    if a.ttft_slo > 3600.0 {
        return Err(Error::Invalid(format!(
            "--ttft-slo {}: at most 3600 seconds",
            a.ttft_slo
        )));
    }
    Ok(Service {
        prefill_tps: a.prefill_tps,
        decode_tps: a.decode_tps,
        max_seqs: a.max_seqs,
        cold_start: u32::try_from(a.cold_start).unwrap_or(u32::MAX),
        gpus_per_replica: a.gpus_per_replica,
        price_per_gpu_hour: a.price,
        ttft_slo: a.ttft_slo,
        client_deadline: a.client_deadline,
    })
}

fn knobs(svc: &Service, a: &KnobArgs) -> Result<Knobs, Error> {
    let hpa_target = a
        .hpa_target
        .unwrap_or_else(|| Knobs::defaults(svc).hpa_target);
    if !(hpa_target.is_finite() && hpa_target > 0.0) {
        return Err(Error::Invalid(format!(
            "--hpa-target {hpa_target}: must be > 0"
        )));
    }
    if !(a.activation.is_finite() && a.activation >= 0.0) {
        return Err(Error::Invalid(format!(
            "--activation {}: must be 0 or more",
            a.activation
        )));
    }
    Ok(Knobs {
        hpa_target,
        max_replicas: a.max_replicas,
        activation: a.activation,
        cooldown: a.cooldown,
        idle_for: a.idle_for,
        min_up: a.min_up,
        idle_signal: a.idle_signal,
        sync: a.sync,
        scrape: a.scrape_interval,
        adapter_poll: a.adapter_poll,
        keda_polling: a.keda_polling,
    })
}

fn cmd_run(run: &Run) -> Result<(), Error> {
    let svc = service(&run.svc)?;
    let k = knobs(&svc, &run.knobs)?;
    let arrivals = arrivals(run)?;
    limits::demand(&svc, &arrivals).map_err(Error::Invalid)?;
    let began = Instant::now();
    let outcomes = compare(&svc, &arrivals, &k);
    let took = began.elapsed();
    let span = arrivals.last().map_or(0.0, |l| l.t) - arrivals[0].t;
    print!("{}", report::table(&outcomes));
    if k.idle_signal.needs_activator() {
        println!(
            "gpuscale through Prometheus is not replayed: only the activator has its own count (--idle-signal activator)"
        );
    }
    for o in outcomes.iter().filter(|o| o.unserved > 0) {
        println!(
            "saturated: {} of {} requests were not served under {} (counted as SLO violations)",
            o.unserved,
            arrivals.len(),
            o.policy
        );
    }
    println!(
        "{} requests over {:.1} h replayed under {} policies in {:.1} ms",
        arrivals.len(),
        span / 3600.0,
        outcomes.len(),
        took.as_secs_f64() * 1000.0
    );
    if let Some(path) = &run.svg {
        std::fs::write(path, report::svg(&outcomes, arrivals[0].t)).map_err(|source| {
            Error::Read {
                path: path.clone(),
                source,
            }
        })?;
    }
    if let Some(sweep) = &run.sweep {
        print!("\n{}", sweep.run(&svc, &arrivals, k, outcomes[0].gpu_hours));
    }
    if !run.frontier.is_empty() {
        let f = frontier::frontier(&svc, &arrivals, &k, &run.frontier, &frontier::grid());
        print!("\nfrontier against KEDA\n{}", frontier::table(&f));
        if let Some(path) = &run.frontier_svg {
            std::fs::write(path, frontier::svg(&f)).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

fn cmd_derive(keep: f64, stretch: f64, output: &PathBuf, inputs: &[PathBuf]) -> Result<(), Error> {
    if !(keep > 0.0 && keep <= 1.0 && stretch.is_finite() && stretch > 0.0) || inputs.is_empty() {
        return Err(Error::Invalid(
            "derive needs 0 < --keep ≤ 1, --stretch > 0 and at least one input".into(),
        ));
    }
    let traces = inputs.iter().map(load).collect::<Result<Vec<_>, _>>()?;
    let out = derive::derive(&traces, keep, stretch);
    limits::trace(&out).map_err(|e| Error::Invalid(format!("the derived trace: {e}")))?;
    std::fs::write(output, trace::to_csv(&out)).map_err(|source| Error::Read {
        path: output.clone(),
        source,
    })
}
