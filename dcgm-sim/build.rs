fn main() {
    // Keep the simulator loaded once dlopen'ed: its global state (init count,
    // connections, groups and watches) then lives for the whole process even
    // when the library that loaded it is dropped (which dlcloses it).
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    }
}
