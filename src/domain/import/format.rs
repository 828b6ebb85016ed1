//! Turning the bytes of a state document, JSON or YAML, into one JSON value.

use serde_json::Value;

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
}

/// Parses `bytes` as `format`. Both parsers bound nesting depth, and the YAML parser refuses
/// documents whose aliases expand beyond a repetition limit ("billion laughs").
pub fn parse_document(bytes: &[u8], format: DocumentFormat) -> Result<Value, DomainError> {
    let format = match format {
        DocumentFormat::Sniff => match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{' | b'[') => DocumentFormat::Json,
            _ => DocumentFormat::Yaml,
        },
        known => known,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ValidationErrors::single("", "the document is empty"));
    }
    match format {
        DocumentFormat::Yaml => yaml_serde::from_slice(bytes).map_err(|e| {
            ValidationErrors::single("", format!("the document is not valid YAML: {e}"))
        }),
        _ => serde_json::from_slice(bytes).map_err(|e| {
            ValidationErrors::single("", format!("the document is not valid JSON: {e}"))
        }),
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
        let deep = "[".repeat(100_000);
        assert!(parse_document(deep.as_bytes(), DocumentFormat::Json).is_err());
        let deep_yaml = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_document(deep_yaml.as_bytes(), DocumentFormat::Yaml).is_err());
    }
}
