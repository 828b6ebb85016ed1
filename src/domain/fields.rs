//! Field rules shared by input documents: fields Flagpole does not model are refused with a
//! 400 that names them (so nothing a client sends vanishes without a word), and descriptions
//! are bounded.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::ValidationErrors;

/// The fields a document had beyond the ones its type knows (collected with
/// `#[serde(flatten)]`).
pub type ExtraFields = BTreeMap<String, Value>;

/// Refuses every field of `extra` except those in `read_only` (fields that responses and
/// exports carry and tools echo back; they are ignored). A field that says nothing (`null`,
/// `false`, `""`, `[]` or `{}`) is accepted too: newer tools send such empty defaults (an
/// empty `segments` list, `disabled: false`), and dropping them loses nothing.
pub fn refuse_unsupported(
    extra: &ExtraFields,
    path: &str,
    read_only: &[&str],
    errors: &mut ValidationErrors,
) {
    for (key, value) in extra {
        if read_only.contains(&key.as_str()) || says_nothing(value) {
            continue;
        }
        let field = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        errors.push(field.clone(), format!("\"{field}\" is not supported"));
    }
}

/// Longest description of a project or context field.
pub const DESCRIPTION_MAX: usize = 250;

/// Refuses a `description` longer than `DESCRIPTION_MAX` characters.
pub fn check_description(description: Option<&str>, errors: &mut ValidationErrors) {
    if description.is_some_and(|d| d.chars().count() > DESCRIPTION_MAX) {
        errors.push(
            "description",
            format!("\"description\" must be at most {DESCRIPTION_MAX} characters long"),
        );
    }
}

/// Whether a field's value carries nothing (`null`, `false`, `""`, `[]`, `{}`).
pub fn says_nothing(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_named_and_empty_ones_pass() {
        let extra: ExtraFields = serde_json::from_value(json!({
            "segments": [1], "dependencies": [], "disabled": false, "createdAt": "x", "title": "t"
        }))
        .expect("map");
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&extra, "strategies[0]", &["createdAt"], &mut errors);
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["strategies[0].segments", "strategies[0].title"]);
        assert_eq!(
            errors.0[0].message,
            "\"strategies[0].segments\" is not supported"
        );
    }
}
