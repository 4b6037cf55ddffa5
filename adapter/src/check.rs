//! `gpuscale-adapter check-prometheus`: does Prometheus hold what the configured joins
//! need? Each joined metric's server series must carry `namespace` and `pod`
//! (a PodMonitor or pod service discovery adds them), and the pod metadata
//! series of its source must exist.

use std::collections::BTreeSet;

use crate::config::MetricsConfig;
use crate::prometheus::{PromClient, QueryError};

/// Why the check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{0}")]
    Query(#[from] QueryError),
    #[error(
        "{0} problem(s) found: the joins would miss these series (see docs/adapter.md#joining-on-pod-metadata)"
    )]
    Problems(usize),
}

/// Names of the series a template reads with `${series_matchers}`.
pub fn server_series(query: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in query.match_indices("{${series_matchers}}") {
        let name: String = query[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

async fn count(client: &PromClient, promql: &str) -> Result<u64, QueryError> {
    let series = client.query(promql).await?;
    Ok(series.first().map_or(0, |s| s.value as u64))
}

/// Check every joined metric; print one line per series looked at.
pub async fn run(config: &MetricsConfig, client: &PromClient) -> Result<(), CheckError> {
    let mut problems = 0;
    let mut sources = BTreeSet::new();
    for def in config.metrics().iter().filter(|d| d.joins()) {
        sources.insert(def.pod_metadata.required_series());
        for name in server_series(&def.query) {
            let all = count(client, &format!("count({name})")).await?;
            let labelled = count(
                client,
                &format!("count({name}{{namespace!=\"\",pod!=\"\"}})"),
            )
            .await?;
            let line = if all == 0 {
                "no series yet (server not running or not scraped); nothing to check".to_string()
            } else if labelled < all {
                problems += 1;
                format!(
                    "PROBLEM: {} of {all} series lack a namespace or pod label, so the join on (namespace, pod) never counts them; keep namespace and pod as target labels (deploy/examples/)",
                    all - labelled
                )
            } else {
                format!("{all} series, all with namespace and pod")
            };
            println!("{}\t{name}\t{line}", def.name);
        }
    }
    for series in sources.into_iter().flatten() {
        let n = count(client, &format!("count({series})")).await?;
        let line = if n == 0 {
            problems += 1;
            "PROBLEM: no series, so a joined metric finds no pod (is the exporter or kube-state-metrics scraped with honorLabels?)".to_string()
        } else {
            format!("{n} series")
        };
        println!("pod metadata\t{series}\t{line}");
    }
    if problems == 0 {
        Ok(())
    } else {
        Err(CheckError::Problems(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_series_of_the_presets() {
        let c = MetricsConfig::presets();
        let names = |m: &str| server_series(&c.get(m).unwrap().query);
        assert_eq!(
            names("triton_queue_time_avg_seconds"),
            [
                "nv_inference_queue_duration_us",
                "nv_inference_request_success"
            ]
        );
        assert_eq!(
            names("vllm_ttft_p95_seconds"),
            ["vllm:time_to_first_token_seconds_bucket"]
        );
        assert!(names("gpu_pressure").is_empty());
    }
}
