//! Validate scenario files: `cargo run -p gpuscale-nvml-sim --example validate-scenario -- FILE...`
fn main() {
    let mut failed = false;
    for arg in std::env::args().skip(1) {
        match gpuscale_nvml_sim::scenario::load(std::path::Path::new(&arg)) {
            Ok(s) => println!("{arg}: ok ({} GPUs, {} pods)", s.gpus.len(), s.pods.len()),
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
