//! Breaking valid documents the ways parsers meet them: a node replaced by a value of another
//! type (huge or negative numbers, odd text, nesting), keys removed or added, lists grown past
//! their limits, deep nesting; and, once serialised, bytes cut or spliced in.

use proptest::prelude::*;
use serde_json::Value;

use super::odd_text;

/// Keys the documents use: an added key says more when a parser knows it.
static KEYS: [&str; 44] = [
    "name",
    "type",
    "value",
    "values",
    "version",
    "features",
    "strategies",
    "constraints",
    "parameters",
    "variants",
    "weight",
    "weightType",
    "stickiness",
    "payload",
    "overrides",
    "contextName",
    "operator",
    "inverted",
    "caseInsensitive",
    "project",
    "projects",
    "contextFields",
    "legalValues",
    "tagTypes",
    "tags",
    "featureTags",
    "featureName",
    "tagType",
    "tagValue",
    "createdAt",
    "appName",
    "instanceId",
    "bucket",
    "start",
    "stop",
    "toggles",
    "yes",
    "no",
    "sdkVersion",
    "started",
    "interval",
    "description",
    "enabled",
    "deprecated",
];

/// An object key: mostly one the documents use, sometimes odd text.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(&KEYS[..]).prop_map(str::to_string),
        1 => odd_text(),
    ]
}

/// A value of any type, leaning to the ones parsers get wrong (limits of the number types,
/// negative zero, odd text, small nested lists and objects).
pub(crate) fn odd_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![
            Just(u64::MAX),
            Just(1u64 << 53),
            Just(1_000_000_000_001),
            any::<u64>()
        ]
        .prop_map(Value::from),
        prop_oneof![Just(i64::MIN), Just(-1i64), any::<i64>()].prop_map(Value::from),
        prop_oneof![
            Just(1e308),
            Just(-0.0),
            Just(0.5),
            Just(f64::MIN_POSITIVE),
            any::<f64>()
        ]
        .prop_map(Value::from),
        odd_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..4)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// What a mutation does to the node it lands on.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    /// The node becomes another value.
    Replace(Value),
    /// An object loses a key, or a list an item (by index, modulo the length).
    Remove(usize),
    /// An object gains a key, or a list an item.
    Insert(String, Value),
    /// The node is wrapped in this many lists (`true`) or objects.
    Nest(usize, bool),
    /// A list's first item is repeated this many more times.
    Repeat(usize),
}

/// One edit at one node: `at` picks the node (see [`node_at`]).
#[derive(Debug, Clone)]
pub(crate) struct Mutation {
    at: u64,
    edit: Edit,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => odd_value().prop_map(Edit::Replace),
        2 => any::<usize>().prop_map(Edit::Remove),
        2 => (key(), odd_value()).prop_map(|(k, v)| Edit::Insert(k, v)),
        1 => (1..300usize, any::<bool>()).prop_map(|(n, list)| Edit::Nest(n, list)),
        1 => prop_oneof![1..20usize, 95..130usize, 9_990..10_010usize].prop_map(Edit::Repeat),
    ]
}

/// Up to three mutations (none: the valid document itself).
pub(crate) fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(
        (any::<u64>(), edit()).prop_map(|(at, edit)| Mutation { at, edit }),
        0..4,
    )
}

/// The node `at` selects: at each level `at % (children + 1)` is 0 for this node, else the
/// child to go into, and `at / (children + 1)` goes on down.
fn node_at(value: &mut Value, at: u64) -> &mut Value {
    let children = match &*value {
        Value::Array(items) => items.len(),
        Value::Object(map) => map.len(),
        _ => 0,
    } as u64;
    let pick = at % (children + 1);
    if pick == 0 {
        return value;
    }
    let rest = at / (children + 1);
    let index = (pick - 1) as usize;
    match value {
        Value::Array(items) => node_at(&mut items[index], rest),
        Value::Object(map) => match map.values_mut().nth(index) {
            Some(child) => node_at(child, rest),
            None => unreachable!("index below the length"),
        },
        _ => unreachable!("scalars have no children"),
    }
}

