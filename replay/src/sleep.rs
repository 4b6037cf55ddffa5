//! The sleep tier before zero: vLLM's sleep mode (`POST /sleep?level=N`,
//! `POST /wake_up`) frees a model's VRAM and keeps its process, so a
//! sleeping model wakes in about a second instead of a cold start. A
//! sleeping pod still holds its GPU, so the GPU-hours come back only when
//! several models share one physical GPU.
//!
//! The defaults are published figures (docs/replay.md, "The sleep tier"):
//! vLLM production-stack's sleep-mode tutorial log (5.7 s to sleep, 0.28 s
//! to wake, 39.26 GiB freed), vLLM's sleep-mode blog post (2025-10-26:
//! level-1 wakes of 0.1–6 s, level-2 wakes of 0.8–2.6 s across 0.6B to
//! 235B models) and vLLM's docs ("releasing up to 90%+ of GPU memory").

/// What a sleeping model keeps: level 1 its weights in host RAM, level 2
/// nothing (its wake reloads the weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    One,
    Two,
}

impl Level {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "1" => Ok(Self::One),
            "2" => Ok(Self::Two),
            _ => Err(format!("{s:?}: a sleep level is 1 or 2")),
        }
    }

    pub fn number(self) -> u8 {
        match self {
            Self::One => 1,
            Self::Two => 2,
        }
    }
}

/// How long sleep mode takes, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// `POST /wake_up` at level 1 to serving (weights copied back from host
    /// RAM): 0.3 s (production-stack's 0.28 s).
    pub wake: f64,
    /// `POST /sleep` to VRAM released: 5.7 s (production-stack's log; both
    /// levels, level 2 copies nothing and is likely faster).
    pub sleep: f64,
    /// A level-2 wake: the weights reloaded into a kept process, 2.6 s (the
    /// top of the blog post's level-2 range).
    pub reload: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            wake: 0.3,
            sleep: 5.7,
            reload: 2.6,
        }
    }
}

/// The VRAM of one shared GPU and of each model on it, GiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vram {
    /// The physical GPU (H100 80 GB).
    pub gpu: f64,
    /// An awake model: weights and KV cache (an 8B model in bf16, 16 GiB of
    /// weights, at `--gpu-memory-utilization 0.3`).
    pub awake: f64,
    /// A sleeping model: what sleep mode does not free (CUDA context,
    /// graphs, buffers), a tenth of the awake figure.
    pub asleep: f64,
}

impl Default for Vram {
    fn default() -> Self {
        Self {
            gpu: 80.0,
            awake: 24.0,
            asleep: 2.4,
        }
    }
}

/// One setting of the tier: the controller's `sleep` stage and zero stage,
/// and how many physical GPUs the fleet shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tier {
    /// `sleep.after`: idle seconds (nothing in flight) before sleep.
    pub after: u64,
    pub level: Level,
    /// `idleFor` of the zero stage: idle seconds before zero replicas;
    /// `None` keeps sleeping models at one replica.
    pub zero_after: Option<u64>,
    /// Physical GPUs the models share (models assigned round-robin).
    pub gpus: u32,
    /// The controller's resync, seconds: sleep and zero are decided then.
    pub sync: u64,
    pub timing: Timing,
    pub vram: Vram,
}

impl Tier {
    /// The default tier: sleep after 1 min at level 1, never to zero, one
    /// shared GPU, a 15 s sync.
    pub fn new(after: u64, level: Level, gpus: u32) -> Self {
        Self {
            after,
            level,
            zero_after: None,
            gpus,
            sync: 15,
            timing: Timing::default(),
            vram: Vram::default(),
        }
    }

    /// From asleep to serving at this level, seconds.
    pub fn wake_time(&self) -> f64 {
        match self.level {
            Level::One => self.timing.wake,
            Level::Two => self.timing.reload,
        }
    }

    /// A short name for tables: `sleep 60s L1, 1 GPU`.
    pub fn name(&self) -> String {
        let zero = self
            .zero_after
            .map_or_else(String::new, |z| format!(", zero {z}s"));
        format!(
            "sleep {}s L{}, {} GPU{}{zero}",
            self.after,
            self.level.number(),
            self.gpus,
            if self.gpus == 1 { "" } else { "s" }
        )
    }

    /// The fleet fits: every model of the fullest GPU asleep and one awake.
    pub fn check(&self, models: usize) -> Result<(), String> {
        let v = &self.vram;
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(v.gpu) && ok(v.awake) && v.asleep.is_finite() && v.asleep >= 0.0) {
            return Err(
                "--gpu-vram and --awake-vram must be more than 0 GiB, --asleep-vram 0 GiB or more"
                    .into(),
            );
        }
        if v.asleep >= v.awake {
            return Err(format!(
                "--asleep-vram {} GiB must be less than --awake-vram {} GiB: sleep frees VRAM",
                v.asleep, v.awake
            ));
        }
        if self.gpus == 0 {
            return Err("--shared-gpus must be at least 1".into());
        }
        let per_gpu = models.div_ceil(self.gpus as usize) as f64;
        let need = v.awake + (per_gpu - 1.0) * v.asleep;
        if need > v.gpu {
            return Err(format!(
                "{per_gpu} models on one {} GiB GPU do not fit with one awake: {need:.1} GiB ({} GiB awake + {} GiB per sleeping model); add --shared-gpus",
                v.gpu, v.awake, v.asleep
            ));
        }
        Ok(())
    }
}

/// A size in GiB from `24GiB`, `512MiB` or `0GiB`: a unit is required.
pub fn gib(s: &str) -> Result<f64, String> {
    let (number, per_gib) = if let Some(n) = s.strip_suffix("GiB") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("MiB") {
        (n, 1024.0)
    } else {
        return Err(format!(
            "{s:?}: a size takes a unit, GiB or MiB (e.g. 24GiB)"
        ));
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1.0e6).contains(&v) => Ok(v / per_gib),
        _ => Err(format!(
            "{s:?}: not a size from 0 to 1000000 {}",
            &s[number.len()..]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_a_unit() {
        assert_eq!(gib("24GiB"), Ok(24.0));
        assert_eq!(gib("512MiB"), Ok(0.5));
        assert!(gib("24").unwrap_err().contains("unit"));
        assert!(gib("-1GiB").is_err());
        assert!(gib("xGiB").is_err());
    }

    #[test]
    fn a_fleet_that_cannot_fit_is_refused() {
        let t = Tier::new(60, Level::One, 1);
        assert!(t.check(8).is_ok());
        // 24 + 31 × 2.4 = 98.4 GiB on an 80 GiB GPU.
        let e = t.check(32).unwrap_err();
        assert!(e.contains("--shared-gpus"), "{e}");
        assert!(Tier::new(60, Level::One, 2).check(32).is_ok());
        assert_eq!(t.wake_time(), 0.3);
        assert_eq!(Tier::new(60, Level::Two, 1).wake_time(), 2.6);
    }
}
