//! Compiles the kubelet pod-resources proto with protox (pure Rust), so the
//! build needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/podresources_v1.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    // The client the mapper reads the kubelet with; the server side (the
    // simulated kubelet) is generated in gpuscale-sim.
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}
