//! Turning the bytes of a state document, JSON or YAML, into one JSON value.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::flow_depth::flow_depth_exceeds;
use crate::domain::{DomainError, ValidationErrors};

/// How a document is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentFormat {
    Json,
    Yaml,
    /// Unknown: JSON when it starts like JSON (`{` or `[`), otherwise YAML.
    Sniff,
}

impl DocumentFormat {
    /// The format a file name's extension says (`.json`, `.yml`, `.yaml`), else `Sniff`.
    pub fn of_file_name(name: &str) -> Self {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".json") {
            Self::Json
        } else if lower.ends_with(".yml") || lower.ends_with(".yaml") {
            Self::Yaml
        } else {
            Self::Sniff
        }
    }

    /// The format of `bytes`: this one, or for `Sniff` JSON when they start like JSON (`{` or
    /// `[`), else YAML.
    pub fn of(self, bytes: &[u8]) -> Self {
        match self {
            Self::Sniff => match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'{' | b'[') => Self::Json,
                _ => Self::Yaml,
            },
            known => known,
        }
    }
}

/// Parses `bytes` as `format` into a JSON value. Both parsers bound nesting depth; on top,
/// the value may hold at most one node per byte of the document (plus a little), which only
/// YAML aliases can exceed — so no alias expansion, exponential ("billion laughs") or linear
/// (one anchor referenced many times), can cost more than the document's own size — and a
/// key may not appear twice in one object (parsers would silently keep the last).
pub fn parse_document(bytes: &[u8], format: DocumentFormat) -> Result<Value, DomainError> {
    let format = format.of(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ValidationErrors::single("", "the document is empty"));
    }
    let budget = Cell::new(bytes.len() + NODE_ALLOWANCE);
    let seed = BoundedValue { budget: &budget };
    match format {
        DocumentFormat::Yaml => {
            if flow_depth_exceeds(bytes, FLOW_DEPTH_MAX) {
                return Err(ValidationErrors::single(
                    "",
                    format!(
                        "the document nests [ ] or {{ }} deeper than {FLOW_DEPTH_MAX} levels \
                         (brackets in text count unless they are balanced there)"
                    ),
                ));
            }
            let mut documents = yaml_serde::Deserializer::from_slice(bytes);
            let first = documents
                .next()
                .ok_or_else(|| ValidationErrors::single("", "the document is empty"))?;
            let parsed = seed.deserialize(first).map_err(|e| {
                ValidationErrors::single("", format!("the document is not valid YAML: {e}"))
            })?;
            if documents.next().is_some() {
                return Err(ValidationErrors::single(
                    "",
                    "the file holds more than one YAML document (---); import one at a time",
                ));
            }
            Ok(parsed)
        }
        _ => {
            let mut deserializer = serde_json::Deserializer::from_slice(bytes);
            let value = seed.deserialize(&mut deserializer).and_then(|v| {
                deserializer.end()?;
                Ok(v)
            });
            value.map_err(|e| {
                ValidationErrors::single("", format!("the document is not valid JSON: {e}"))
            })
        }
    }
}

/// A JSON document's top-level object read one level deep: each key with its value unparsed
/// (borrowed from `bytes`), so that a large document is read item by item and never held
/// whole as a tree of values. A key may not appear twice.
pub fn parse_json_sections(bytes: &[u8]) -> Result<Vec<(String, &RawValue)>, DomainError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ValidationErrors::single("", "the document is empty"));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let sections = deserializer.deserialize_map(Sections).and_then(|sections| {
        deserializer.end()?;
        Ok(sections)
    });
    sections
        .map_err(|e| ValidationErrors::single("", format!("the document is not valid JSON: {e}")))
}

/// The items of an unparsed JSON list (`None` when the value is not a list).
pub fn raw_items(list: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(list.get()).ok()
}

/// Reads one level of a JSON object into its keys and unparsed values.
struct Sections;

