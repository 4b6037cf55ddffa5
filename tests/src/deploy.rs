//! The install manifests as a cluster would receive them: the Helm chart
//! rendered by Helm's own engine (the `helm_python` SDK, offline) and the
//! kustomize trees built by `kubectl kustomize`, parsed into objects.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

use crate::bins::repo_root;
use crate::python;

pub const CHART: &str = "deploy/helm/gpuscale";

/// Every kustomize tree a user can apply.
pub const KUSTOMIZATIONS: [&str; 9] = [
    "deploy",
    "deploy/exporter",
    "deploy/adapter",
    "deploy/activator",
    "deploy/prometheus",
    "deploy/dashboards",
    "deploy/overlays/provided-tls",
    "deploy/overlays/gke",
    "deploy/overlays/openshift",
];

/// Renders the chart with `values` as release `name` in `namespace`;
/// `Err` carries Helm's message (schema violations, `required` values).
pub fn helm_render(values: &Value, name: &str, namespace: &str) -> Result<String, String> {
    let code = "import helm_python, json, sys\n\
        chart = helm_python.Chart.load(sys.argv[1])\n\
        try:\n    out = chart.render(json.loads(sys.argv[2]), name=sys.argv[3], namespace=sys.argv[4])\n\
        except helm_python.HelmError as e:\n    sys.exit(str(e))\n\
        print('\\n---\\n'.join(v for k, v in sorted(out.items()) if not k.endswith('NOTES.txt')))\n";
    let out = python::command()
        .arg("-c")
        .arg(code)
        .arg(repo_root().join(CHART))
        .arg(values.to_string())
        .args([name, namespace])
        .output()
        .map_err(|e| format!("run python: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The chart's `crds/` (Helm installs them before the templates; rendering
/// leaves them out, as `helm template` does without `--include-crds`).
pub fn chart_crds() -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join(CHART).join("crds"))
        .map(|d| d.map(|e| e.expect("entry").path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("read CRD"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// `helm lint` findings of warning level or worse, for these values.
pub fn helm_lint(values: &Value) -> Vec<String> {
    let code = "import helm_python, json, sys\n\
        r = helm_python.lint(sys.argv[1], json.loads(sys.argv[2]), strict=True, namespace='gpuscale')\n\
        bad = [f\"{m['path']}: {m['error']}\" for m in r['messages'] if m['severity'] >= 2] + r['errors']\n\
        print(json.dumps(bad))\n";
    let out = python::command()
        .arg("-c")
        .arg(code)
        .arg(repo_root().join(CHART))
        .arg(values.to_string())
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "helm lint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("lint JSON")
}

/// `kubectl kustomize DIR` (relative to the repository root).
pub fn kustomize(dir: &str) -> String {
    stdout_of(
        Command::new("kubectl")
            .arg("kustomize")
            .arg(repo_root().join(dir)),
        "kubectl (with kustomize)",
    )
}

/// The standard output of `cmd`, which must succeed (else the test fails
/// with its stderr); `needs` names what it needs installed.
pub fn stdout_of(cmd: &mut Command, needs: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?} (needs {needs}): {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The objects of a multi-document YAML stream (empty documents skipped).
pub fn objects(yaml: &str) -> Vec<Value> {
    yaml_serde::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("manifest YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// `kind/namespace/name` → object.
pub fn by_key(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(|o| {
            let m = &o["metadata"];
            let key = format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap_or("?"),
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or("?")
            );
            (key, o)
        })
        .collect()
}

/// `0.0` and `0` are the same number to the API server; kustomize writes
/// whole floats as integers, so compare them as integers.
pub fn whole_numbers(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && n.is_f64()) {
                    *v = Value::from(f as i64);
                }
            }
            Value::Object(m) => m.values_mut().for_each(walk),
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// Drops what only Helm adds: release bookkeeping labels and the config
/// checksum that rolls the adapter's pods.
pub fn without_helm_bookkeeping(mut v: Value) -> Value {
    strip(&mut v);
    v
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for key in ["labels", "annotations"] {
                if let Some(Value::Object(m)) = map.get_mut(key) {
                    m.retain(|k, _| {
                        !matches!(
                            k.as_str(),
                            "app.kubernetes.io/instance"
                                | "app.kubernetes.io/version"
                                | "app.kubernetes.io/managed-by"
                                | "helm.sh/chart"
                                | "checksum/config"
                        )
                    });
                    if m.is_empty() {
                        map.remove(key);
                    }
                }
            }
            map.values_mut().for_each(strip);
        }
        Value::Array(items) => items.iter_mut().for_each(strip),
        _ => {}
    }
}

/// Writes `yaml` to `dir/name` for validators that read files.
pub fn write(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    crate::write_file(dir, name, yaml)
}
