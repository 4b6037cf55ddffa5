//! The metrics configuration: a YAML file (`--config`) or the built-in
//! presets. Every problem in a file is reported at once, with its key path.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use yaml_serde::Value;

use crate::metric_def::{
    DEFAULT_ACTIVATION, DEFAULT_FRESHNESS, DEFAULT_NAMESPACE_LABEL, DEFAULT_WINDOW, EmptyPolicy,
    MetricDef, PodMetadata,
};
use crate::objects::ObjectKind;
use crate::presets;

/// Top-level keys of the config file.
pub const TOP_KEYS: &[&str] = &["presets", "metrics", "pod_metadata"];
/// Keys of one entry under `metrics`.
pub const METRIC_KEYS: &[&str] = &[
    "name",
    "query",
    "empty",
    "freshness",
    "window",
    "description",
    "activation",
    "objects",
    "pod_metadata",
    "namespace_label",
];
/// Placeholders a query template may use.
pub const PLACEHOLDERS: &[&str] = &[
    "matchers",
    "series_matchers",
    "pod_matchers",
    "pods",
    "namespace",
];

/// The served metrics, looked up case-insensitively.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    metrics: Vec<Arc<MetricDef>>,
    by_name: HashMap<String, usize>,
}

impl MetricsConfig {
    pub fn new(metrics: Vec<MetricDef>) -> Self {
        let metrics: Vec<Arc<MetricDef>> = metrics.into_iter().map(Arc::new).collect();
        let by_name = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| (m.name.to_ascii_lowercase(), i))
            .collect();
        Self { metrics, by_name }
    }

    /// The built-in presets only.
    pub fn presets() -> Self {
        Self::new(presets::all())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<MetricDef>> {
        self.by_name
            .get(&name.to_ascii_lowercase())
            .map(|&i| &self.metrics[i])
    }

    pub fn metrics(&self) -> &[Arc<MetricDef>] {
        &self.metrics
    }

    /// Load a config file; all problems are collected into one error.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = crate::yaml_guard::read(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            source: e,
        })?;
        Self::parse(&text).map_err(|issues| ConfigError::Invalid {
            path: path.display().to_string(),
            issues,
        })
    }

    /// Parse config text; `Err` holds every issue found.
    pub fn parse(text: &str) -> Result<Self, Vec<Issue>> {
        if let Some(line) = crate::yaml_guard::too_deep(text) {
            return Err(vec![issue(
                "",
                format!(
                    "line {line}: [ and {{ nest deeper than {} levels",
                    crate::yaml_guard::MAX_FLOW_DEPTH
                ),
            )]);
        }
        let root: Value = yaml_serde::from_str(text).map_err(|e| {
            vec![Issue {
                key: String::new(),
                message: format!("not valid YAML: {e}"),
            }]
        })?;
        let mut issues = Vec::new();
        let mut out = Vec::new();
        let Value::Mapping(map) = root else {
            return Err(vec![issue(
                "",
                "the file must be a mapping with `metrics` and/or `presets`",
            )]);
        };
        let source = map
            .get("pod_metadata")
            .map_or(Some(PodMetadata::default()), parse_source)
            .unwrap_or_else(|| {
                issues.push(source_issue("pod_metadata"));
                PodMetadata::default()
            });
        for (k, v) in &map {
            let Some(key) = k.as_str() else {
                issues.push(issue("", "keys must be strings"));
                continue;
            };
            match key {
                "presets" => parse_presets(v, source, &mut out, &mut issues),
                "metrics" => parse_metrics(v, source, &mut out, &mut issues),
                "pod_metadata" => {}
                other => issues.push(issue(
                    other,
                    format!("unknown key (expected one of {TOP_KEYS:?})"),
                )),
            }
        }
        let mut seen: HashMap<String, ()> = HashMap::new();
        for m in &out {
            if seen.insert(m.name.to_ascii_lowercase(), ()).is_some() {
                issues.push(issue(
                    &format!("metrics[name={}]", m.name),
                    "duplicate metric name (names match case-insensitively)",
                ));
            }
        }
        if out.is_empty() && issues.is_empty() {
            issues.push(issue("", "no metrics configured"));
        }
        if issues.is_empty() {
            Ok(Self::new(out))
        } else {
            Err(issues)
        }
    }
}

