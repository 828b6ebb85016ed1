//! Bounded fuzzing of every parser that reads untrusted input, as proptest properties run by
//! the normal test command (`cargo nextest run --lib -E 'test(fuzz::)'` runs only these).
//! One file per parser; `gen.rs` makes valid records and `mutate.rs` breaks them, so the
//! inputs are valid-ish documents (wrong types, huge numbers, deep nesting, odd text) rather
//! than random bytes alone.
//!
//! Why in the library, under `#[cfg(test)]`, though the targets use only public items: as a
//! test target of their own (`tests/fuzz_targets/`) they are one more crate to compile and
//! binary to link after every change to the library. Measured on the 2-core machine shared
//! with other builds (`cargo nextest run --no-run` after a change to `src/lib.rs`'s public
//! items, alternating, 2026-11-28): 23–28 s of CPU here against 28–36 s as a test target,
//! and no gain from scratch (210 s of CPU either way). Wall times mostly measured the other
//! builds (load average 3 to 7): 20–55 s against 20–68 s after a change, 152–404 s against
//! 153–357 s from scratch.
//!
//! Each target's case count is its default in its `proptest!` block; `FLAGPOLE_FUZZ_CASES=N`
//! runs every target with N cases instead (a longer local run, see the README). A case that
//! takes longer than `CASE_TIMEOUT_MS` fails; proptest runs the cases in a child process and
//! kills it past that, so a parser that hangs is a failure too, not a stuck run. Failures are
//! saved in `proptest-regressions/fuzz/` and replayed first.

use proptest::prelude::*;

mod client_reports;
mod constraint;
mod filter;
mod gen;
mod import;
mod json_bodies;
mod mutate;
mod template;
mod yaml_flow;

/// Longest one case may take. Inputs stay within a megabyte or two (see `mutate.rs`), which
/// every parser reads in well under a second even in a debug build; the margin is for a
/// machine shared with other builds (20 targets at once under `cargo test` made a 2 s bound
/// fail without cause). A super-linear path on such inputs takes far longer.
const CASE_TIMEOUT_MS: u32 = 10_000;

/// The config of a target: `cases` cases unless `FLAGPOLE_FUZZ_CASES` says otherwise, each
/// bounded in time, and shrinking bounded too (a failure is reported within seconds).
pub(crate) fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("FLAGPOLE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        timeout: CASE_TIMEOUT_MS,
        max_shrink_time: 10_000,
        ..ProptestConfig::default()
    }
}

/// Text as attackers and broken clients send it: plain names, unicode, control characters
/// and NUL, the separators parsers care about, empty and blank strings, and long runs.
pub(crate) fn odd_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9._~-]{0,12}",
        2 => "\\PC{0,24}",
        1 => any::<String>(),
        1 => "[\\x00-\\x1f\\x7f\"'\\\\%:&=+#;,\\[\\]{}*!|>@` \t\r\n\u{feff}\u{202e}\u{fffd}]{0,10}",
        1 => (any::<char>(), 0..3_000usize).prop_map(|(c, n)| c.to_string().repeat(n)),
        1 => Just(String::new()),
        1 => Just(" ".to_string()),
    ]
}
