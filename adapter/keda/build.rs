//! Compiles KEDA's external-scaler proto with protox (pure Rust), so the
//! build needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/externalscaler.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    // Server for the adapter, client for the load tool and unit tests.
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