fn parse_source(v: &Value) -> Option<PodMetadata> {
    v.as_str().and_then(PodMetadata::parse)
}

fn source_issue(at: &str) -> Issue {
    issue(at, source_message())
}

fn source_message() -> String {
    format!("expected one of {:?}", PodMetadata::NAMES)
}

fn parse_presets(
    v: &Value,
    source: PodMetadata,
    out: &mut Vec<MetricDef>,
    issues: &mut Vec<Issue>,
) {
    let with_source = |mut m: MetricDef| {
        m.pod_metadata = source;
        m
    };
    match v {
        Value::String(s) if s == "all" => out.extend(presets::all().into_iter().map(with_source)),
        Value::Sequence(seq) => {
            for (i, item) in seq.iter().enumerate() {
                match item.as_str().and_then(presets::get) {
                    Some(m) => out.push(with_source(m)),
                    None => issues.push(issue(
                        &format!("presets[{i}]"),
                        format!("unknown preset {item:?} (known: {:?})", presets::NAMES),
                    )),
                }
            }
        }
        _ => issues.push(issue("presets", "expected `all` or a list of preset names")),
    }
}

fn parse_metrics(
    v: &Value,
    source: PodMetadata,
    out: &mut Vec<MetricDef>,
    issues: &mut Vec<Issue>,
) {
    let Value::Sequence(seq) = v else {
        issues.push(issue("metrics", "expected a list"));
        return;
    };
    for (i, item) in seq.iter().enumerate() {
        let before = issues.len();
        if let Some(def) = parse_metric(i, item, source, issues)
            && issues.len() == before
        {
            out.push(def);
        }
    }
}

/// One entry under `metrics`; `None` when it is not even a mapping.
fn parse_metric(
    i: usize,
    item: &Value,
    source: PodMetadata,
    issues: &mut Vec<Issue>,
) -> Option<MetricDef> {
    let at = |k: &str| format!("metrics[{i}].{k}");
    let Value::Mapping(m) = item else {
        issues.push(issue(&format!("metrics[{i}]"), "expected a mapping"));
        return None;
    };
    let mut entry = Entry::new(source);
    for (k, v) in m {
        let key = k.as_str().unwrap_or("?");
        if let Err(message) = entry.set(key, v, &at(key), issues) {
            issues.push(issue(&at(key), message));
        }
    }
    if !entry.has_name {
        issues.push(issue(&at("name"), "missing"));
    }
    if !entry.has_query && entry.def.objects.is_empty() {
        issues.push(issue(&at("query"), "missing (or give `objects`)"));
    }
    if let Some(message) = namespace_label_problem(&entry.def) {
        issues.push(issue(&at("namespace_label"), message));
    }
    Some(entry.def)
}

/// A `metrics` entry as read so far.
struct Entry {
    def: MetricDef,
    has_name: bool,
    has_query: bool,
}

impl Entry {
    fn new(source: PodMetadata) -> Self {
        let def = MetricDef {
            name: String::new(),
            query: String::new(),
            empty: EmptyPolicy::Error,
            freshness: DEFAULT_FRESHNESS,
            window: DEFAULT_WINDOW,
            description: String::new(),
            activation: DEFAULT_ACTIVATION,
            objects: BTreeMap::new(),
            pod_metadata: source,
            namespace_label: DEFAULT_NAMESPACE_LABEL.into(),
        };
        Self {
            def,
            has_name: false,
            has_query: false,
        }
    }

