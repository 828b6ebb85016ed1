//! State import (`domain::import`): the bytes of a document, JSON or YAML, through
//! `parse_document`, `read_document` and `apply_import`.

use chrono::Utc;
use proptest::prelude::*;
use serde_json::Value;

use super::gen::{configuration, seeded, seeded_at};
use super::mutate::{apply, apply_bytes, byte_edits, mutations};
use super::{config, odd_text};
use crate::domain::export::{export, ExportSections};
use crate::domain::import::{
    apply_import, parse_document, read_document, DocumentFormat, ImportOptions,
};
use crate::domain::DomainError;

/// The export of `state`, as the export route serves it.
fn exported(state: &crate::domain::config_state::ConfigState) -> Value {
    serde_json::to_value(export(state, ExportSections::default())).expect("serialisable")
}

/// The bytes of `document` in `format` (as the export route writes YAML).
fn written(document: &Value, yaml: bool) -> Vec<u8> {
    if yaml {
        yaml_serde::to_string(document)
            .expect("YAML-serialisable")
            .into_bytes()
    } else {
        serde_json::to_vec(document).expect("serialisable")
    }
}

/// A refusal is a list of problems, each with a message.
fn assert_typed(error: &DomainError) -> Result<(), TestCaseError> {
    let DomainError::Invalid(problems) = error else {
        return Err(TestCaseError::fail(format!(
            "not a validation error: {error:?}"
        )));
    };
    prop_assert!(!problems.0.is_empty(), "a refusal without a problem");
    prop_assert!(problems.0.iter().all(|p| !p.message.is_empty()));
    Ok(())
}

/// Whether two values are equal, floating-point numbers within a relative 1e-15: serde_json's
/// default float parsing may be a unit in the last place off (its `float_roundtrip` feature
/// is exact), which no field of a document depends on.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= 1e-15 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn format() -> impl Strategy<Value = DocumentFormat> {
    prop_oneof![
        Just(DocumentFormat::Json),
        Just(DocumentFormat::Yaml),
        Just(DocumentFormat::Sniff)
    ]
}

fn options() -> impl Strategy<Value = ImportOptions> {
    (any::<bool>(), any::<bool>()).prop_map(|(drop, keep)| ImportOptions { drop, keep })
}

proptest! {
    #![proptest_config(config(128))]

    /// An export, written as JSON or YAML and imported into a fresh store, makes the same
    /// configuration: its export is the document imported.
    #[test]
    fn an_export_imports_back_to_the_same_configuration(
        state in configuration(),
        yaml in any::<bool>(),
    ) {
        let document = exported(&state);
        let bytes = written(&document, yaml);
        let format = if yaml { DocumentFormat::Yaml } else { DocumentFormat::Json };
        let parsed = parse_document(&bytes, format)
            .map_err(|e| TestCaseError::fail(format!("an export does not parse: {e:?}")))?;
        prop_assert_eq!(&parsed, &document, "the parsed document differs from the export");
        let (read, errors) = read_document(parsed, Utc::now());
        prop_assert!(errors.0.is_empty(), "an export has problems: {:?}", errors);
        let base = seeded();
        let result = apply_import(&base, &read, ImportOptions::default(), Utc::now(), errors)
            .map_err(|e| TestCaseError::fail(format!("an export is refused: {e:?}")))?;
        prop_assert_eq!(exported(&result.state), document);
    }
}

proptest! {
    #![proptest_config(config(384))]

    /// A mutated export (wrong types, huge numbers, deep nesting, odd text, spliced bytes)
    /// is parsed, read and applied, or refused with its problems; never a panic.
    #[test]
    fn a_mutated_document_imports_or_is_refused_with_its_problems(
        state in configuration(),
        edits in mutations(),
        yaml in any::<bool>(),
        bytes_edits in byte_edits(),
        format in format(),
        options in options(),
    ) {
        let document = apply(exported(&state), &edits);
        let bytes = apply_bytes(written(&document, yaml), &bytes_edits);
        let parsed = match parse_document(&bytes, format) {
            Ok(parsed) => parsed,
            Err(e) => return assert_typed(&e),
        };
        let (read, errors) = read_document(parsed, Utc::now());
        let problems = errors.0.len();
        match apply_import(&seeded(), &read, options, Utc::now(), errors) {
            // Problems found reading are never dropped on the way.
            Ok(_) => prop_assert_eq!(problems, 0),
            Err(e) => assert_typed(&e)?,
        }
    }

    /// Any bytes, mostly text with the characters JSON and YAML scanners care about, are a
    /// value or a refusal with its problem.
    #[test]
    fn any_bytes_parse_or_are_refused(
        text in prop::collection::vec(odd_text(), 0..8),
        raw in prop::collection::vec(any::<u8>(), 0..64),
        bytes_edits in byte_edits(),
        format in format(),
    ) {
        let mut bytes = text.concat().into_bytes();
        bytes.extend(raw);
        let bytes = apply_bytes(bytes, &bytes_edits);
        if let Err(e) = parse_document(&bytes, format) {
            assert_typed(&e)?;
        }
    }
}

proptest! {
    // Each case parses and applies twice: fewer cases for the same time.
    #![proptest_config(config(192))]

    /// Whatever value a document holds, reading it never panics, and reading is the same
    /// for the JSON and YAML forms of the same value.
    #[test]
    fn json_and_yaml_forms_of_a_value_read_the_same(
        state in configuration(),
        edits in mutations(),
    ) {
        let document = apply(exported(&state), &edits);
        let json = parse_document(&written(&document, false), DocumentFormat::Json);
        let yaml = parse_document(&written(&document, true), DocumentFormat::Yaml);
        if let (Ok(json), Ok(yaml)) = (&json, &yaml) {
            prop_assert!(same(json, yaml), "JSON {} but YAML {}", json, yaml);
        }
        let now = seeded_at();
        for parsed in [json, yaml].into_iter().flatten() {
            let (read, errors) = read_document(parsed, now);
            let _ = apply_import(&seeded(), &read, ImportOptions::default(), now, errors);
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// A multipart file name picks the format by its extension alone, in any case; any other
    /// name leaves it to sniffing.
    #[test]
    fn a_file_name_picks_the_format_by_its_extension(
        stem in odd_text().prop_map(|s| s.replace('.', "")),
        extension in prop::sample::select(vec![".json", ".yml", ".yaml", ".txt", "", ".json.bak", "json", ".json\u{0}"]),
        upper in any::<bool>(),
    ) {
        let expected = match extension {
            ".json" => DocumentFormat::Json,
            ".yml" | ".yaml" => DocumentFormat::Yaml,
            _ => DocumentFormat::Sniff,
        };
        let extension = if upper { extension.to_uppercase() } else { extension.to_string() };
        prop_assert_eq!(DocumentFormat::of_file_name(&(stem + &extension)), expected);
    }
}
