//! The Dockerfile, checked statically (no container engine needed): pinned
//! bases, the stages build → certs → final, a final image of binaries and CA
//! certificates run as a non-root user, and no secrets in the build context.

use gpuscale_lint::repo_root;

/// A Dockerfile build stage: its base image (`ARG`s resolved), its name
/// (`final` for the unnamed last one) and its instructions.
struct Stage {
    image: String,
    name: String,
    body: Vec<String>,
}

/// The Dockerfile: its text, its instructions with their continuation lines
/// joined, and its stages.
struct Dockerfile {
    text: String,
    lines: Vec<String>,
    stages: Vec<Stage>,
}

impl Dockerfile {
    fn read() -> Self {
        let text = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile");
        let lines: Vec<String> = text
            .replace("\\\n", " ")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        let args: std::collections::HashMap<&str, &str> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("ARG "))
            .filter_map(|a| a.split_once('='))
            .collect();
        let mut stages: Vec<Stage> = Vec::new();
        for l in &lines {
            if let Some(from) = l.strip_prefix("FROM ") {
                let mut words = from.split_whitespace();
                let image = words.next().expect("FROM image");
                let image = image
                    .strip_prefix("${")
                    .and_then(|v| v.strip_suffix('}'))
                    .map_or(image, |v| args[v]);
                let name = words.nth(1).unwrap_or("final").to_string();
                stages.push(Stage {
                    image: image.to_string(),
                    name,
                    body: Vec::new(),
                });
            } else if let Some(stage) = stages.last_mut() {
                stage.body.push(l.clone());
            }
        }
        Self {
            text,
            lines,
            stages,
        }
    }

    /// The build stage's instructions, one a line.
    fn build(&self) -> String {
        self.stages[0].body.join("\n")
    }
}

/// The Dockerfile, checked statically (no container engine needed): pinned
/// bases, and the stages build → certs → final.
#[test]
fn the_dockerfile_pins_its_base_images() {
    let docker = Dockerfile::read();
    for stage in &docker.stages {
        let image = &stage.image;
        let tag = image.rsplit_once([':', '@']).map_or("", |(_, t)| t);
        assert!(
            tag.chars().any(|c| c.is_ascii_digit()) && !tag.contains("latest"),
            "base image {image} is not pinned to a version"
        );
    }
    assert_eq!(
        docker
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["build", "certs", "final"]
    );
}

/// Only binaries the build stage makes and CA certificates are copied into
/// the final stage, which runs nothing.
#[test]
fn the_final_image_holds_only_binaries_and_ca_certificates() {
    let docker = Dockerfile::read();
    let build = docker.build();
    for l in &docker.stages[2].body {
        let op = l.split_whitespace().next().unwrap_or("");
        assert!(
            [
                "ARG",
                "LABEL",
                "COPY",
                "USER",
                "EXPOSE",
                "ENTRYPOINT",
                "CMD"
            ]
            .contains(&op),
            "final stage runs or adds more than binaries and CA certificates: {l}"
        );
        if op == "COPY" {
            let parts: Vec<&str> = l.split_whitespace().collect();
            let src = parts[2];
            assert!(
                parts[1].starts_with("--from="),
                "{l}: copies from the context"
            );
            if parts[1] == "--from=build" {
                let dir = src.trim_end_matches(|c| c != '/').trim_end_matches('/');
                assert!(build.contains(dir), "{src} is not made by the build stage");
            } else {
                assert_eq!(src, "/etc/ssl/certs/ca-certificates.crt");
            }
        }
    }
}

/// The image runs as a numeric non-root user and carries the OCI labels.
#[test]
fn the_image_runs_as_a_non_root_user_with_oci_labels() {
    let docker = Dockerfile::read();
    let user = docker.stages[2]
        .body
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("USER");
    let uid: u32 = user
        .split(':')
        .next()
        .expect("uid")
        .parse()
        .expect("numeric uid");
    assert_ne!(uid, 0, "the image's default user is not root");
    for key in ["title", "source", "version", "revision", "licenses"] {
        assert!(
            docker
                .text
                .contains(&format!("org.opencontainers.image.{key}=")),
            "OCI label {key}"
        );
    }
}

/// No secrets in the Dockerfile; the build stage builds the three binaries
/// and no simulator, every package it names exists, and the context leaves
/// out build output, history and key material.
#[test]
fn the_build_context_holds_no_secrets() {
    let docker = Dockerfile::read();
    for l in &docker.lines {
        let upper = l.to_uppercase();
        if upper.starts_with("ENV ") || upper.starts_with("ARG ") {
            for word in ["PASSWORD", "TOKEN", "SECRET", "API_KEY"] {
                assert!(!upper.contains(word), "secret in the Dockerfile: {l}");
            }
        }
    }
    let build = docker.build();
    for pkg in [
        "gpuscale-exporter",
        "gpuscale-adapter",
        "gpuscale-activator",
    ] {
        assert!(build.contains(&format!("-p {pkg}")), "{pkg}");
    }
    // The image carries no simulator (the exporter's `simulate` feature off).
    assert!(
        !build.contains("-p gpuscale-nvml-sim") && build.contains("--no-default-features"),
        "the image builds the NVML simulator:\n{build}"
    );
    for dir in ["exporter", "adapter", "nvml-sim", "tests"] {
        assert!(repo_root().join(dir).join("Cargo.toml").exists(), "{dir}");
    }
    let ignore = std::fs::read_to_string(repo_root().join(".dockerignore")).expect(".dockerignore");
    for pattern in ["target", ".git", "**/*.key", "**/*.pem"] {
        assert!(
            ignore.lines().any(|l| l.trim() == pattern),
            ".dockerignore lacks {pattern}"
        );
    }
}
