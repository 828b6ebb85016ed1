//! Lays out the release binary's code with the functions a replica runs packed together, in
//! the order of `build/symbol-order.txt` (made by `scripts/symbol-order.sh`). The kernel maps
//! code in 64 KiB windows around every page a process touches, so hot functions scattered over
//! the binary keep nearly all of its code resident. The order changes where functions sit,
//! never what they do.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const ORDER: &str = "build/symbol-order.txt";
const FLAGS: [&str; 2] = [
    "-Wl,--symbol-ordering-file=",
    "-Wl,--no-warn-symbol-ordering",
];

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-changed=Cargo.lock");
    for variable in [
        "FLAGPOLE_SYMBOL_ORDER",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
    ] {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("PROFILE") != "release" || var("FLAGPOLE_SYMBOL_ORDER") == "off" {
        return;
    }
    let root = PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let order = root.join(ORDER);
    let Ok(list) = std::fs::read_to_string(&order) else {
        return;
    };
    if !linker_takes_the_list(&order) {
        return;
    }
    // Function names carry a hash of the compiler and of every dependency's version: a list
    // made for others still builds, but packs only the functions whose names it still has.
    let rustc = Command::new(var("RUSTC"))
        .arg("-V")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    let lock = std::fs::read(root.join("Cargo.lock")).unwrap_or_default();
    let stamp = format!("# {rustc}; Cargo.lock {:016x}", fnv1a(&lock));
    if list.lines().next() != Some(stamp.as_str()) {
        println!(
            "cargo:warning={ORDER} was made for another compiler or Cargo.lock; \
             rerun scripts/symbol-order.sh (this build: {stamp})"
        );
    }
    println!("cargo:rustc-link-arg-bins={}{}", FLAGS[0], order.display());
    println!("cargo:rustc-link-arg-bins={}", FLAGS[1]);
}

/// Whether this build's linker accepts the list (lld does; GNU ld, for one, does not): links
/// an empty program with the build's compiler, target, linker and flags.
fn linker_takes_the_list(order: &Path) -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let out = PathBuf::from(var("OUT_DIR")).join("symbol-order-probe");
    let mut probe = Command::new(var("RUSTC"));
    probe
        .args([
            "-",
            "--crate-name",
            "probe",
            "--crate-type",
            "bin",
            "--target",
        ])
        .arg(var("TARGET"))
        .arg("-o")
        .arg(&out)
        .arg(format!("-Clink-arg={}{}", FLAGS[0], order.display()))
        .arg(format!("-Clink-arg={}", FLAGS[1]))
        .args(
            var("CARGO_ENCODED_RUSTFLAGS")
                .split('\x1f')
                .filter(|flag| !flag.is_empty()),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        probe.arg(format!("-Clinker={linker}"));
    }
    let Ok(mut child) = probe.spawn() else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(b"fn main() {}\n");
    }
    child.wait().is_ok_and(|status| status.success())
}

/// FNV-1a, 64 bits: a fingerprint of Cargo.lock (`scripts/symbol-order.sh` computes the same).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
