//! Every threshold the advisor and `alerts/rightsizing.rules.yml` use, with
//! the reason for it (docs/right-sizing.md has the sources).

/// GPU utilization (or MIG SM activity) under this is no work: the GPU is
/// idle. Same as the waste rules' `idle_replica`.
pub const IDLE: f64 = 0.05;
/// Peak VRAM at or over this share of the device or slice: memory capacity
/// is the limit (allocators fail or KV caches evict beyond it).
pub const MEMORY_CAPACITY: f64 = 0.90;
/// DRAM active at or over this (of a ~0.8 achievable peak, NVIDIA's DCGM
/// profiling guidance) with tensor activity under [`TENSOR_ACTIVE`]:
/// memory bandwidth is the limit (LLM decode).
pub const DRAM_ACTIVE: f64 = 0.50;
/// Tensor pipes active at or over this: compute bound (prefill, training).
pub const TENSOR_ACTIVE: f64 = 0.50;
/// SM active at or over this: compute bound. NVIDIA: 0.8 or more is
/// needed (not sufficient) for effective use.
pub const SM_ACTIVE: f64 = 0.80;
/// Utilization at or over this with SM active under [`SM_LOW`]: the GPU
/// looks busy to `nvidia-smi` but its SMs wait (host or input bound).
pub const BUSY_UTILIZATION: f64 = 0.50;
/// NVIDIA: SM active under 0.5 likely means ineffective use.
pub const SM_LOW: f64 = 0.50;
/// Memory a recommendation must leave free over the peak (KV-cache growth,
/// allocator fragmentation, a new model version).
pub const MEMORY_HEADROOM: f64 = 1.20;
/// Summed (or slice-scaled) SM, DRAM or utilization p95 a recommendation
/// may reach: DCGM's ~0.8 achievable DRAM peak, and room for bursts.
pub const ACTIVITY_CEILING: f64 = 0.80;
/// Less history than this gets no recommendation: a day holds one day and
/// one night.
pub const MIN_HISTORY_S: f64 = 24.0 * 3600.0;
/// A week of history covers weekdays and a weekend: high confidence.
pub const FULL_HISTORY_S: f64 = 7.0 * 24.0 * 3600.0;
/// Hours a day without work from which scale to zero is worth checking.
pub const SCALE_TO_ZERO_IDLE_HOURS: f64 = 6.0;
/// A workload using tensor cores at least this much on an FP8 GPU is not
/// moved to a GPU without FP8.
pub const FP8_TENSOR: f64 = 0.10;
/// Hours in a month (365 × 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;
/// NVML proxies (no GPM, no DCGM): memory-controller duty cycle at or over
/// this is memory-bandwidth bound (any access in a sample counts the whole
/// sample, so it reads higher than DRAM activity: 60 %, not 50 %).
pub const MEMORY_DUTY: f64 = 0.60;
/// Utilization and power over the enforced limit at or over these (duty
/// under [`MEMORY_DUTY`]): compute bound, by power.
pub const COMPUTE_UTILIZATION: f64 = 0.80;
pub const COMPUTE_POWER: f64 = 0.80;
/// Busy by utilization ([`BUSY_UTILIZATION`]) at under this power, memory
/// quiet, with PCIe traffic at or over [`HOST_PCIE`]: fed from the host.
pub const HOST_POWER: f64 = 0.50;
/// Bytes per second over PCIe, both ways together (~4 % of a PCIe 4.0 x16).
pub const HOST_PCIE: f64 = 1e9;
