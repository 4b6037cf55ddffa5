//! Command-line flags of the node facts (docs/exporter.md).

use std::path::Path;
use std::time::Duration;

use super::prices::PriceTable;

/// Node economics: GPUs allocated and active, price, what keeps the node.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Node facts")]
pub struct NodeFactsArgs {
    /// Do not read the node's facts (no Node, pod or PodDisruptionBudget
    /// lists; no gpu_node_* families but gpu_node_info).
    #[arg(long, env = "GPUSCALE_NO_NODE_FACTS")]
    pub no_node_facts: bool,

    /// How often the Node, its pods and their PodDisruptionBudgets are read
    /// (never per scrape).
    #[arg(long, env = "GPUSCALE_NODE_FACTS_INTERVAL", default_value = "60s", value_parser = parse_interval)]
    pub node_facts_interval: Duration,

    /// Instance-type prices over the built-in table (same format; may price
    /// single nodes under `nodes:`).
    #[arg(long, env = "GPUSCALE_NODE_PRICE_FILE", value_name = "PATH", value_parser = parse_table)]
    pub node_price_file: Option<PriceTable>,

    /// Most gpu_node_blocker series per node (gpu_node_blockers counts all).
    #[arg(long, env = "GPUSCALE_NODE_BLOCKERS_MAX", default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub node_blockers_max: u16,
}

impl NodeFactsArgs {
    /// The price table in use: the file's over the built-in one.
    pub fn table(&self) -> Result<PriceTable, String> {
        match &self.node_price_file {
            Some(t) => Ok(t.clone()),
            None => PriceTable::built_in(),
        }
    }
}

/// `--node-facts-interval`: 1s to 1h.
fn parse_interval(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s, Duration::from_secs(1), Duration::from_secs(3600))
}

fn parse_table(s: &str) -> Result<PriceTable, String> {
    PriceTable::load(Some(Path::new(s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        facts: NodeFactsArgs,
    }

    fn parse(args: &[&str]) -> Result<NodeFactsArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.facts)
    }

    #[test]
    fn defaults_and_bounds() -> Result<(), clap::Error> {
        let a = parse(&[])?;
        assert_eq!(a.node_facts_interval, Duration::from_secs(60));
        assert_eq!(a.node_blockers_max, 10);
        assert!(a.table().is_ok_and(|t| t.types.contains_key("p5.48xlarge")));
        assert!(parse(&["--node-facts-interval", "0s"]).is_err());
        assert!(parse(&["--node-blockers-max", "0"]).is_err());
        let e = parse(&["--node-price-file", "/nonexistent/prices.yaml"]).err();
        assert!(e.is_some_and(|e| e.to_string().contains("/nonexistent/prices.yaml")));
        Ok(())
    }
}
