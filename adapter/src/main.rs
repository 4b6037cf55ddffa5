use clap::Parser as _;

/// When start-up is over: the caches filled, the controller's first list
/// of policies and its first rounds done.
const STARTUP: std::time::Duration = std::time::Duration::from_secs(30);

fn main() -> std::process::ExitCode {
    gpuscale_util::memory::limit_malloc_arenas();
    let args = gpuscale_adapter::cli::Args::parse();
    if let Err(e) = gpuscale_adapter::logging::init(args.log_format, &args.log_level) {
        eprintln!("gpuscale-adapter: {e}");
        return std::process::ExitCode::from(2);
    }
    // One worker by default: the work is small and I/O-bound, one thread
    // answers ~60k requests/s, and tokio's default (one per host CPU) puts
    // dozens of threads in a pod limited to a fraction of a core.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(args.worker_threads))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gpuscale-adapter: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    gpuscale_util::memory::release_after_startup(STARTUP);
    match rt.block_on(gpuscale_adapter::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "gpuscale-adapter stopped");
            eprintln!("gpuscale-adapter: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
