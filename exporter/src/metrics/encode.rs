//! Text exposition (Prometheus 0.0.4 and OpenMetrics 1.0), written once per
//! collection; `/metrics` hands out the bytes.

use std::fmt::Write as _;

use super::{Family, Kind, PodLookup, Sample, Subject};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `text/plain; version=0.0.4`
    Text,
    /// `application/openmetrics-text; version=1.0.0`
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Renders families. `node` is added to every sample with a GPU subject.
pub fn encode(families: &[Family], node: &str, pods: &dyn PodLookup, format: Format) -> Vec<u8> {
    let mut out = String::with_capacity(capacity(families));
    write_families(&mut out, families, node, pods, format);
    finish(out, format)
}

/// A buffer size that holds the exposition of `families` without regrowing.
pub fn capacity(families: &[Family]) -> usize {
    let samples: usize = families.iter().map(|f| f.samples.len()).sum();
    families.len() * 120 + samples * 110
}

/// Appends the families to `out` (no `# EOF`: see [`finish`]).
pub fn write_families<'a>(
    out: &mut String,
    families: impl IntoIterator<Item = &'a Family>,
    node: &str,
    pods: &dyn PodLookup,
    format: Format,
) {
    for family in families {
        if family.samples.is_empty() {
            continue;
        }
        write_header(out, family, format);
        for sample in &family.samples {
            write_sample(out, family.name, sample, node, pods);
        }
    }
}

/// Closes an exposition: OpenMetrics ends with `# EOF`.
pub fn finish(mut out: String, format: Format) -> Vec<u8> {
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out.into_bytes()
}

fn write_header(out: &mut String, family: &Family, format: Format) {
    // OpenMetrics names a counter family without its `_total` suffix.
    let name = match (format, family.kind) {
        (Format::OpenMetrics, Kind::Counter) => {
            family.name.strip_suffix("_total").unwrap_or(family.name)
        }
        _ => family.name,
    };
    let kind = match family.kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
    };
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    escape_help(out, family.help);
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

