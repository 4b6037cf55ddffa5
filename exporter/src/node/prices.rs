//! The node's price per hour: a table of instance types (built in,
//! `exporter/data/node-prices.yaml`, with its source and date; extended or
//! replaced entry by entry by `--node-price-file` of the same format, which
//! may also price single nodes under `nodes:`), overridden per node by the
//! `gpuscale.dev/price-usd-per-hour` annotation or label.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use super::capacity::Capacity;

const BUILT_IN: &str = include_str!("../../data/node-prices.yaml");

/// The annotation (or label) that prices one node, USD per hour.
pub const OVERRIDE_KEY: &str = "gpuscale.dev/price-usd-per-hour";

/// One instance type's prices.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypePrice {
    #[serde(default)]
    pub gpus: Option<u32>,
    pub on_demand_usd_per_hour: f64,
    #[serde(default)]
    pub spot_usd_per_hour: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    #[serde(default)]
    source: String,
    #[serde(default)]
    date: String,
    #[serde(default)]
    types: BTreeMap<String, TypePrice>,
    #[serde(default)]
    nodes: BTreeMap<String, f64>,
}

/// The table in use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    pub source: String,
    pub date: String,
    pub types: BTreeMap<String, TypePrice>,
    /// Node name → price (files only).
    pub nodes: BTreeMap<String, f64>,
    /// Types the file set (their `source` label is `file`).
    from_file: BTreeSet<String>,
}

/// A node's price and where it came from (the `source` label).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodePrice {
    pub usd_per_hour: f64,
    pub source: &'static str,
}

fn check(what: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!(
            "{what}: {v} is not a price (a finite number of USD per hour, ≥ 0)"
        ))
    }
}

fn parse(what: &str, text: &str) -> Result<TableFile, String> {
    let t: TableFile = yaml_serde::from_str(text).map_err(|e| format!("{what}: {e}"))?;
    for (name, p) in &t.types {
        check(
            &format!("{what}: {name} on_demand_usd_per_hour"),
            p.on_demand_usd_per_hour,
        )?;
        if let Some(s) = p.spot_usd_per_hour {
            check(&format!("{what}: {name} spot_usd_per_hour"), s)?;
        }
    }
    for (node, p) in &t.nodes {
        check(&format!("{what}: node {node}"), *p)?;
    }
    Ok(t)
}

impl PriceTable {
    /// The built-in table.
    pub fn built_in() -> Result<Self, String> {
        let t = parse("built-in node-prices.yaml", BUILT_IN)?;
        Ok(Self {
            source: t.source,
            date: t.date,
            types: t.types,
            nodes: t.nodes,
            from_file: BTreeSet::new(),
        })
    }

    /// The built-in table with `path`'s entries over it.
    pub fn load(path: Option<&Path>) -> Result<Self, String> {
        let mut table = Self::built_in()?;
        let Some(path) = path else {
            return Ok(table);
        };
        let what = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{what}: {e}"))?;
        let file = parse(&what, &text)?;
        if !file.source.is_empty() {
            table.source = file.source;
            table.date = file.date;
        }
        for (name, p) in file.types {
            table.from_file.insert(name.clone());
            table.types.insert(name, p);
        }
        table.nodes.extend(file.nodes);
        Ok(table)
    }

    /// The Spot price of an instance type, if the table has one.
    pub fn spot(&self, instance_type: &str) -> Option<f64> {
        self.types.get(instance_type)?.spot_usd_per_hour
    }

    /// The node's price at its capacity type: its annotation, its label,
    /// the file's `nodes:`, then its instance type. `Err` for an override
    /// that is no price (the node then has none: never a guessed one).
    pub fn node_price(&self, node: &NodeKeys<'_>) -> Result<Option<NodePrice>, String> {
        for (source, map) in [("annotation", node.annotations), ("label", node.labels)] {
            if let Some(v) = map.get(OVERRIDE_KEY) {
                let p = v
                    .trim()
                    .parse::<f64>()
                    .map_err(|e| format!("{source} {OVERRIDE_KEY}={v:?}: {e}"))
                    .and_then(|p| check(&format!("{source} {OVERRIDE_KEY}"), p))?;
                return Ok(Some(NodePrice {
                    usd_per_hour: p,
                    source,
                }));
            }
        }
        if let Some(p) = self.nodes.get(node.name) {
            return Ok(Some(NodePrice {
                usd_per_hour: *p,
                source: "file_node",
            }));
        }
        let Some(t) = self.types.get(node.instance_type) else {
            return Ok(None);
        };
        let source = if self.from_file.contains(node.instance_type) {
            "file"
        } else {
            "table"
        };
        let price = match node.capacity {
            Capacity::Spot => t.spot_usd_per_hour,
            _ => Some(t.on_demand_usd_per_hour),
        };
        Ok(price.map(|usd_per_hour| NodePrice {
            usd_per_hour,
            source,
        }))
    }
}

