//! `gpuscale-replay fleet`: many long-tail models on dedicated GPUs
//! against shared GPUs with the sleep tier.

use std::path::PathBuf;

use crate::fleet::{self, FleetModel};
use crate::fleet_report::{self, fleet_table, frontier_table};
use crate::sleep::{self, Level, Tier, Timing, Vram};
use crate::{fleet_svg, limits};
use clap::Args;

use super::{Error, KnobArgs, SvcArgs, fractional, knobs, load, seconds, service};

#[derive(Args)]
pub struct Fleet {
    /// The CSV traces every model's trace is derived from.
    #[arg(value_name = "TRACE", required = true)]
    inputs: Vec<PathBuf>,
    /// Models in the fleet, 2 to 64; model i keeps 1%, 0.5%, 2% or 0.25%
    /// of the rows (i mod 4), from row i, rotated by i/N of the day.
    #[arg(long, value_name = "MODELS", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(2..=64))]
    models: u32,
    /// Time stretch factor of every model's trace (24 turns an hour into a day).
    #[arg(long, value_name = "FACTOR", default_value_t = 24.0)]
    stretch: f64,
    #[command(flatten)]
    tier: TierArgs,
    #[command(flatten)]
    svc: SvcArgs,
    #[command(flatten)]
    knobs: KnobArgs,
    /// KEDA cooldowns (durations, comma-separated) to find shared sleep-tier
    /// settings for with at most half the GPU-hours and no more minutes.
    #[arg(long, value_name = "DURATIONS", value_delimiter = ',', value_parser = seconds)]
    frontier: Vec<u64>,
    /// Write the frontier's picture here; needs --frontier.
    #[arg(long, value_name = "FILE", requires = "frontier")]
    frontier_svg: Option<PathBuf>,
}

#[derive(Args)]
struct TierArgs {
    /// Shared tier: put a model to sleep after this idle (sleep.after), a duration.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = seconds)]
    sleep_after: u64,
    /// Shared tier: sleep level, 1 (weights to host RAM) or 2 (weights dropped).
    #[arg(long, value_name = "LEVEL", default_value = "1", value_parser = Level::parse)]
    sleep_level: Level,
    /// Shared tier: a level-1 wake, POST /wake_up to serving: a duration.
    #[arg(long, value_name = "DURATION", default_value = "300ms", value_parser = fractional)]
    wake: f64,
    /// Shared tier: POST /sleep to VRAM released: a duration.
    #[arg(long, value_name = "DURATION", default_value = "5700ms", value_parser = fractional)]
    sleep_time: f64,
    /// Shared tier: a level-2 wake (weights reloaded): a duration.
    #[arg(long, value_name = "DURATION", default_value = "2600ms", value_parser = fractional)]
    reload: f64,
    /// Shared tier: scale a model to zero after this idle (idleFor), a
    /// duration; never when not given.
    #[arg(long, value_name = "DURATION", value_parser = seconds)]
    zero_after: Option<u64>,
    /// Shared tier: physical GPUs the models share (model i on GPU i mod N).
    #[arg(long, value_name = "GPUS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    shared_gpus: u32,
    /// VRAM of one shared GPU: a size (e.g. 80GiB).
    #[arg(long, value_name = "SIZE", default_value = "80GiB", value_parser = sleep::gib)]
    gpu_vram: f64,
    /// VRAM an awake model holds: a size.
    #[arg(long, value_name = "SIZE", default_value = "24GiB", value_parser = sleep::gib)]
    awake_vram: f64,
    /// VRAM a sleeping model still holds: a size.
    #[arg(long, value_name = "SIZE", default_value = "2.4GiB", value_parser = sleep::gib)]
    asleep_vram: f64,
}

fn tier(a: &TierArgs, sync: u64, models: usize) -> Result<Tier, Error> {
    for (flag, v) in [
        ("--wake", a.wake),
        ("--sleep-time", a.sleep_time),
        ("--reload", a.reload),
    ] {
        if v > 3600.0 {
            return Err(Error::Invalid(format!("{flag} {v}: at most 1h")));
        }
    }
    let t = Tier {
        after: a.sleep_after,
        level: a.sleep_level,
        zero_after: a.zero_after,
        gpus: a.shared_gpus,
        sync,
        timing: Timing {
            wake: a.wake,
            sleep: a.sleep_time,
            reload: a.reload,
        },
        vram: Vram {
            gpu: a.gpu_vram,
            awake: a.awake_vram,
            asleep: a.asleep_vram,
        },
    };
    t.check(models).map_err(Error::Invalid)?;
    Ok(t)
}

fn fleet_models(f: &Fleet) -> Result<Vec<FleetModel>, Error> {
    if !(f.stretch.is_finite() && f.stretch > 0.0) {
        return Err(Error::Invalid(format!(
            "--stretch {}: must be > 0",
            f.stretch
        )));
    }
    let traces = f.inputs.iter().map(load).collect::<Result<Vec<_>, _>>()?;
    let models = fleet::models(&traces, f.models as usize, f.stretch);
    for m in &models {
        limits::trace(&m.arrivals).map_err(|e| Error::Invalid(format!("{}: {e}", m.name)))?;
        if m.arrivals.is_empty() {
            return Err(Error::Invalid(format!("{}: no requests kept", m.name)));
        }
    }
    Ok(models)
}

pub fn run(f: &Fleet) -> Result<(), Error> {
    let svc = service(&f.svc)?;
    let k = knobs(&svc, &f.knobs)?;
    let models = fleet_models(f)?;
    let t = tier(&f.tier, k.sync, models.len())?;
    for m in &models {
        limits::demand(&svc, &m.arrivals)
            .map_err(|e| Error::Invalid(format!("{}: {e}", m.name)))?;
    }
    let keda = fleet::keda(&svc, &models, &k, k.cooldown);
    let gpuscale = fleet::gpuscale(&svc, &models, &k, (k.idle_signal, k.idle_for))
        .unwrap_or_else(|| unreachable!("with the activator every idle signal is readable"));
    let shared = fleet::shared(&svc, &models, &t);
    print!("{}", fleet_table(&models, &keda, &gpuscale, &shared));
    if f.frontier.is_empty() {
        return Ok(());
    }
    let grid = fleet_report::Grid {
        shared: &fleet::grid(&t, models.len()),
        gpuscale: &fleet::gpuscale_grid(),
    };
    let fr = fleet_report::frontier(&svc, &models, &k, &f.frontier, &grid);
    print!(
        "\nfrontier: KEDA on dedicated GPUs against the shared sleep tier\n{}",
        frontier_table(&fr)
    );
    if let Some(path) = &f.frontier_svg {
        std::fs::write(path, fleet_svg::svg(&fr)).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}
