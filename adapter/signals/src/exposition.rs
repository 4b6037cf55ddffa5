//! Self-metric families: each described once, built in the `prometheus`
//! registry or from state at scrape, and encoded by the crate's encoder.

use prometheus::core::Desc;
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, TextEncoder};
use tracing::error;

/// A family's name, help and label keys in the order series show them.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub labels: &'static [&'static str],
}

/// The families are constants of the code (a unit test builds each), so a
/// refusal is a bug of ours, not of the input.
const VALID: &str = "self-metric families are valid";

impl Family {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Self { name, help, labels }
    }

    pub fn counter(&self) -> IntCounterVec {
        IntCounterVec::new(Opts::new(self.name, self.help), self.labels).expect(VALID)
    }

    pub fn gauge(&self) -> IntGaugeVec {
        IntGaugeVec::new(Opts::new(self.name, self.help), self.labels).expect(VALID)
    }

    pub fn histogram(&self, buckets: &[f64]) -> HistogramVec {
        let opts = HistogramOpts::new(self.name, self.help).buckets(buckets.to_vec());
        HistogramVec::new(opts, self.labels).expect(VALID)
    }

    /// What a collector that builds this family at scrape declares.
    pub fn desc(&self) -> Desc {
        let labels = self.labels.iter().map(|l| l.to_string()).collect();
        Desc::new(
            self.name.into(),
            self.help.into(),
            labels,
            Default::default(),
        )
        .expect(VALID)
    }

    /// An empty family of `kind` to fill from state at scrape time.
    pub fn snapshot(&self, kind: MetricType) -> Snapshot {
        let mut family = MetricFamily::default();
        family.set_name(self.name.into());
        family.set_help(self.help.into());
        family.set_field_type(kind);
        Snapshot {
            family,
            labels: self.labels,
        }
    }
}

/// A family built from values kept elsewhere (the poll cache's report, the
/// controller's policies) or labelled by names users choose. The crate's
/// vectors find a child by a hash of its concatenated label values, so
/// namespace `ab`, target `c` and namespace `a`, target `bc` would share
/// one series: these families hold one series per distinct label set.
pub struct Snapshot {
    family: MetricFamily,
    labels: &'static [&'static str],
}

impl Snapshot {
    /// One series: `values` in the order of the family's label keys.
    pub fn push(&mut self, values: &[&str], value: f64) {
        let label = self.labels.iter().zip(values).map(|(k, v)| {
            let mut p = LabelPair::default();
            p.set_name((*k).into());
            p.set_value((*v).into());
            p
        });
        let mut m = Metric::from_label(label.collect());
        if self.family.get_field_type() == MetricType::COUNTER {
            let mut c = Counter::default();
            c.set_value(value);
            m.set_counter(c);
        } else {
            let mut g = Gauge::default();
            g.set_value(value);
            m.set_gauge(g);
        }
        self.family.mut_metric().push(m);
    }

    pub fn done(self) -> MetricFamily {
        self.family
    }
}

/// Puts each series' labels in the order its family declares them (the
/// crate sorts them by name; the dashboards, alerts and docs show
/// `api, metric, code`).
pub fn in_declared_order(families: &mut [MetricFamily], declared: &[&Family]) {
    for f in families {
        if let Some(d) = declared.iter().find(|d| d.name == f.name()) {
            order_labels(f, d.labels);
        }
    }
}

fn order_labels(f: &mut MetricFamily, labels: &[&str]) {
    let rank = |p: &LabelPair| labels.iter().position(|l| *l == p.name());
    for m in f.mut_metric() {
        let mut pairs = m.take_label();
        pairs.sort_by_key(rank);
        m.set_label(pairs);
    }
}

/// The text exposition of `families` (no empty family: the encoder refuses
/// one), sorted by name as a registry gathers them.
pub fn encode(mut families: Vec<MetricFamily>) -> String {
    families.retain(|f| !f.get_metric().is_empty());
    families.sort_by(|a, b| a.name().cmp(b.name()));
    let mut out = String::new();
    if let Err(e) = TextEncoder::new().encode_utf8(&families, &mut out) {
        error!(error = %e, "self-metrics not encoded");
    }
    out
}

/// A family as `/metrics` serves it: what docs and the alerts and dashboard
/// tests compare their names with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyDoc {
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: String,
    pub help: String,
    /// Label keys as the first series shows them.
    pub labels: Vec<String>,
}

impl From<&MetricFamily> for FamilyDoc {
    fn from(f: &MetricFamily) -> Self {
        let first = f.get_metric().first().map(Metric::get_label);
        Self {
            name: f.name().into(),
            kind: format!("{:?}", f.get_field_type()).to_lowercase(),
            help: f.help().into(),
            labels: first
                .unwrap_or_default()
                .iter()
                .map(|l| l.name().to_string())
                .collect(),
        }
    }
}
