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

/// The image the kustomize trees name (a placeholder: no image is
/// published, overlays replace it with `images:`).
pub const PLACEHOLDER_IMAGE: &str = "ghcr.io/gpuscale/gpuscale";

/// `values` naming the kustomize trees' image when they name none: the
/// chart's default repository is empty, and a render without one fails.
fn with_image(values: &Value) -> Value {
    let mut v = values.clone();
    if v.pointer("/image/repository").is_none() {
        v["image"]["repository"] = Value::from(PLACEHOLDER_IMAGE);
    }
    v
}

/// Renders the chart with `values` (and the placeholder image unless they
/// name one) as release `name` in `namespace`; `Err` carries Helm's
/// message (schema violations, `required` values).
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
        .arg(with_image(values).to_string())
        .args([name, namespace])
        .output()
        .map_err(|e| format!("run python: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `helm lint` findings of warning level or worse, for these values (and
/// the placeholder image unless they name one).
pub fn helm_lint(values: &Value) -> Vec<String> {
    let code = "import helm_python, json, sys\n\
        r = helm_python.lint(sys.argv[1], json.loads(sys.argv[2]), strict=True, namespace='gpuscale')\n\
        bad = [f\"{m['path']}: {m['error']}\" for m in r['messages'] if m['severity'] >= 2] + r['errors']\n\
        print(json.dumps(bad))\n";
    let out = python::command()
        .arg("-c")
        .arg(code)
        .arg(repo_root().join(CHART))
        .arg(with_image(values).to_string())
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
pub fn kustomize(dir: impl AsRef<Path>) -> String {
    stdout_of(
        Command::new("kubectl")
            .arg("kustomize")
            .arg(repo_root().join(dir)),
        "kubectl (with kustomize)",
    )
}

/// `kubectl kustomize` of an overlay of `base` with `components` (both
/// below the repository root), as a user's overlay composes them.
pub fn kustomize_with(base: &str, components: &[&str]) -> String {
    // kustomize refuses absolute paths: the overlay sits two levels below
    // the repository root, in target/.
    let target = repo_root().join("target");
    std::fs::create_dir_all(&target).expect("target/");
    let dir = tempfile::Builder::new()
        .prefix("kustomize-")
        .tempdir_in(&target)
        .expect("tempdir in target/");
    let up = |p: &str| format!("../../{p}");
    let components: Vec<String> = components.iter().map(|c| up(c)).collect();
    let overlay = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [{}]\ncomponents: [{}]\n",
        up(base),
        components.join(", ")
    );
    write(dir.path(), "kustomization.yaml", &overlay);
    kustomize(dir.path())
}

/// Whether Helm runs `o` as a hook (`helm.sh/hook`): hooks are no part of
/// the release and have no kustomize counterpart.
pub fn is_hook(o: &Value) -> bool {
    o["metadata"]["annotations"].get("helm.sh/hook").is_some()
}

/// A rendered chart as the kustomize trees write it: its objects by key,
/// without hooks and Helm's bookkeeping.
pub fn chart_as_kustomize(rendered: &str) -> BTreeMap<String, Value> {
    by_key(
        objects(rendered)
            .into_iter()
            .filter(|o| !is_hook(o))
            .map(without_helm_bookkeeping)
            .map(whole_numbers)
            .collect(),
    )
}

/// A kustomize build by key; its Namespace left out (Helm installs into an
/// existing namespace, `--create-namespace`).
pub fn kustomize_as_chart(built: &str) -> BTreeMap<String, Value> {
    by_key(
        objects(built)
            .into_iter()
            .filter(|o| o["kind"] != "Namespace")
            .map(whole_numbers)
            .collect(),
    )
}

/// Asserts the chart and a kustomize build hold the same objects; `what`
/// names the pair in the failure.
pub fn assert_same_objects(
    helm: &BTreeMap<String, Value>,
    kust: &BTreeMap<String, Value>,
    what: &str,
) {
    let helm_keys: Vec<_> = helm.keys().collect();
    let kust_keys: Vec<_> = kust.keys().collect();
    assert_eq!(helm_keys, kust_keys, "the same objects ({what})");
    for (key, want) in kust {
        assert_eq!(&helm[key], want, "{key} differs ({what})");
    }
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

/// Drops what only Helm adds: release bookkeeping labels, the config
/// checksum that rolls the adapter's pods, and the resource policy that
/// keeps the CRD on `helm uninstall`.
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
                                | "helm.sh/resource-policy"
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