impl<'de> Visitor<'de> for Sections {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut sections: Self::Value = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if sections.iter().any(|(k, _)| *k == key) {
                return Err(de::Error::custom(format!(
                    "the key \"{key}\" appears twice"
                )));
            }
            let value = map.next_value()?;
            sections.push((key, value));
        }
        Ok(sections)
    }
}

/// Deepest flow nesting (`[ ]`, `{ }`) a YAML document may have: state documents need a few
/// levels, and the YAML scanner's time grows with the square of the depth (block nesting is
/// bounded by the indentation it takes, i.e. by the document's size). Brackets in text count
/// too unless balanced there (see `flow_depth.rs`).
const FLOW_DEPTH_MAX: usize = 64;

/// Nodes allowed beyond one per byte (tiny documents).
const NODE_ALLOWANCE: usize = 1024;

/// Deserialises any self-describing document into a JSON value, spending one unit of
/// `budget` per node and refusing duplicate keys.
#[derive(Clone, Copy)]
struct BoundedValue<'a> {
    budget: &'a Cell<usize>,
}

impl BoundedValue<'_> {
    fn spend<E: de::Error>(&self) -> Result<(), E> {
        match self.budget.get().checked_sub(1) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => Err(E::custom(
                "the document expands to far more values than it has bytes (YAML aliases?)",
            )),
        }
    }
}

impl<'de> DeserializeSeed<'de> for BoundedValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoundedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-compatible value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend()?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.spend()?;
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "the key \"{key}\" appears twice"
                )));
            }
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml_give_the_same_value() {
        let json = parse_document(br#"{"version": 1, "features": []}"#, DocumentFormat::Sniff);
        let yaml = parse_document(b"version: 1\nfeatures: []\n", DocumentFormat::Sniff);
        assert_eq!(json.expect("json"), yaml.expect("yaml"));
    }

    #[test]
    fn sections_are_read_one_level_deep() {
        let bytes = br#"{"version": 2, "features": [{"name": "a"}, {"name": "b"}]}"#;
        let sections = parse_json_sections(bytes).expect("sections");
        let keys: Vec<_> = sections.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["version", "features"]);
        let items = raw_items(sections[1].1).expect("a list");
        assert_eq!(items[1].get(), r#"{"name": "b"}"#);
        assert!(raw_items(sections[0].1).is_none());
        for bad in [&b"[]"[..], b"{\"a\": 1, \"a\": 2}", b"{} x", b"  "] {
            assert!(parse_json_sections(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn duplicate_keys_are_refused() {
        for (doc, format) in [
            (
                &br#"{"features": [], "features": []}"#[..],
                DocumentFormat::Json,
            ),
            (&b"features: []\nfeatures: []\n"[..], DocumentFormat::Yaml),
        ] {
            let err = parse_document(doc, format).expect_err("duplicate key");
            assert!(err.to_string().contains("appears twice"), "{err}");
        }
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused() {
        let mut bomb = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (name, previous) in ["b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
        {
            bomb.push_str(&format!(
                "{name}: &{name} [*{previous},*{previous},*{previous},*{previous},*{previous},*{previous},*{previous},*{previous},*{previous}]\n"
            ));
        }
        let started = std::time::Instant::now();
        assert!(parse_document(bomb.as_bytes(), DocumentFormat::Yaml).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // One anchor of 1,000 items referenced 1,000 times: linear, but a million values.
        let linear = format!(
            "a: &x [{}]\nb: [{}]\n",
            vec!["aa"; 1000].join(","),
            vec!["*x"; 1000].join(",")
        );
        let started = std::time::Instant::now();
        assert!(parse_document(linear.as_bytes(), DocumentFormat::Yaml).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let deep = "[".repeat(100_000);
        assert!(parse_document(deep.as_bytes(), DocumentFormat::Json).is_err());
        let deep_yaml = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_document(deep_yaml.as_bytes(), DocumentFormat::Yaml).is_err());
    }
}