    /// Read one key at `at`; `Err` is what is wrong with its value (template
    /// and object problems go to `issues` directly, there may be several).
    fn set(
        &mut self,
        key: &str,
        v: &Value,
        at: &str,
        issues: &mut Vec<Issue>,
    ) -> Result<(), String> {
        let text = || v.as_str().map(str::to_string);
        let d = &mut self.def;
        match key {
            "name" => {
                d.name = text()
                    .filter(|s| valid_name(s))
                    .ok_or("expected a name of [a-zA-Z0-9_.-], 1-253 characters")?;
                self.has_name = true;
            }
            "query" => {
                let s = text().ok_or("expected a PromQL template string")?;
                check_template(&s, at, issues);
                d.query = s;
                self.has_query = true;
            }
            "empty" => {
                d.empty = match text().as_deref() {
                    Some("error") => EmptyPolicy::Error,
                    Some("zero") => EmptyPolicy::Zero,
                    _ => return Err("expected `error` or `zero`".into()),
                }
            }
            "freshness" => d.freshness = duration(v)?,
            "window" => d.window = duration(v)?,
            "activation" => {
                d.activation = v
                    .as_f64()
                    .filter(|a| a.is_finite())
                    .ok_or("expected a number (active when the value is above it)")?;
            }
            "description" => d.description = text().ok_or("expected a string")?,
            "objects" => parse_objects(v, at, &mut d.objects, issues),
            "pod_metadata" => d.pod_metadata = parse_source(v).ok_or_else(source_message)?,
            "namespace_label" => {
                d.namespace_label = text()
                    .filter(|l| crate::selector::is_prom_label(l) && !l.starts_with("__"))
                    .ok_or("expected a Prometheus label name (not starting with `__`)")?;
            }
            _ => return Err(format!("unknown key (expected one of {METRIC_KEYS:?})")),
        }
        Ok(())
    }
}

/// A namespace label other than `namespace` is for a holder's own series
/// read with `${matchers}` alone: the pod join and the per-object queries
/// match on `namespace` itself.
fn namespace_label_problem(def: &MetricDef) -> Option<&'static str> {
    if def.namespace_label == DEFAULT_NAMESPACE_LABEL {
        None
    } else if def.joins() || def.query.contains("${series_matchers}") {
        Some(
            "a namespace label other than `namespace` works with `${matchers}` only, not with the pod join",
        )
    } else if !def.objects.is_empty() {
        Some("a namespace label other than `namespace` is for external metrics only, not `objects`")
    } else {
        None
    }
}

/// `freshness` and `window`: a duration above zero.
fn duration(v: &Value) -> Result<std::time::Duration, String> {
    v.as_str()
        .and_then(|s| gpuscale_util::duration::parse(s).ok())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| "expected a duration such as 500ms, 30s, 2m, 1h".into())
}

/// `objects: {pods: <template>, services: <template>}`.
fn parse_objects(
    v: &Value,
    at: &str,
    out: &mut BTreeMap<ObjectKind, String>,
    issues: &mut Vec<Issue>,
) {
    let Value::Mapping(m) = v else {
        issues.push(issue(at, "expected a mapping of object kind to query"));
        return;
    };
    for (k, q) in m {
        let key = k.as_str().unwrap_or("?");
        let at = format!("{at}.{key}");
        let Some(kind) = ObjectKind::from_resource(key) else {
            let known: Vec<&str> = ObjectKind::ALL.iter().map(|k| k.resource()).collect();
            issues.push(issue(
                &at,
                format!("unknown object kind (known: {known:?})"),
            ));
            continue;
        };
        match q.as_str() {
            Some(q) => {
                check_template(q, &at, issues);
                out.insert(kind, q.to_string());
            }
            None => issues.push(issue(&at, "expected a PromQL template string")),
        }
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Problems of a query template given outside the config file (a
/// `ScaleToZeroPolicy`'s `query`), by the same rules as [`check_template`].
pub fn template_problems(t: &str) -> Vec<String> {
    let mut issues = Vec::new();
    check_template(t, "query", &mut issues);
    issues.into_iter().map(|i| i.message).collect()
}

/// A template must apply the whole selector, namespace first: `${matchers}`,
/// or `${series_matchers}` together with `${pods}` or `${pod_matchers}` (so
/// no requirement is silently dropped); and use no other placeholder than
/// those in [`PLACEHOLDERS`].
fn check_template(t: &str, at: &str, issues: &mut Vec<Issue>) {
    let mut rest = t;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let name = &after[..end];
                if !PLACEHOLDERS.contains(&name) {
                    issues.push(issue(
                        at,
                        format!("unknown placeholder ${{{name}}} (known: {PLACEHOLDERS:?})"),
                    ));
                }
                rest = &after[end + 1..];
            }
            None => {
                issues.push(issue(at, "unterminated placeholder `${`"));
                break;
            }
        }
    }
    let has = |p: &str| t.contains(&format!("${{{p}}}"));
    let joined = has("series_matchers") && (has("pods") || has("pod_matchers"));
    if !has("matchers") && !joined {
        issues.push(issue(
            at,
            "the template must use ${matchers}, or ${series_matchers} with ${pods} (or ${pod_matchers}): they enforce the request's namespace and apply its whole selector",
        ));
    }
}

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub key: String,
    pub message: String,
}

