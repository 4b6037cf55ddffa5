//! `gpuscale-sim`: runs the simulated cluster from a scenario file.

fn main() -> std::process::ExitCode {
    eprintln!("gpuscale-sim: not built yet");
    std::process::ExitCode::FAILURE
}