/// What of a Node its price depends on.
pub struct NodeKeys<'a> {
    pub name: &'a str,
    pub instance_type: &'a str,
    pub capacity: Capacity,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<'a>(
        it: &'a str,
        capacity: Capacity,
        labels: &'a BTreeMap<String, String>,
        annotations: &'a BTreeMap<String, String>,
    ) -> NodeKeys<'a> {
        NodeKeys {
            name: "n1",
            instance_type: it,
            capacity,
            labels,
            annotations,
        }
    }

    #[test]
    fn the_built_in_table_loads_with_its_source_and_date() {
        let t = PriceTable::built_in().expect("built-in table");
        assert!(!t.source.is_empty() && !t.date.is_empty());
        let p5 = &t.types["p5.48xlarge"];
        assert!(
            p5.spot_usd_per_hour
                .is_some_and(|s| s < p5.on_demand_usd_per_hour)
        );
    }

    #[test]
    fn spot_nodes_get_the_spot_price_and_overrides_win() {
        let t = PriceTable::built_in().expect("built-in table");
        let none = BTreeMap::new();
        let spot = t.node_price(&keys("p5.48xlarge", Capacity::Spot, &none, &none));
        assert_eq!(
            spot,
            Ok(Some(NodePrice {
                usd_per_hour: 22.02,
                source: "table"
            }))
        );
        let od = t.node_price(&keys("p5.48xlarge", Capacity::Unknown, &none, &none));
        assert_eq!(
            od,
            Ok(Some(NodePrice {
                usd_per_hour: 55.04,
                source: "table"
            }))
        );
        let label = BTreeMap::from([(OVERRIDE_KEY.to_owned(), "30".to_owned())]);
        let ann = BTreeMap::from([(OVERRIDE_KEY.to_owned(), "12.5".to_owned())]);
        let p = t.node_price(&keys("p5.48xlarge", Capacity::Spot, &label, &ann));
        assert_eq!(
            p,
            Ok(Some(NodePrice {
                usd_per_hour: 12.5,
                source: "annotation"
            }))
        );
        let p = t.node_price(&keys("unknown.type", Capacity::Spot, &label, &none));
        assert_eq!(
            p,
            Ok(Some(NodePrice {
                usd_per_hour: 30.0,
                source: "label"
            }))
        );
        assert_eq!(
            t.node_price(&keys("unknown.type", Capacity::Spot, &none, &none)),
            Ok(None)
        );
        let bad = BTreeMap::from([(OVERRIDE_KEY.to_owned(), "cheap".to_owned())]);
        let e = t.node_price(&keys("p5.48xlarge", Capacity::Spot, &none, &bad));
        assert!(e.is_err_and(|e| e.contains(OVERRIDE_KEY)));
    }

    #[test]
    fn a_file_extends_the_table_and_prices_single_nodes() {
        let dir = tempfile_dir();
        let path = dir.join("prices.yaml");
        std::fs::write(
            &path,
            "source: our contract\ndate: 2026-01\ntypes:\n  p5.48xlarge: { on_demand_usd_per_hour: 40 }\nnodes:\n  n1: 7\n",
        )
        .expect("write");
        let t = PriceTable::load(Some(&path)).expect("load");
        assert_eq!(t.source, "our contract");
        assert_eq!(
            t.spot("p5.48xlarge"),
            None,
            "the file's entry replaces the built-in one"
        );
        let none = BTreeMap::new();
        let p = t.node_price(&keys("p5.48xlarge", Capacity::OnDemand, &none, &none));
        assert_eq!(
            p,
            Ok(Some(NodePrice {
                usd_per_hour: 7.0,
                source: "file_node"
            }))
        );
        std::fs::write(&path, "types:\n  x: { on_demand_usd_per_hour: -1 }\n").expect("write");
        let e = PriceTable::load(Some(&path)).expect_err("negative price");
        assert!(e.contains("x on_demand_usd_per_hour"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("node-prices-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }
}
