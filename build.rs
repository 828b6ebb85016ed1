//! Lays out the release binary's code with the functions a replica runs packed together
//! (`build/symbol-order.txt`, made by `scripts/symbol-order.sh`; the linker driver
//! `scripts/link-in-symbol-order` matches it to the build). The kernel maps code in 64 KiB
//! windows around every page touched, so scattered hot functions keep nearly all of the
//! binary's code resident. The order changes where functions sit, never what they do.

use std::path::Path;

fn main() {
    const ORDER: &str = "build/symbol-order.txt";
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=FLAGPOLE_SYMBOL_ORDER");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    // The target .cargo/config.toml gives the linker driver to (and whose default linker,
    // lld, knows the flag); FLAGPOLE_SYMBOL_ORDER=off keeps the default layout, for another
    // linker.
    let lld_target = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    let enabled = std::env::var("FLAGPOLE_SYMBOL_ORDER").map_or(true, |v| v != "off");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let order = Path::new(&manifest).join(ORDER);
    if release && lld_target && enabled && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
