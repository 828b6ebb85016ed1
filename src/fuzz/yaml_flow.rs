//! The bound on YAML flow nesting that `parse_document` takes before the YAML scanner runs
//! (`domain::import::flow_depth`): never below the nesting the scanner meets, whatever text
//! (quotes, comments, tags, anchors, odd line breaks) surrounds the brackets.

use proptest::prelude::*;
use serde_json::Value;

use super::config;
use crate::domain::import::{parse_document, DocumentFormat};

/// The limit `parse_document` enforces.
const LIMIT: usize = 64;

/// Text that has led guesses about YAML quoting astray: quotes that start nothing (inside plain
/// scalars, after `:` without a blank, in block scalars, in tags), unclosed quotes, comments,
/// escapes, and line breaks other than LF.
static MISLEADING: [&str; 22] = [
    "a:'b, ",
    "'",
    "\"",
    "a: |\n  'x\n",
    "a: >\n  \"x\n",
    "a: b\n  'x\n",
    "# '\n",
    "&a '",
    "!t'x ",
    "!<'[> ",
    "[a 'b, ",
    "? '",
    "- '",
    "a:\"b ",
    "\\",
    "'it''s' ",
    "\"\\\"\" ",
    "{a: '",
    "\u{85}",
    "\u{2028}#",
    "\u{feff}'",
    "x #'\n",
];

/// Scalars of a flow collection, with brackets and quotes where they mean nothing.
static SCALARS: [&str; 20] = [
    "1",
    "a'b",
    "a \"b",
    "'x]'",
    "'[y'",
    "'it''s]'",
    "\"q]\"",
    "\"\\\"]\"",
    "\"[\"",
    "&a x",
    "*a",
    "!t x",
    "!!str ']'",
    "a:b",
    "a#b",
    "'}'",
    "\"{\"",
    "x\n  y",
    "'a\n ]'",
    "-x",
];

/// Separators between the items of a flow collection.
static SEPARATORS: [&str; 6] = [", ", ",", " ,\n ", ", # ]]\n ", ",\t", ", # '\n "];

/// A flow sequence or mapping nested `depth` deep, items picked by `picks`.
fn nested(depth: usize, picks: &[(usize, usize, bool)]) -> String {
    let mut out = String::new();
    for level in 0..depth {
        let (scalar, separator, mapping) = picks[level % picks.len()];
        let item = SCALARS[scalar % SCALARS.len()];
        let sep = SEPARATORS[separator % SEPARATORS.len()];
        if mapping {
            out += &format!("{{k{level}: {item}{sep}n{level}: ");
        } else {
            out += &format!("[{item}{sep}");
        }
    }
    out.push('1');
    for level in (0..depth).rev() {
        let (_, _, mapping) = picks[level % picks.len()];
        out.push(if mapping { '}' } else { ']' });
    }
    out
}

/// How deep lists and objects nest in `value`.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// Flow collections nested past the limit are refused before the YAML scanner, whose
    /// time grows with the square of the depth, sees them — whatever text comes first.
    #[test]
    fn deep_flow_nesting_is_refused_quickly_after_any_text(
        prefix in prop::collection::vec(prop::sample::select(&MISLEADING[..]), 0..4),
        depth in 65..20_000usize,
        key in any::<bool>(),
    ) {
        let nest = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let doc = format!("{}\n{}{nest}\n", prefix.concat(), if key { "k: " } else { "" });
        let started = std::time::Instant::now();
        let parsed = parse_document(doc.as_bytes(), DocumentFormat::Yaml);
        prop_assert!(parsed.is_err(), "{} levels accepted", depth);
        // The bound refuses in microseconds; the scanner took 1.5 s for 16,000 levels.
        prop_assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?} for {} levels",
            started.elapsed(),
            depth
        );
    }

    /// Against the YAML parser itself: a document it reads as nested deeper than the limit
    /// is refused, however its items hide brackets and quotes.
    #[test]
    fn the_bound_is_never_below_the_nesting_the_parser_reads(
        depth in 56..72usize,
        picks in prop::collection::vec((any::<usize>(), any::<usize>(), any::<bool>()), 1..6),
        key in any::<bool>(),
    ) {
        let doc = format!("{}{}\n", if key { "k: " } else { "" }, nested(depth, &picks));
        // yaml_serde's own limit is 128 levels: these depths are all read.
        let Ok(read) = yaml_serde::from_str::<Value>(&doc) else {
            return Ok(());
        };
        let parsed = parse_document(doc.as_bytes(), DocumentFormat::Yaml);
        let flow = depth_of(&read, key);
        if flow > LIMIT {
            prop_assert!(parsed.is_err(), "{} levels accepted:\n{}", flow, doc);
        }
    }
}

/// The flow nesting of a document read as `read` (without the `k:` mapping around it).
fn depth_of(read: &Value, key: bool) -> usize {
    if key {
        read.get("k").map_or(0, depth)
    } else {
        depth(read)
    }
}
