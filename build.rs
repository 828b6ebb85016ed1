//! Lays out the release binary's code with the functions a replica runs packed together, in
//! the order of `build/symbol-order.txt` (made by `scripts/symbol-order.sh`). The kernel maps
//! code in 64 KiB windows around every page a process touches, so hot functions scattered over
//! the binary keep nearly all of its code resident. The order changes where functions sit,
//! never what they do.

use std::path::Path;
use std::process::Command;

const ORDER: &str = "build/symbol-order.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-env-changed=FLAGPOLE_SYMBOL_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("PROFILE") != "release" || var("FLAGPOLE_SYMBOL_ORDER") == "off" {
        return;
    }
    let rustc = Command::new(var("RUSTC"))
        .arg("-V")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    // `--symbol-ordering-file` is lld's: rustc links with lld on this target from 1.90 on,
    // unless another linker is configured (then the default layout is kept).
    let minor = rustc
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let lld = var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("HOST") == var("TARGET")
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !["linker", "link-self-contained", "fuse-ld"]
            .iter()
            .any(|f| flags.contains(f))
        && minor.is_some_and(|m| m >= 90);
    let root = Path::new(&var("CARGO_MANIFEST_DIR")).to_path_buf();
    let Ok(list) = std::fs::read_to_string(root.join(ORDER)) else {
        return;
    };
    if !lld {
        return;
    }
    // Function names carry a hash of the compiler and of every dependency's version: a list
    // made for others still builds, but packs only the functions whose names it still has.
    let lock = std::fs::read(root.join("Cargo.lock")).unwrap_or_default();
    let stamp = format!("# {rustc}; Cargo.lock {:016x}", fnv1a(&lock));
    if list.lines().next() != Some(stamp.as_str()) {
        println!(
            "cargo:warning={ORDER} was made for another compiler or Cargo.lock; \
             rerun scripts/symbol-order.sh (this build: {stamp})"
        );
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        root.join(ORDER).display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// FNV-1a, 64 bits: a fingerprint of Cargo.lock (`scripts/symbol-order.sh` computes the same).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
