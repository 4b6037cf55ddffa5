//! `nv-hostengine-sim [--listen HOST:PORT]`: a simulated DCGM host engine
//! for the DCGM simulator library (`libgpuscale_dcgm_sim.so`) to connect to,
//! as the exporter's `--dcgm-hostengine` would connect to `nv-hostengine`.
//! Runs until killed; prints the address it listens on.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = match args.as_slice() {
        [] => "127.0.0.1:5555".to_string(),
        [flag, addr] if flag == "--listen" => addr.clone(),
        _ => {
            eprintln!("usage: nv-hostengine-sim [--listen HOST:PORT]   (default 127.0.0.1:5555)");
            return ExitCode::from(2);
        }
    };
    match gpuscale_dcgm_sim::hostengine::HostEngine::start(&addr) {
        Ok(engine) => {
            println!("nv-hostengine-sim listening on {}", engine.addr());
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