fn issue(key: &str, message: impl Into<String>) -> Issue {
    Issue {
        key: key.to_string(),
        message: message.into(),
    }
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {} problem(s):{}", issues.len(), issues.iter().map(|i| format!("\n  {path}: {}: {}", if i.key.is_empty() { "(top)" } else { &i.key }, i.message)).collect::<String>())]
    Invalid { path: String, issues: Vec<Issue> },
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::prometheus::join::render;
    use crate::selector::parse;

    #[test]
    fn a_metric_may_pin_the_namespace_on_its_own_label() {
        let c = MetricsConfig::parse(
            "metrics:\n  - name: held\n    query: sum(held{${matchers}})\n    namespace_label: route_namespace\n",
        )
        .unwrap();
        let m = c.get("held").unwrap();
        assert_eq!(m.namespace_label, "route_namespace");
        assert_eq!(
            render(m, "ns", &parse("route_name=a").unwrap()).unwrap(),
            r#"sum(held{route_namespace="ns",route_name="a"})"#
        );
        let plain =
            MetricsConfig::parse("metrics:\n  - name: a\n    query: x{${matchers}}\n").unwrap();
        assert_eq!(plain.get("a").unwrap().namespace_label, "namespace");
    }

    #[test]
    fn a_namespace_label_is_checked() {
        let issues = MetricsConfig::parse(
            "metrics:\n  - name: a\n    query: x{${matchers}}\n    namespace_label: route-ns\n  - name: b\n    query: x{${matchers}}\n    namespace_label: __name__\n  - name: c\n    query: sum(q{${series_matchers}} * on (namespace, pod) group_left () ${pods})\n    namespace_label: ns\n  - name: d\n    query: x{${matchers}}\n    namespace_label: ns\n    objects:\n      pods: sum by (namespace, pod) (x{${matchers}})\n",
        )
        .unwrap_err();
        let at: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            at,
            [
                "metrics[0].namespace_label",
                "metrics[1].namespace_label",
                "metrics[2].namespace_label",
                "metrics[3].namespace_label"
            ],
            "{issues:?}"
        );
        assert!(issues[2].message.contains("pod join"), "{issues:?}");
        assert!(issues[3].message.contains("objects"), "{issues:?}");
    }

    #[test]
    fn a_valid_file_with_presets_and_custom_metrics() {
        let c = MetricsConfig::parse(
            "presets: [gpu_pressure]\nmetrics:\n  - name: Jobs_Waiting\n    query: sum(jobs{${matchers}})\n    empty: zero\n    freshness: 2m\n    window: 30s\n    activation: 2.5\n",
        )
        .unwrap();
        let m = c.get("jobs_waiting").unwrap();
        assert_eq!(m.empty, EmptyPolicy::Zero);
        assert_eq!(m.freshness, Duration::from_secs(120));
        assert_eq!(m.window, Duration::from_secs(30));
        assert_eq!(m.activation, 2.5);
        assert_eq!(c.get("GPU_PRESSURE").unwrap().activation, 0.0);
        assert_eq!(render(m, "ns", &[]).unwrap(), "sum(jobs{namespace=\"ns\"})");
    }

    #[test]
    fn pod_metadata_is_chosen_per_file_and_per_metric() {
        let c = MetricsConfig::parse(
            "pod_metadata: kube-state-metrics\npresets: [vllm_queue_depth]\nmetrics:\n  - name: gw\n    query: sum(q{${series_matchers}} * on (namespace, pod) group_left () ${pods})\n  - name: own\n    query: sum(q{${series_matchers}} * on (namespace, pod) group_left () ${pods})\n    pod_metadata: exporter\n",
        )
        .unwrap();
        let source = |n: &str| c.get(n).unwrap().pod_metadata;
        assert_eq!(source("vllm_queue_depth"), PodMetadata::KubeStateMetrics);
        assert_eq!(source("gw"), PodMetadata::KubeStateMetrics);
        assert_eq!(source("own"), PodMetadata::Exporter);
        let own = c.get("own").unwrap();
        let q = render(own, "ns", &parse("workload=chat,model=m").unwrap()).unwrap();
        assert_eq!(
            q,
            r#"sum(q{namespace="ns",model="m"} * on (namespace, pod) group_left () (group by (namespace, pod) (gpu_pod_info{namespace="ns",workload="chat"})))"#
        );
    }

    #[test]
    fn a_split_template_must_apply_both_halves() {
        for (query, ok) in [
            ("x{${matchers}}", true),
            ("x{${series_matchers}} * on (namespace, pod) ${pods}", true),
            (
                "x{${series_matchers}} * on (namespace, pod) gpu_pod_info{${pod_matchers}}",
                true,
            ),
            ("x{${series_matchers}}", false),
            ("x * on (namespace, pod) ${pods}", false),
        ] {
            let text = format!("metrics:\n  - name: a\n    query: '{query}'\n");
            assert_eq!(MetricsConfig::parse(&text).is_ok(), ok, "{query}");
        }
        let issues = MetricsConfig::parse("pod_metadata: ksm\nmetrics:\n  - name: a\n    query: x{${matchers}}\n    pod_metadata: 1\n").unwrap_err();
        let keys: Vec<_> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["pod_metadata", "metrics[0].pod_metadata"]);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let issues = MetricsConfig::parse(
            "presets: [nope]\nextra: 1\nmetrics:\n  - name: a\n    query: up{job=\"x\"}\n    emtpy: zero\n  - name: b\n    query: x{${matchers},${pod}}\n    freshness: 3x\n    empty: maybe\n    activation: some\n",
        )
        .unwrap_err();
        let keys: Vec<_> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "presets[0]",
                "extra",
                "metrics[0].query",
                "metrics[0].emtpy",
                "metrics[1].query",
                "metrics[1].freshness",
                "metrics[1].empty",
                "metrics[1].activation",
            ],
            "{issues:#?}"
        );
    }

    #[test]
    fn objects_are_per_kind_templates() {
        let c = MetricsConfig::parse(
            "metrics:\n  - name: gateway_pending\n    objects:\n      services: sum by (namespace, service) (pending{${matchers}})\n",
        )
        .unwrap();
        let m = c.get("gateway_pending").unwrap();
        assert!(!m.external());
        assert!(m.objects.contains_key(&ObjectKind::Services));
        let issues = MetricsConfig::parse(
            "metrics:\n  - name: a\n    objects:\n      nodes: x{${matchers}}\n      pods: y\n  - name: b\n",
        )
        .unwrap_err();
        let keys: Vec<_> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "metrics[0].objects.nodes",
                "metrics[0].objects.pods",
                "metrics[1].query"
            ]
        );
    }
}
