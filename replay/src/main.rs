//! `gpuscale-replay`: how many GPU-hours each scaling policy uses on a
//! trace, and at what SLO cost.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use gpuscale_replay::compare::{Knobs, compare};
use gpuscale_replay::idle::IdleSignal;
use gpuscale_replay::model::Service;
use gpuscale_replay::trace::{self, Arrival, RangeQuery};
use gpuscale_replay::{derive, frontier, limits, report};

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Replay a trace through every policy and print the table.
    Run(Box<Run>),
    /// Write the sparse long-tail trace derived from CSV traces.
    Derive {
        /// Fraction of requests kept (every round(1/keep)-th row).
        #[arg(long, default_value_t = 0.01)]
        keep: f64,
        /// Time stretch factor (24 turns an hour into a day).
        #[arg(long, default_value_t = 24.0)]
        stretch: f64,
        #[arg(long, short)]
        output: PathBuf,
        inputs: Vec<PathBuf>,
    },
}

#[derive(Args)]
struct Run {
    /// A CSV trace: TIMESTAMP,ContextTokens,GeneratedTokens.
    #[arg(
        long,
        conflicts_with = "prometheus",
        required_unless_present = "prometheus"
    )]
    trace: Option<PathBuf>,
    /// Prometheus base URL; with --query, --start, --end.
    #[arg(long, requires_all = ["query", "start", "end"])]
    prometheus: Option<String>,
    /// PromQL giving requests per second, one series.
    #[arg(long)]
    query: Option<String>,
    /// Range start and end, Unix seconds.
    #[arg(long)]
    start: Option<f64>,
    #[arg(long)]
    end: Option<f64>,
    #[arg(long, default_value_t = 60.0)]
    step: f64,
    /// Seconds the range query may take, connecting included.
    #[arg(long, default_value_t = 60.0)]
    prometheus_timeout: f64,
    /// Tokens per request for a Prometheus trace.
    #[arg(long, default_value_t = 1000)]
    input_tokens: u32,
    #[arg(long, default_value_t = 200)]
    output_tokens: u32,
    #[command(flatten)]
    svc: SvcArgs,
    #[command(flatten)]
    knobs: KnobArgs,
    /// Write the picture here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Vary one knob: idle-for=60,300 | cooldown=… | activation=…
    #[arg(long)]
    sweep: Option<String>,
    /// KEDA cooldowns (seconds, comma-separated) to find dominating gpuscale
    /// settings for: the Pareto frontier.
    #[arg(long, value_delimiter = ',', value_parser = seconds)]
    frontier: Vec<u64>,
    /// Write the frontier's picture here; needs --frontier.
    #[arg(long, requires = "frontier")]
    frontier_svg: Option<PathBuf>,
}

#[derive(Args)]
struct SvcArgs {
    #[arg(long, default_value_t = Service::default().prefill_tps)]
    prefill_tps: f64,
    #[arg(long, default_value_t = Service::default().decode_tps)]
    decode_tps: f64,
    #[arg(long, default_value_t = Service::default().max_seqs)]
    max_seqs: u32,
    #[arg(long, default_value_t = Service::default().cold_start)]
    cold_start: u32,
    #[arg(long, default_value_t = Service::default().gpus_per_replica,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    gpus_per_replica: u32,
    #[arg(long, default_value_t = Service::default().price_per_gpu_hour)]
    price: f64,
    #[arg(long, default_value_t = Service::default().ttft_slo)]
    ttft_slo: f64,
    /// Seconds a client waits for its first token before it gives up.
    #[arg(long, default_value_t = Service::default().client_deadline)]
    client_deadline: f64,
}

#[derive(Args)]
struct KnobArgs {
    /// HPA target in-flight requests per replica (default 0.75 × max-seqs).
    #[arg(long)]
    hpa_target: Option<f64>,
    #[arg(long, default_value_t = 64,
          value_parser = clap::value_parser!(i32).range(1..=i64::from(limits::MAX_REPLICAS)))]
    max_replicas: i32,
    #[arg(long, default_value_t = 0.0)]
    activation: f64,
    #[arg(long, default_value_t = 300, value_parser = seconds)]
    cooldown: u64,
    #[arg(long, default_value_t = 300, value_parser = seconds)]
    idle_for: u64,
    #[arg(long, default_value_t = 0, value_parser = seconds)]
    min_up: u64,
    /// What gpuscale idles on: rate, in-flight or activator.
    #[arg(long, default_value = "rate", value_parser = IdleSignal::parse)]
    idle_signal: IdleSignal,
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=limits::MAX_SECONDS))]
    sync: u64,
    /// Prometheus scrape interval, seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=limits::MAX_SECONDS))]
    scrape_interval: u64,
    /// The adapter's poll of Prometheus, seconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=limits::MAX_SECONDS))]
    adapter_poll: u64,
    /// KEDA pollingInterval, seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=limits::MAX_SECONDS))]
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
    #[error(
        "--sweep {0:?}: expected NAME=V1,V2,… with NAME idle-for, cooldown or activation and values from 0 to 31622400"
    )]
    Sweep(String),
    #[error("invalid value: {0}")]
    Invalid(String),
}

/// A whole number of seconds, at most [`limits::MAX_SECONDS`].
fn seconds(s: &str) -> Result<u64, String> {
    let v: u64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of seconds"))?;
    if v > limits::MAX_SECONDS {
        return Err(format!(
            "{v} is more than {} (366 days)",
            limits::MAX_SECONDS
        ));
    }
    Ok(v)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let result = match Cli::parse().cmd {
        Cmd::Run(run) => cmd_run(&run),
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
        cold_start: a.cold_start,
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
        std::fs::write(path, report::svg(&outcomes)).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
    }
    if let Some(spec) = &run.sweep {
        sweep(&svc, &arrivals, k, spec, outcomes[0].gpu_hours)?;
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

/// The saving/SLO curve over one knob, against static at peak.
fn sweep(
    svc: &Service,
    arrivals: &[Arrival],
    k: Knobs,
    spec: &str,
    peak: f64,
) -> Result<(), Error> {
    let bad = || Error::Sweep(spec.to_string());
    let (name, values) = spec.split_once('=').ok_or_else(bad)?;
    println!("\nsweep {name}: saving vs static at peak ({peak:.2} GPU-h)");
    println!(
        "{:>10} {:<37} {:>9} {:>8} {:>8} {:>7}",
        name, "policy", "GPU-h", "saving", "SLO-min", "cold"
    );
    for v in values.split(',') {
        let x: f64 = v.trim().parse().map_err(|_| bad())?;
        if !x.is_finite() || x < 0.0 || x > limits::MAX_SECONDS as f64 {
            return Err(bad());
        }
        let mut k = k;
        match name {
            "idle-for" => k.idle_for = x as u64,
            "cooldown" => k.cooldown = x as u64,
            "activation" => k.activation = x,
            _ => return Err(bad()),
        }
        let mut runs = vec![gpuscale_replay::sim::replay(svc, arrivals, &mut k.keda())];
        for activator in [false, true] {
            if let Some(mut g) = k.gpuscale(activator) {
                runs.push(gpuscale_replay::sim::replay(svc, arrivals, &mut g));
            }
        }
        for o in runs {
            println!(
                "{:>10} {:<37} {:>9.2} {:>7.1}% {:>8} {:>7}",
                v.trim(),
                o.policy,
                o.gpu_hours,
                100.0 * (1.0 - o.gpu_hours / peak),
                o.slo_violation_minutes,
                o.cold_waiters
            );
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
