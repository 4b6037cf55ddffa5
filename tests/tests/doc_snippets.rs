//! Every ```yaml block of `docs/` and every file of `deploy/examples/` is
//! what it claims to be: it parses; a Kubernetes object validates with
//! `kubernetes-validate --strict` (1.33 and 1.37), a `ScaleToZeroPolicy`
//! against the CRD's schema and through gpuscale's own types; gpuscale's
//! configuration (metrics config, KEDA triggers and TriggerAuthentications
//! aimed at the adapter, activator routes, simulator scenarios) goes
//! through gpuscale's own parsers, Prometheus's and Alertmanager's through
//! `promtool` and `amtool`. A block that is deliberately partial starts
//! with `# fragment`: it is only parsed (and its gpuscale triggers
//! checked), and the test lists it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuscale_adapter::config::{MetricsConfig, TOP_KEYS};
use gpuscale_adapter::keda::trigger::{KEDA_KEYS, Trigger};
use gpuscale_adapter::scale_to_zero::crd::ScaleToZeroPolicy;
use gpuscale_e2e::bins::repo_root;
use serde::Deserialize as _;
use serde_json::Value;

/// Groups of CRDs other projects own: their kinds cannot be validated
/// strictly without those CRDs, and only their gpuscale parts are ours.
const FOREIGN_GROUPS: [&str; 2] = ["keda.sh", "monitoring.coreos.com"];

/// Fields of the exporter's `--node-price-file`.
const NODE_PRICE_KEYS: [&str; 4] = ["source", "date", "types", "nodes"];

/// Fields of a kustomization (kustomize reads one with or without
/// `apiVersion` and `kind`).
const KUSTOMIZE_KEYS: [&str; 10] = [
    "resources",
    "components",
    "patches",
    "images",
    "namespace",
    "namePrefix",
    "labels",
    "configMapGenerator",
    "secretGenerator",
    "replicas",
];

/// Prometheus's `kubernetes_sd_configs` fields and roles.
const KUBERNETES_SD_KEYS: [&str; 8] = [
    "role",
    "namespaces",
    "selectors",
    "api_server",
    "kubeconfig_file",
    "attach_metadata",
    "tls_config",
    "authorization",
];
const KUBERNETES_SD_ROLES: [&str; 6] = [
    "node",
    "pod",
    "service",
    "endpoints",
    "endpointslice",
    "ingress",
];

struct Snippet {
    origin: String,
    text: String,
}

