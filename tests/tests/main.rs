//! gpuscale's end-to-end stories: real binaries, real Prometheus,
//! Alertmanager, VictoriaMetrics and kubectl against the simulated cluster.
//! One binary (see `Cargo.toml`); run one story file with
//! `cargo test -p gpuscale-e2e --test e2e <file>::`.

// The longest story first (libtest starts tests in name order): started
// last, it ran alone on one core while the other idled.
#[path = "walkthrough.rs"]
mod a_walkthrough;
mod activator;
mod adapter;
mod alerts;
mod batches;
mod coexistence;
mod command_lines;
mod custom_metrics;
mod dcgm;
mod dcgm_reader;
mod deploy;
mod doc_snippets;
mod doctor;
mod exporter;
mod exporter_limits;
mod fleet_profile;
mod gpu_validate;
mod hardware_state;
mod holder_presets;
mod hostile;
mod keda;
mod leader_election;
mod node_economics;
mod pods;
mod preset_stories;
mod privileges;
mod replay_prometheus;
mod scale_to_zero;
mod scale_to_zero_invalid;
mod scale_to_zero_kinds;
mod scale_to_zero_orphans;
mod scale_to_zero_ownership;
mod scale_to_zero_safety;
mod scale_to_zero_support;
mod self_tls;
mod sleep_share;
mod sleep_stage;
mod sleep_tier;
mod victoriametrics;
