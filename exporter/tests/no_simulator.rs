//! The container image's exporter links no simulator: the Dockerfile builds
//! it without default features, and with the Dockerfile's own package and
//! feature flags the dependency graph holds neither the NVML simulator nor
//! the simulated cluster. Resolved by `cargo tree` (no build).

use std::path::{Path, PathBuf};
use std::process::Command;

const SIMULATORS: [&str; 3] = ["gpuscale-nvml-sim", "gpuscale-dcgm-sim", "gpuscale-sim"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The arguments of the Dockerfile's `cargo build`, continuation lines joined.
fn image_build_args() -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile"))
        .unwrap_or_else(|e| panic!("Dockerfile: {e}"));
    let joined = text.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| l.trim_start().starts_with("RUN cargo build"))
        .unwrap_or_else(|| panic!("the Dockerfile has no `RUN cargo build` line"));
    let command = line.split("&&").next().unwrap_or_default();
    command
        .split_whitespace()
        .skip(3)
        .map(str::to_owned)
        .collect()
}

/// The package names in the normal-dependency graph of `args`' packages.
fn packages(args: &[String]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(repo_root())
        .args([
            "tree", "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cargo tree: {e}"));
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_image_exporter_links_no_simulator() {
    let args = image_build_args();
    assert!(
        args.iter().any(|a| a == "--no-default-features"),
        "the Dockerfile builds the exporter with its default features (the simulator): {args:?}"
    );
    assert!(
        args.windows(2)
            .any(|w| w[0] == "-p" && w[1] == "gpuscale-exporter"),
        "the Dockerfile does not build the exporter: {args:?}"
    );
    // Flags cargo tree does not take.
    let tree_args: Vec<String> = args
        .into_iter()
        .filter(|a| !matches!(a.as_str(), "--release" | "--locked"))
        .collect();
    let image = packages(&tree_args);
    assert!(image.iter().any(|p| p == "gpuscale-exporter"), "{image:?}");
    for sim in SIMULATORS {
        assert!(
            !image.iter().any(|p| p == sim),
            "the image's build links {sim}"
        );
    }
    // The check sees the simulator where it is: in the default build.
    let default = packages(&["-p".into(), "gpuscale-exporter".into()]);
    for sim in SIMULATORS {
        assert!(
            default.iter().any(|p| p == sim),
            "the default build lacks {sim}: {default:?}"
        );
    }
}
