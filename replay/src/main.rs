//! The binary: the command line lives in the library (`cli`), so its
//! modules are compiled and tested with it.

fn main() -> std::process::ExitCode {
    gpuscale_replay::cli::main()
}
