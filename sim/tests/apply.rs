//! Server-side apply as kube-apiserver does it, with real `kubectl`: each
//! manager owns the fields it applies, a second manager's apply that
//! changes one is refused 409 naming the owner and the field, `--force-conflicts`
//! takes it over, and a plain write's changes belong to its writer.

use std::process::{Command, Output};

use gpuscale_sim::kubeapi::{Cluster, KubeFake};
use serde_json::Value;

struct Cli {
    fake: KubeFake,
    dir: tempfile::TempDir,
}

impl Cli {
    fn new() -> Self {
        let fake = KubeFake::start_bare(Cluster::default()).expect("start");
        let dir = tempfile::tempdir().expect("tempdir");
        fake.write_kubeconfig(&dir.path().join("kubeconfig"))
            .expect("write kubeconfig");
        Self { fake, dir }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .output()
            .expect("run kubectl")
    }

    fn apply(&self, manager: &str, replicas: u32, extra: &[&str]) -> Output {
        let file = self.dir.path().join(format!("{manager}-{replicas}.yaml"));
        let manifest = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n\
             spec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    \
             metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx\n"
        );
        std::fs::write(&file, manifest).expect("manifest");
        let path = file.display().to_string();
        let mut args = vec![
            "apply",
            "--server-side",
            "--field-manager",
            manager,
            "-f",
            &path,
        ];
        args.extend(extra);
        self.run(&args)
    }

    fn deployment(&self) -> Value {
        let out = self.run(&[
            "get",
            "deployment",
            "web",
            "-n",
            "default",
            "-o",
            "json",
            "--show-managed-fields",
        ]);
        serde_json::from_slice(&out.stdout).expect("deployment JSON")
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The managers that own `.spec.replicas` now.
fn replica_owners(d: &Value) -> Vec<String> {
    d["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| !e["fieldsV1"]["f:spec"]["f:replicas"].is_null())
        .filter_map(|e| e["manager"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_second_manager_changing_an_owned_field_is_refused_409_unless_forced() {
    let cli = Cli::new();
    let first = cli.apply("team-a", 2, &[]);
    assert!(first.status.success(), "{}", text(&first));
    // The same value by another manager: shared, no conflict.
    let same = cli.apply("team-b", 2, &[]);
    assert!(same.status.success(), "{}", text(&same));

    let other = cli.apply("ci", 3, &[]);
    let err = text(&other);
    assert!(
        !other.status.success(),
        "applied over another manager: {err}"
    );
    assert!(
        err.contains("Apply failed with")
            && err.contains(r#"conflict with "team-a""#)
            && err.contains(".spec.replicas"),
        "{err}"
    );
    assert_eq!(cli.deployment()["spec"]["replicas"], 2, "nothing changed");

    let forced = cli.apply("ci", 3, &["--force-conflicts"]);
    assert!(forced.status.success(), "{}", text(&forced));
    let d = cli.deployment();
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        replica_owners(&d),
        ["ci"],
        "{}",
        d["metadata"]["managedFields"]
    );

    // A plain write owns what it changes: the next apply conflicts with it.
    let scaled = cli.run(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":5}}"#,
        "--field-manager",
        "autoscaler",
    ]);
    assert!(scaled.status.success(), "{}", text(&scaled));
    let back = cli.apply("ci", 3, &[]);
    assert!(!back.status.success());
    assert!(
        text(&back).contains(r#"conflict with "autoscaler""#),
        "{}",
        text(&back)
    );
    drop(cli.fake);
}