fn write_sample(out: &mut String, name: &str, sample: &Sample, node: &str, pods: &dyn PodLookup) {
    out.push_str(name);
    let mut first = true;
    let mut label = |out: &mut String, key: &str, value: &str| {
        // An empty value means "no label" to Prometheus: save the bytes.
        if value.is_empty() {
            return;
        }
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(key);
        out.push_str("=\"");
        escape_value(out, value);
        out.push('"');
    };
    let mut index = itoa_buf();
    match &sample.subject {
        Subject::Global | Subject::Node => {}
        Subject::Device(d) => {
            label(out, "node", node);
            label(out, "gpu", fmt_u32(&mut index, d.index));
            label(out, "uuid", &d.uuid);
            if let Some(p) = pods.device_owner(&d.uuid) {
                for (k, v) in &p.0 {
                    label(out, k, v);
                }
            }
        }
        Subject::Mig(m) => {
            label(out, "node", node);
            label(out, "gpu", fmt_u32(&mut index, m.gpu.index));
            label(out, "uuid", &m.gpu.uuid);
            label(out, "mig_uuid", &m.mig_uuid);
            let mut gi = itoa_buf();
            label(out, "gpu_instance_id", fmt_u32(&mut gi, m.gpu_instance_id));
            if let Some(p) = pods.device_owner(&m.mig_uuid) {
                for (k, v) in &p.0 {
                    label(out, k, v);
                }
            }
        }
        Subject::Process(p) => {
            label(out, "node", node);
            label(out, "gpu", fmt_u32(&mut index, p.gpu.index));
            label(out, "uuid", &p.gpu.uuid);
            label(out, "mig_uuid", p.mig_uuid.as_deref().unwrap_or(""));
            let mut pid = itoa_buf();
            label(out, "pid", fmt_u32(&mut pid, p.pid));
            if let Some(owner) = pods.process_owner(p.pid) {
                for (k, v) in &owner.0 {
                    label(out, k, v);
                }
            }
        }
    }
    for (k, v) in &sample.labels {
        label(out, k, v);
    }
    // After the sample's own labels, as the exporter's own series always had it.
    if matches!(sample.subject, Subject::Node) {
        label(out, "node", node);
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    write_value(out, sample.value);
    out.push('\n');
}

pub(crate) fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

pub(crate) fn escape_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

pub(crate) fn escape_help(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn itoa_buf() -> String {
    String::with_capacity(10)
}

fn fmt_u32(buf: &mut String, v: u32) -> &str {
    buf.clear();
    let _ = write!(buf, "{v}");
    buf
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::{DeviceRef, NoPods, PodLabelSet};

    struct OnePod(PodLabelSet);
    impl PodLookup for OnePod {
        fn device_owner(&self, uuid: &str) -> Option<&PodLabelSet> {
            (uuid == "GPU-a").then_some(&self.0)
        }
        fn process_owner(&self, _pid: u32) -> Option<&PodLabelSet> {
            None
        }
    }

    fn dev() -> Subject {
        Subject::Device(Arc::new(DeviceRef::new(0, "GPU-a".into())))
    }

    #[test]
    fn text_and_openmetrics_shapes() {
        let fams = vec![
            Family::counter("gpu_energy_consumed_joules_total", "Energy.").with(
                dev(),
                vec![],
                12.5,
            ),
            Family::gauge("gpu_clock_hertz", "Clock \\ speed.").with(
                dev(),
                vec![("clock", "sm".into())],
                1.98e9,
            ),
        ];
        let text = String::from_utf8(encode(&fams, "n1", &NoPods, Format::Text)).unwrap();
        assert!(text.contains("# TYPE gpu_energy_consumed_joules_total counter\n"));
        assert!(text.contains(
            "gpu_energy_consumed_joules_total{node=\"n1\",gpu=\"0\",uuid=\"GPU-a\"} 12.5\n"
        ));
        assert!(text.contains("# HELP gpu_clock_hertz Clock \\\\ speed.\n"));
        assert!(text.contains(
            "gpu_clock_hertz{node=\"n1\",gpu=\"0\",uuid=\"GPU-a\",clock=\"sm\"} 1980000000\n"
        ));
        let om = String::from_utf8(encode(&fams, "n1", &NoPods, Format::OpenMetrics)).unwrap();
        assert!(om.contains("# TYPE gpu_energy_consumed_joules counter\n"));
        assert!(om.contains("gpu_energy_consumed_joules_total{"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn node_series_name_their_node_after_their_own_labels() {
        let fams = vec![
            Family::gauge("gpuscale_exporter_pods", "h").with(Subject::Node, vec![], 4.0),
            Family::gauge("gpuscale_exporter_pod_mapping_up", "h")
                .with(
                    Subject::Node,
                    vec![("reason", "socket_missing".into())],
                    0.0,
                )
                .with(Subject::Node, vec![("reason", String::new())], 1.0),
        ];
        let text = String::from_utf8(encode(&fams, "n1", &NoPods, Format::Text)).unwrap();
        assert!(
            text.contains("\ngpuscale_exporter_pods{node=\"n1\"} 4\n"),
            "{text}"
        );
        assert!(text.contains(
            "\ngpuscale_exporter_pod_mapping_up{reason=\"socket_missing\",node=\"n1\"} 0\n"
        ));
        assert!(text.contains("\ngpuscale_exporter_pod_mapping_up{node=\"n1\"} 1\n"));
    }

    #[test]
    fn pod_labels_and_escaping() {
        let pods = OnePod(PodLabelSet(vec![("namespace".into(), "a\"b\\c\nd".into())]));
        let fams = vec![Family::gauge("x", "h").with(dev(), vec![], f64::NAN)];
        let text = String::from_utf8(encode(&fams, "n", &pods, Format::Text)).unwrap();
        assert!(
            text.contains("namespace=\"a\\\"b\\\\c\\nd\"} NaN\n"),
            "{text}"
        );
    }
}
