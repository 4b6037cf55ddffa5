//! Shared helpers of the end-to-end tests.

pub mod activator;
pub mod adapter;
pub mod alerts;
pub mod bins;
pub mod deploy;
pub mod exporter;
pub mod exposition;
pub mod hostile;
pub mod kubeapi;
pub mod pods;
pub mod procs;
pub mod python;
pub mod victoria;

/// A free port on 127.0.0.1 (bound, read back, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Writes `text` to `dir/name` (configs, certificates, manifests the
/// binaries under test read) and returns the path.
pub fn write_file(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path
}