/// Most bytes one `Repeat` adds to a document.
const REPEAT_BYTES_MAX: usize = 512 << 10;

/// `value` with `mutations` applied in order.
pub(crate) fn apply(mut value: Value, mutations: &[Mutation]) -> Value {
    for Mutation { at, edit } in mutations {
        let node = node_at(&mut value, *at);
        match (edit, node) {
            (Edit::Replace(new), node) => *node = new.clone(),
            (Edit::Remove(i), Value::Object(map)) if !map.is_empty() => {
                let key = map.keys().nth(i % map.len()).cloned();
                if let Some(key) = key {
                    map.shift_remove(&key);
                }
            }
            (Edit::Remove(i), Value::Array(items)) if !items.is_empty() => {
                items.remove(i % items.len());
            }
            (Edit::Insert(key, new), Value::Object(map)) => {
                map.insert(key.clone(), new.clone());
            }
            (Edit::Insert(_, new), Value::Array(items)) => items.push(new.clone()),
            (Edit::Nest(depth, list), node) => {
                let mut nested = node.take();
                for _ in 0..*depth {
                    nested = if *list {
                        Value::Array(vec![nested])
                    } else {
                        serde_json::json!({ "a": nested })
                    };
                }
                *node = nested;
            }
            (Edit::Repeat(n), Value::Array(items)) if !items.is_empty() => {
                let first = items[0].clone();
                // Small items go past every count limit; big ones stop at a size a case parses
                // well within its time in a debug build (parsing time is linear in the size).
                let size = serde_json::to_vec(&first).map_or(1, |b| b.len().max(1));
                let n = (*n).min(REPEAT_BYTES_MAX / size);
                items.extend(std::iter::repeat_n(first, n));
            }
            _ => {}
        }
    }
    value
}

/// Byte sequences that mean something to a JSON or YAML scanner.
static SPLICES: [&[u8]; 24] = [
    b"\0",
    b"\xff",
    b"\xef\xbb\xbf",
    b"\xed\xa0\x80",
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"---\n",
    b"...\n",
    b"!!binary ",
    b"!tag ",
    b"%YAML 1.1\n",
    b"\t",
    b"[",
    b"{",
    b"\"",
    b"'",
    b"\\u0000",
    b"\\ud800",
    b"1e99999",
    b"#",
    b": ",
    b"\n  - ",
    b"? ",
];

/// One change to serialised bytes (positions modulo the length).
#[derive(Debug, Clone)]
pub(crate) enum ByteEdit {
    Truncate(usize),
    Splice(usize, &'static [u8]),
    Set(usize, u8),
}

/// Up to two byte edits (mostly none: most cases should reach the readers behind the
/// parser).
pub(crate) fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    let one = prop_oneof![
        any::<usize>().prop_map(ByteEdit::Truncate),
        (any::<usize>(), prop::sample::select(&SPLICES[..]))
            .prop_map(|(at, bytes)| ByteEdit::Splice(at, bytes)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| ByteEdit::Set(at, b)),
    ];
    prop_oneof![
        3 => Just(Vec::new()),
        1 => prop::collection::vec(one, 1..3),
    ]
}

/// `bytes` with `edits` applied.
pub(crate) fn apply_bytes(mut bytes: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for edit in edits {
        let at = |i: usize| i % (bytes.len() + 1);
        match edit {
            ByteEdit::Truncate(i) => bytes.truncate(at(*i)),
            ByteEdit::Splice(i, splice) => {
                let i = at(*i);
                bytes.splice(i..i, splice.iter().copied());
            }
            ByteEdit::Set(i, b) => {
                if !bytes.is_empty() {
                    let i = *i % bytes.len();
                    bytes[i] = *b;
                }
            }
        }
    }
    bytes
}