/// The ```yaml / ```yml blocks of a Markdown file, named `file:line`.
fn markdown_blocks(path: &Path, name: &str) -> Vec<Snippet> {
    let text = std::fs::read_to_string(path).expect("read doc");
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut open {
            None if line == "```yaml" || line == "```yml" => open = Some((i + 1, String::new())),
            Some((at, body)) if line == "```" => {
                out.push(Snippet {
                    origin: format!("{name}:{at}"),
                    text: std::mem::take(body),
                });
                open = None;
            }
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    assert!(open.is_none(), "{name}: a ```yaml block is never closed");
    out
}

fn files_under(dir: &Path, ext: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry"))
    {
        let p = entry.path();
        if p.is_dir() {
            out.extend(files_under(&p, ext));
        } else if p.extension().is_some_and(|e| ext.iter().any(|x| e == *x)) {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn snippets() -> Vec<Snippet> {
    let root = repo_root();
    let name = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    let mut out = Vec::new();
    for doc in files_under(&root.join("docs"), &["md"]) {
        out.extend(markdown_blocks(&doc, &name(&doc)));
    }
    for file in files_under(&root.join("deploy/examples"), &["yaml", "yml"]) {
        out.push(Snippet {
            origin: name(&file),
            text: std::fs::read_to_string(&file).expect("read example"),
        });
    }
    out
}

/// What the checks found, and the work left for the tools run once.
#[derive(Default)]
struct Checker {
    failures: Vec<String>,
    fragments: Vec<String>,
    counts: BTreeMap<&'static str, usize>,
    /// Kubernetes objects for kubernetes-validate: file → origin.
    manifests: Vec<(PathBuf, String)>,
    policies: Vec<(PathBuf, String)>,
    /// Metric names the snippets' triggers and policies use.
    used_metrics: Vec<(String, String)>,
    /// Metric names the snippets' configs define.
    defined_metrics: BTreeSet<String>,
}

impl Checker {
    fn fail(&mut self, origin: &str, why: impl std::fmt::Display) {
        self.failures.push(format!("{origin}: {why}"));
    }

    fn counted(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    fn snippet(&mut self, s: &Snippet, dir: &Path) {
        let docs: Result<Vec<Value>, _> = yaml_serde::Deserializer::from_str(&s.text)
            .map(Value::deserialize)
            .collect();
        let docs = match docs {
            Ok(d) => d,
            Err(e) => return self.fail(&s.origin, format!("not YAML: {e}")),
        };
        let fragment = s.text.trim_start().starts_with("# fragment");
        for (i, doc) in docs.iter().filter(|d| !d.is_null()).enumerate() {
            let origin = format!("{} (document {})", s.origin, i + 1);
            self.triggers(&origin, doc);
            if fragment {
                self.counted("fragments, parsed only");
                self.fragments.push(s.origin.clone());
            } else if doc.get("apiVersion").is_some() && doc.get("kind").is_some() {
                self.object(&origin, doc, dir);
            } else {
                self.configuration(&origin, doc, dir);
            }
        }
    }

    /// KEDA triggers anywhere in `v` that point at gpuscale's scaler go
    /// through the adapter's own metadata parser.
    fn triggers(&mut self, origin: &str, v: &Value) {
        match v {
            Value::Array(items) => items.iter().for_each(|i| self.triggers(origin, i)),
            Value::Object(o) => {
                let external = matches!(
                    o.get("type").and_then(Value::as_str),
                    Some("external" | "external-push")
                );
                let ours = v["metadata"]["scalerAddress"]
                    .as_str()
                    .is_some_and(|a| a.contains("gpuscale"));
                if external && ours {
                    self.trigger(origin, &v["metadata"]);
                }
                o.values().for_each(|i| self.triggers(origin, i));
            }
            _ => {}
        }
    }

    fn trigger(&mut self, origin: &str, metadata: &Value) {
        self.counted("KEDA triggers through the adapter's parser");
        let mut meta = std::collections::HashMap::new();
        for (k, v) in metadata.as_object().into_iter().flatten() {
            match v.as_str() {
                Some(s) => {
                    meta.insert(k.clone(), s.to_string());
                }
                None => self.fail(origin, format!("trigger metadata {k} must be a string")),
            }
        }
        match Trigger::parse(&meta) {
            Ok(t) => {
                self.selector(origin, &t.selector);
                self.used_metrics.push((origin.to_string(), t.metric));
            }
            Err(e) => self.fail(origin, e),
        }
    }

    fn selector(&mut self, origin: &str, selector: &str) {
        if let Err(e) = gpuscale_adapter::selector::parse(selector) {
            self.fail(origin, format!("labelSelector {selector:?}: {e}"));
        }
    }

    fn object(&mut self, origin: &str, o: &Value, dir: &Path) {
        let api_version = o["apiVersion"].as_str().unwrap_or_default();
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        match (group, o["kind"].as_str().unwrap_or_default()) {
            ("gpuscale.dev", "ScaleToZeroPolicy") => self.policy(origin, o, dir),
            ("keda.sh", "TriggerAuthentication") => self.trigger_authentication(origin, o),
            ("kustomize.config.k8s.io", "Kustomization") => {
                self.counted("kustomizations, parsed only (kubectl reads them, not the API)");
            }
            (g, _) if FOREIGN_GROUPS.contains(&g) => {
                self.counted("objects of other projects' CRDs, parsed");
            }
            _ => {
                if o["kind"] == "ConfigMap" && o["data"]["metrics.yaml"].is_string() {
                    let text = o["data"]["metrics.yaml"].as_str().unwrap_or_default();
                    self.metrics_config(origin, text);
                }
                self.counted("Kubernetes objects through kubernetes-validate --strict");
                let path = dir.join(format!("object-{}.yaml", self.manifests.len()));
                write_json(&path, o);
                self.manifests.push((path, origin.to_string()));
            }
        }
    }

    fn trigger_authentication(&mut self, origin: &str, o: &Value) {
        self.counted("KEDA TriggerAuthentications (parameters KEDA passes)");
        for r in o["spec"]["secretTargetRef"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let p = r["parameter"].as_str().unwrap_or_default();
            if !KEDA_KEYS.contains(&p) {
                self.fail(
                    origin,
                    format!("parameter {p:?} is not a key of KEDA's external scaler"),
                );
            }
        }
    }

    fn policy(&mut self, origin: &str, o: &Value, dir: &Path) {
        self.counted("ScaleToZeroPolicies (CRD schema and gpuscale's types)");
        let path = dir.join(format!("policy-{}.json", self.policies.len()));
        write_json(&path, o);
        self.policies.push((path, origin.to_string()));
        let p = match ScaleToZeroPolicy::deserialize(o) {
            Ok(p) => p,
            Err(e) => return self.fail(origin, format!("not a ScaleToZeroPolicy: {e}")),
        };
        let durations = [Some(&p.spec.idle.duration), p.spec.min_up_duration.as_ref()];
        for d in durations.into_iter().flatten() {
            if let Err(e) = gpuscale_util::duration::parse(d) {
                self.fail(origin, format!("duration {d:?}: {e}"));
            }
        }
        for source in [&p.spec.idle.source, &p.spec.activation.source] {
            match (&source.metric, &source.query) {
                (Some(m), None) => self.used_metrics.push((origin.to_string(), m.clone())),
                (None, Some(_)) => {}
                _ => self.fail(origin, "each rule needs exactly one of metric and query"),
            }
            self.selector(origin, source.label_selector.as_deref().unwrap_or(""));
        }
    }

    fn metrics_config(&mut self, origin: &str, text: &str) {
        self.counted("adapter metrics configs through its parser");
        match MetricsConfig::parse(text) {
            Ok(c) => self
                .defined_metrics
                .extend(c.metrics().iter().map(|m| m.name.clone())),
            Err(issues) => self.fail(origin, format!("metrics config: {issues:?}")),
        }
    }

    /// A configuration file that is not a Kubernetes object, through the
    /// parser of whoever reads it.
    fn configuration(&mut self, origin: &str, doc: &Value, dir: &Path) {
        let keys: BTreeSet<&str> = doc
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let text = yaml_serde::to_string(doc).expect("re-encode YAML");
        let file = dir.join(format!(
            "config-{}.yml",
            self.counts.values().sum::<usize>()
        ));
        std::fs::write(&file, &text).expect("write config");
        let has = |k: &str| keys.contains(k);
        if !keys.is_empty() && keys.iter().all(|k| TOP_KEYS.contains(k)) {
            self.metrics_config(origin, &text);
        } else if keys == BTreeSet::from(["routes"]) {
            self.tool(
                origin,
                "activator routes (check-config)",
                Command::new(gpuscale_e2e::bins::activator())
                    .arg("check-config")
                    .arg("--config")
                    .arg(&file),
            );
        } else if has("gpus") {
            self.counted("simulator scenarios through its parser");
            if let Err(e) = gpuscale_nvml_sim::parse(&text, origin) {
                self.fail(origin, e);
            }
        } else if has("scrape_configs") || has("rule_files") {
            self.prometheus_config(origin, doc, &file);
        } else if !keys.is_empty() && keys.iter().all(|k| KUSTOMIZE_KEYS.contains(k)) {
            self.counted("kustomizations, parsed only (kubectl reads them, not the API)");
        } else if !keys.is_empty() && keys.iter().all(|k| NODE_PRICE_KEYS.contains(k)) {
            self.counted("node price files through the exporter's parser");
            if let Err(e) = gpuscale_exporter::node::prices::PriceTable::load(Some(&file)) {
                self.fail(origin, e);
            }
        } else if has("route") && has("receivers") {
            self.tool(
                origin,
                "Alertmanager configs (amtool check-config)",
                Command::new("amtool").arg("check-config").arg(&file),
            );
        } else {
            self.fail(
                origin,
                format!("neither a Kubernetes object nor a configuration this test knows (keys {keys:?}); start a partial snippet with `# fragment`"),
            );
        }
    }

    /// `promtool check config`. Debian's Prometheus is built without
    /// Kubernetes service discovery, so each `kubernetes_sd_configs` is
    /// checked here (its keys and role) and stands in as a static target
    /// for promtool to check the rest (relabelling, intervals, TLS).
    fn prometheus_config(&mut self, origin: &str, doc: &Value, file: &Path) {
        let mut doc = doc.clone();
        let jobs = doc["scrape_configs"].as_array_mut().into_iter().flatten();
        let mut bad = Vec::new();
        for job in jobs {
            let Some(sd) = job
                .as_object_mut()
                .and_then(|j| j.remove("kubernetes_sd_configs"))
            else {
                continue;
            };
            for c in sd.as_array().into_iter().flatten() {
                let keys = c
                    .as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default();
                bad.extend(
                    keys.into_iter()
                        .filter(|k| !KUBERNETES_SD_KEYS.contains(&k.as_str())),
                );
                if !c["role"]
                    .as_str()
                    .is_some_and(|r| KUBERNETES_SD_ROLES.contains(&r))
                {
                    bad.push(format!("role {}", c["role"]));
                }
            }
            job["static_configs"] = serde_json::json!([{"targets": ["127.0.0.1:9"]}]);
        }
        if !bad.is_empty() {
            self.fail(origin, format!("kubernetes_sd_configs: unknown {bad:?}"));
        }
        std::fs::write(file, yaml_serde::to_string(&doc).expect("YAML")).expect("write config");
        self.tool(
            origin,
            "Prometheus configs (promtool check config)",
            Command::new("promtool").args(["check", "config"]).arg(file),
        );
    }

    fn tool(&mut self, origin: &str, what: &'static str, cmd: &mut Command) {
        self.counted(what);
        match cmd.output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => self.fail(
                origin,
                format!(
                    "{what}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            ),
            Err(e) => self.fail(origin, format!("{what}: cannot run {cmd:?}: {e}")),
        }
    }

    /// The checks that need every snippet seen: metric names, and the
    /// tools run once over all objects.
    fn finish(&mut self) {
        let presets: BTreeSet<String> = MetricsConfig::presets()
            .metrics()
            .iter()
            .map(|m| m.name.clone())
            .collect();
        for (origin, m) in std::mem::take(&mut self.used_metrics) {
            if !presets.contains(&m) && !self.defined_metrics.contains(&m) {
                self.fail(
                    &origin,
                    format!("metric {m:?} is neither a preset nor defined by a config snippet"),
                );
            }
        }
        let files: Vec<PathBuf> = self.manifests.iter().map(|(p, _)| p.clone()).collect();
        if let Err(e) = gpuscale_e2e::python::validate_manifests(&files) {
            let names: Vec<String> = self
                .manifests
                .iter()
                .map(|(p, o)| format!("{} = {o}", p.file_name().unwrap_or_default().display()))
                .collect();
            self.fail(
                "kubernetes-validate",
                format!("{e}\nwhere {}", names.join("\n      ")),
            );
        }
        if let Err(e) = validate_policies(&self.policies) {
            self.fail("ScaleToZeroPolicy schema", e);
        }
    }
}

fn write_json(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(v).expect("JSON")).expect("write");
}

/// Each policy against the `openAPIV3Schema` of the CRD as shipped.
fn validate_policies(policies: &[(PathBuf, String)]) -> Result<(), String> {
    let crd = repo_root().join("deploy/adapter/scaletozeropolicy-crd.yaml");
    let crd: Value =
        yaml_serde::from_str(&std::fs::read_to_string(crd).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let code = "import json, sys, jsonschema\n\
        schema = json.loads(sys.argv[1])\n\
        bad = []\n\
        for path, origin in zip(sys.argv[2::2], sys.argv[3::2]):\n    \
            for e in jsonschema.Draft4Validator(schema).iter_errors(json.load(open(path))):\n        \
                bad.append(f'{origin}: {list(e.path)}: {e.message}')\n\
        sys.exit('\\n'.join(bad) if bad else 0)\n";
    let mut cmd = gpuscale_e2e::python::command();
    cmd.arg("-c").arg(code).arg(schema.to_string());
    for (path, origin) in policies {
        cmd.arg(path).arg(origin);
    }
    let out = cmd.output().map_err(|e| format!("run python: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn every_yaml_snippet_of_the_docs_and_examples_is_what_it_claims() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Checker::default();
    let all = snippets();
    for s in &all {
        c.snippet(s, dir.path());
    }
    c.finish();
    eprintln!("{} snippets: {:?}", all.len(), c.counts);
    eprintln!("fragments (parsed only): {:?}", c.fragments);
    assert!(c.failures.is_empty(), "{}", c.failures.join("\n"));
    assert!(
        c.counts.get("KEDA triggers through the adapter's parser") >= Some(&3),
        "the docs' and examples' triggers were found: {:?}",
        c.counts
    );
}
