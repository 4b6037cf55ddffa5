//! Compiles the kubelet pod-resources proto the exporter's client uses, for
//! the server side of the wire (and a client for tests), with protox (pure
//! Rust), so the build needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = "../exporter/proto";
    let proto = "podresources_v1.proto";
    println!("cargo:rerun-if-changed={dir}/{proto}");
    let fds = protox::compile([proto], [dir])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
