//! The service model: the requests, what one replica can do and what it
//! costs.

/// One request: arrival (seconds since the Unix epoch) and its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    pub t: f64,
    pub input: u32,
    pub output: u32,
}

/// One inference replica (defaults: vLLM serving an 8B model on one H100).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Service {
    /// Prompt tokens per second one sequence is prefilled at.
    pub prefill_tps: f64,
    /// Tokens per second one running sequence decodes at (with the batch full).
    pub decode_tps: f64,
    /// Sequences a replica runs at once (vLLM `--max-num-seqs` as it holds
    /// in practice); further requests wait in its queue.
    pub max_seqs: u32,
    /// Replica created → Ready (image pulled, model loaded), seconds.
    pub cold_start: u32,
    pub gpus_per_replica: u32,
    pub price_per_gpu_hour: f64,
    /// Time-to-first-token SLO: p95 per minute at or under this, seconds.
    pub ttft_slo: f64,
    /// Clients give up after waiting this long for a first token (held or
    /// queued): a failed request, seconds.
    pub client_deadline: f64,
}

impl Default for Service {
    fn default() -> Self {
        Self {
            prefill_tps: 10_000.0,
            decode_tps: 40.0,
            max_seqs: 64,
            cold_start: 90,
            gpus_per_replica: 1,
            price_per_gpu_hour: 2.5,
            ttft_slo: 2.0,
            client_deadline: 60.0,
        }
    }
}

impl Service {
    /// Time to first token once a slot is free.
    pub fn prefill(&self, a: &Arrival) -> f64 {
        f64::from(a.input) / self.prefill_tps
    }

    /// How long a request holds a slot.
    pub fn occupancy(&self, a: &Arrival) -> f64 {
        self.prefill(a) + f64::from(a.output) / self.decode_tps
    }

    /// Replicas each minute's offered load needs (at least 1), one per minute.
    pub fn demand_per_minute(&self, arrivals: &[Arrival]) -> Vec<u32> {
        let Some(first) = arrivals.first() else {
            return Vec::new();
        };
        let t0 = first.t.floor();
        let mut load: Vec<f64> = Vec::new();
        for a in arrivals {
            let m = ((a.t - t0) / 60.0) as usize;
            if load.len() <= m {
                load.resize(m + 1, 0.0);
            }
            load[m] += self.occupancy(a) / 60.0;
        }
        load.iter()
            .map(|l| ((l / f64::from(self.max_seqs)).ceil() as u32).max(1))
            .collect()
    }
}
