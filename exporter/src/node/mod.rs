//! Node economics: the facts that tell whether this GPU node could go and
//! what keeps it (docs/node-economics.md).
//!
//! - `read`: a slow timer reads the Node, its pods and their
//!   PodDisruptionBudgets (bounded lists), giving the instance and capacity
//!   type, the price (`prices`, `capacity`) and the blockers (`blockers`);
//! - `gpus`: each collection counts the GPUs allocatable, allocated (the
//!   kubelet's pod-resources, as the pod mapper reads them) and active.
//!
//! The pod mapper starts it and feeds it (`pods::node_facts`); nothing here
//! imports the pod mapper.
//!
//! Every family names its node itself and, but for the `up` signal, is
//! absent while any of it is unknown: never a zero for a failed read.

pub mod args;
pub mod blockers;
pub mod capacity;
pub mod families;
pub mod gpus;
pub mod prices;
pub mod read;

use std::sync::Arc;

use arc_swap::ArcSwap;
use tracing::{info, warn};

pub use args::NodeFactsArgs;
pub use families::FAMILIES;

use crate::metrics::{Collected, Family, Subject, flag};
use families as fam;
use read::{Read, View};
use std::collections::HashSet;

/// The latest facts, read by each collection.
pub struct NodeFacts {
    view: ArcSwap<View>,
    max_blockers: usize,
}

impl NodeFacts {
    /// Starts the reader on `rt`; `None` with `--no-node-facts`.
    pub fn start(
        args: &NodeFactsArgs,
        node: &str,
        connect: read::Connect,
        rt: &tokio::runtime::Handle,
    ) -> Option<Arc<Self>> {
        if args.no_node_facts {
            info!("node facts off (--no-node-facts)");
            return None;
        }
        let table = args.table().unwrap_or_else(|e| {
            warn!(error = %e, "node price table unreadable: no node prices");
            prices::PriceTable::default()
        });
        info!(source = %table.source, date = %table.date, interval = ?args.node_facts_interval, "node facts on");
        let facts = Arc::new(Self {
            view: ArcSwap::from_pointee(Err("not_read_yet".to_owned())),
            max_blockers: usize::from(args.node_blockers_max),
        });
        let weak = Arc::downgrade(&facts);
        rt.spawn(read::run(
            node.to_owned(),
            connect,
            table,
            args.node_facts_interval,
            move |v| {
                if let Some(f) = weak.upgrade() {
                    f.view.store(Arc::new(v));
                }
            },
        ));
        Some(facts)
    }

    /// The node's own price per hour, when the last read found one (the
    /// price of each of its GPUs is this over their number).
    pub fn node_price(&self) -> Option<f64> {
        match &**self.view.load() {
            Ok(read) => read.price.map(|p| p.usd_per_hour),
            Err(_) => None,
        }
    }

    /// This collection's families: all of them when the last read
    /// succeeded and the kubelet answered, else only the `up` signal.
    pub fn families(
        &self,
        node: &str,
        kubelet_up: bool,
        held: &HashSet<&str>,
        collected: &Collected,
    ) -> Vec<Family> {
        let view = self.view.load();
        let reason = match (&**view, kubelet_up) {
            (Err(reason), _) => reason.as_str(),
            (Ok(_), false) => "kubelet_unavailable",
            (Ok(read), true) => {
                let mut out = known(node, read, &gpus::count(held, collected), self.max_blockers);
                out.push(up(node, ""));
                return out;
            }
        };
        vec![up(node, reason)]
    }
}

fn up(node: &str, reason: &str) -> Family {
    let labels = vec![("node", node.to_owned()), ("reason", reason.to_owned())];
    Family::of(&fam::UP).with(Subject::Global, labels, flag(reason.is_empty()))
}

fn known(node: &str, read: &Read, gpus: &gpus::Counts, max_blockers: usize) -> Vec<Family> {
    let n = || ("node", node.to_owned());
    let mut counts = Family::of(&fam::GPUS);
    let states = [
        ("allocatable", Some(gpus.allocatable)),
        ("allocated", Some(gpus.allocated)),
        ("active", gpus.active),
    ];
    for (state, v) in states {
        if let Some(v) = v {
            counts.push(
                Subject::Global,
                vec![n(), ("state", state.to_owned())],
                v as f64,
            );
        }
    }
    let info = vec![
        n(),
        ("instance_type", read.instance_type.clone()),
        ("capacity_type", read.capacity.as_str().to_owned()),
    ];
    let mut out = vec![
        counts,
        Family::of(&fam::CAPACITY).with(Subject::Global, info, 1.0),
    ];
    if let Some(p) = read.price {
        let labels = vec![n(), ("source", p.source.to_owned())];
        out.push(Family::of(&fam::PRICE).with(Subject::Global, labels, p.usd_per_hour));
    }
    if let Some(p) = read.spot_price {
        out.push(Family::of(&fam::SPOT_PRICE).with(Subject::Global, vec![n()], p));
    }
    let mut named = Family::of(&fam::BLOCKER);
    for b in read.blockers.iter().take(max_blockers) {
        let labels = vec![
            n(),
            ("namespace", b.namespace.clone()),
            ("pod", b.pod.clone()),
            ("kind", b.kind.to_owned()),
            ("detail", b.detail.clone()),
        ];
        named.push(Subject::Global, labels, 1.0);
    }
    out.push(named);
    let total = read.blockers.len() as f64;
    out.push(Family::of(&fam::BLOCKERS).with(Subject::Global, vec![n()], total));
    out
}
