//! Hostile sizes are refused early, with a position.

use super::*;
use crate::scenario::limits::{MAX_DEPTH, MAX_FILE_BYTES, MAX_PODS, check_text};

#[test]
fn deep_flow_nesting_is_refused_before_parsing() {
    let n = 100_000;
    let text = format!("node: {}{}\n", "[".repeat(n), "]".repeat(n));
    let e = err(&text);
    // The root mapping is one level, so the 32nd bracket passes the limit.
    assert_eq!(e.position(), Some((1, 6 + MAX_DEPTH)), "{e}");
    assert_eq!(
        e.message(),
        format!("nested deeper than {MAX_DEPTH} levels, the limit")
    );
}

#[test]
fn deep_block_nesting_is_refused() {
    let text = format!("node:\n{}x\n", "- ".repeat(100_000));
    let e = err(&text);
    assert_eq!(e.position().map(|p| p.0), Some(2), "{e}");
    assert!(e.message().starts_with("nested deeper than"), "{e}");
}

#[test]
fn brackets_in_strings_and_comments_are_not_nesting() {
    let deep = "[".repeat(2 * MAX_DEPTH);
    let text = format!(
        "# {deep}\n{GPU}pods:\n  - namespace: a\n    name: b # {deep}\n    uid: c\n    labels: {{ x: \"{deep}\", y: '{deep}' }}\n"
    );
    let e = err(&text);
    // parsed (not refused for depth); the labels are then too long
    assert_eq!(e.path(), Some("pods[0].labels.x"), "{e}");
    let literal = format!(
        "node: |\n  {deep}\n  - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -\nnode2: a{deep}\n"
    );
    assert!(check_text(&literal, "t.yaml").is_ok());
}

#[test]
fn an_oversized_file_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    // Sparse: 50 MB that cost nothing to create and are never read.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(50 << 20).unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.position(), Some((1, 1)), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}:1:1: the file is 52428800 bytes, more than the limit of {MAX_FILE_BYTES} bytes (4 MiB)",
            path.display()
        )
    );
    let text = " ".repeat(MAX_FILE_BYTES + 1);
    assert!(
        err(&text)
            .message()
            .starts_with("the file is 4194305 bytes")
    );
}

#[test]
fn too_many_pods_are_refused_at_the_first_one_over() {
    let mut text = String::from("pods:\n");
    for i in 0..=MAX_PODS {
        text.push_str(&format!("  - {{ namespace: ns, name: p{i}, uid: u{i} }}\n"));
    }
    let e = err(&text);
    assert_eq!(e.path(), Some("pods[1000]"), "{e}");
    assert_eq!(e.position(), Some((MAX_PODS + 2, 5)), "{e}");
    assert_eq!(e.message(), "more than 1000 pods, the limit");
    // exactly the limit is fine
    let at_limit = text.rsplit_once("  - ").unwrap().0;
    assert_eq!(parse(at_limit, "t.yaml").unwrap().pods.len(), MAX_PODS);
}

#[test]
fn a_megabyte_node_name_is_refused() {
    let text = format!("node: {}\n", "n".repeat(1 << 20));
    let e = err(&text);
    assert_eq!(
        e.to_string(),
        "t.yaml:1:7: node: is 1048576 bytes long, the limit is 253"
    );
}

#[test]
fn long_pod_strings_are_refused_and_echoed_short() {
    let long = "x".repeat(300);
    let text = format!(
        "pods:\n  - namespace: {long}\n    name: b\n    uid: c\n    labels: {{ team: {long} }}\n    containers:\n      - {{ name: c, id: {}, devices: [ {{ resource: nvidia.com/gpu, ids: [GPU-{long}] }} ] }}\n",
        "a".repeat(64)
    );
    let e = err(&text);
    let paths: Vec<_> = e.problems().iter().filter_map(|p| p.path()).collect();
    assert_eq!(
        paths,
        [
            "pods[0].namespace",
            "pods[0].labels.team",
            "pods[0].containers[0].devices[0].ids[0]"
        ],
        "{e}"
    );
    assert!(e.to_string().contains("the limit is 63"), "{e}");
    // an unknown 304-byte device id is echoed cut short
    assert!(e.to_string().contains("… (304 bytes)"), "{e}");
}

/// 20,000 processes on the first GPU, repeated on 255 more by alias: a
/// 775 KB file that would expand to 5.1 million processes.
fn alias_bomb() -> String {
    let mut s = String::from("gpus:\n");
    for g in 0..256 {
        s.push_str(&format!(
            "  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-00000000-0000-4000-8000-{g:012}\n    pci_bus_id: \"00000000:{g:02x}:00.0\"\n    memory_mib: 81559\n"
        ));
        if g == 0 {
            s.push_str("    processes: &p\n");
            for pid in 0..20_000 {
                s.push_str(&format!("      - {{ pid: {pid}, memory_mib: 1 }}\n"));
            }
        } else {
            s.push_str("    processes: *p\n");
        }
    }
    s
}

#[test]
fn aliases_are_refused_before_parsing() {
    let text = alias_bomb();
    assert!(text.len() > 700_000, "{}", text.len());
    let began = std::time::Instant::now();
    let e = err(&text);
    assert!(began.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(e.position(), Some((20_011, 16)), "{e}");
    assert!(
        e.message()
            .starts_with("YAML aliases (*name) are not accepted"),
        "{e}"
    );
    // In flow collections, as a key and as a merge key too.
    for text in [
        "node: [a, *x]\n",
        "node: {a: *x}\n",
        "*x : 1\n",
        "pods:\n  - <<: *base\n",
        "gpus:\n  - *g\n",
    ] {
        assert!(err(text).message().starts_with("YAML aliases"), "{text}");
    }
    // A star inside a value, quoted or in a comment is not an alias.
    for text in [
        "node: a*b\n",
        "node: \"*x\"\n",
        "node: '*x' # *y\n",
        "node: |\n  *x\n",
    ] {
        assert!(check_text(text, "t.yaml").is_ok(), "{text}");
    }
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.yaml");
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let p = path.clone();
    std::thread::spawn(move || tx.send(load(&p).map(|_| ())));
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("load returned instead of waiting for a writer");
    let e = result.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not a regular file (a FIFO): a scenario is read from a file",
            path.display()
        )
    );
    let e = load(dir.path()).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("not a regular file (a directory): a scenario is read from a file"),
        "{e}"
    );
}
