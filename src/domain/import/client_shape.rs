//! Importing a client-shaped document — what `GET /api/client/features` returns
//! (`{version, features, segments?}`; an Edge bootstrap file is one) — into one environment,
//! verbatim: what Unleash's admin API would refuse but the client specification serves
//! (UTF-8 names, weights not adding up to 1,000, several parents, cycles, dangling segment
//! ids, unknown operators) is stored as it is, so SDKs evaluate it as the specification says.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::document::parse_item;
use super::format::{parse_document, parse_json_sections, raw_items, DocumentFormat};
use crate::domain::config_state::ConfigState;
use crate::domain::constraint::Constraint;
use crate::domain::dependency::Dependency;
use crate::domain::environment::FeatureEnvironment;
use crate::domain::feature_strategy::{assign_ids, Strategy};
use crate::domain::fields::{refuse_unsupported, ExtraFields};
use crate::domain::project::{Project, DEFAULT_PROJECT};
use crate::domain::segment::{Segment, SEGMENT_IDS};
use crate::domain::text::Text;
use crate::domain::toggle::{Override, Payload, Toggle, Variant, WeightType, DEFAULT_TYPE};
use crate::domain::{DomainError, ValidationErrors};

/// The top-level keys of a client document (`query` and `meta` are what Unleash adds; both
/// are read and ignored).
const KEYS: [&str; 5] = ["version", "features", "segments", "query", "meta"];

/// Longest toggle name an import accepts (any UTF-8, as the client specification serves).
const IMPORTED_NAME_MAX: usize = 255;

/// A toggle of a client document.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientFeature {
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    stale: Option<bool>,
    #[serde(default)]
    impression_data: Option<bool>,
    #[serde(default)]
    strategies: Vec<Strategy>,
    #[serde(default)]
    variants: Vec<ClientVariant>,
    #[serde(default)]
    dependencies: Vec<Dependency>,
    #[serde(flatten)]
    extra: ExtraFields,
}

/// Feature fields a client document carries that say nothing to keep: the legacy
/// `strategy`/`parameters` pair, timestamps, and a feature-level `segments` (which the client
/// specification's schema allows and no SDK reads).
const READ_ONLY_FEATURE_FIELDS: [&str; 5] = [
    "strategy",
    "parameters",
    "createdAt",
    "lastSeenAt",
    "segments",
];

/// A toggle variant as clients get it: weight type and stickiness may be missing.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientVariant {
    name: Text,
    weight: u32,
    #[serde(default)]
    weight_type: Option<WeightType>,
    #[serde(default)]
    stickiness: Option<Text>,
    #[serde(default)]
    payload: Option<Payload>,
    #[serde(default)]
    overrides: Vec<Override>,
}

/// A segment of a client document.
#[derive(Debug, Clone, Deserialize)]
struct ClientSegment {
    id: u32,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    constraints: Vec<Constraint>,
}

/// The valid items of a client document, with their indices.
#[derive(Debug, Default)]
pub struct ClientDocument {
    features: Vec<(usize, ClientFeature)>,
    segments: Vec<(usize, ClientSegment)>,
}

/// What a client-shaped import changed (or would change).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientImportSummary {
    pub environment: String,
    pub features: ClientImportCounts,
    pub segments: ClientImportCounts,
}

/// Counts of one kind of record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClientImportCounts {
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// Toggles the document does not list whose configuration in the environment was removed
    /// (with `drop`).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One list of a client document, its items still to be read: values, or unparsed JSON
/// (a large document is read item by item, never held whole as values).
enum Items<'a> {
    Values(Vec<Value>),
    Raw(Vec<&'a RawValue>),
}

impl<'a> Items<'a> {
    /// Each item as a value, or what is wrong with it (a key twice).
    fn into_values(self) -> Box<dyn Iterator<Item = Result<Value, DomainError>> + 'a> {
        match self {
            Items::Values(values) => Box::new(values.into_iter().map(Ok)),
            Items::Raw(items) => Box::new(
                items
                    .into_iter()
                    .map(|item| parse_document(item.get().as_bytes(), DocumentFormat::Json)),
            ),
        }
    }
}

/// The top level of a client document: its keys, and its lists (`None`: not a list).
struct Sections<'a> {
    keys: Vec<String>,
    features: Option<Items<'a>>,
    segments: Option<Items<'a>>,
}

/// What a client document that is not an object is told.
fn not_an_object() -> DomainError {
    ValidationErrors::single(
        "",
        "a client document is an object: {\"version\", \"features\", \"segments\"}",
    )
}

/// Reads `value` as a client document: every problem with its path.
pub fn read_client_document(value: Value) -> Result<ClientDocument, DomainError> {
    let Value::Object(sections) = value else {
        return Err(not_an_object());
    };
    let mut read = Sections {
        keys: Vec::new(),
        features: Some(Items::Values(Vec::new())),
        segments: Some(Items::Values(Vec::new())),
    };
    for (key, value) in sections {
        let items = match value {
            Value::Null => Some(Items::Values(Vec::new())),
            Value::Array(items) => Some(Items::Values(items)),
            _ => None,
        };
        match key.as_str() {
            "features" => read.features = items,
            "segments" => read.segments = items,
            _ => {}
        }
        read.keys.push(key);
    }
    read_sections(read)
}

/// Reads `bytes`, written in `format`, as a client document: JSON item by item, YAML as one
/// value. Every problem with its path.
pub fn read_client_document_in(
    bytes: &[u8],
    format: DocumentFormat,
) -> Result<ClientDocument, DomainError> {
    match format.of(bytes) {
        DocumentFormat::Yaml => read_client_document(parse_document(bytes, DocumentFormat::Yaml)?),
        _ => read_client_document_json(bytes),
    }
}

/// Reads the JSON `bytes` as a client document, item by item: every problem with its path.
fn read_client_document_json(bytes: &[u8]) -> Result<ClientDocument, DomainError> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(not_an_object());
    }
    let mut read = Sections {
        keys: Vec::new(),
        features: Some(Items::Raw(Vec::new())),
        segments: Some(Items::Raw(Vec::new())),
    };
    for (key, value) in parse_json_sections(bytes)? {
        let items = match value.get() {
            "null" => Some(Items::Raw(Vec::new())),
            _ => raw_items(value).map(Items::Raw),
        };
        match key.as_str() {
            "features" => read.features = items,
            "segments" => read.segments = items,
            _ => {}
        }
        read.keys.push(key);
    }
    read_sections(read)
}

fn read_sections<'a>(sections: Sections<'a>) -> Result<ClientDocument, DomainError> {
    let mut errors = ValidationErrors::default();
    for key in sections.keys.iter().filter(|k| !KEYS.contains(&k.as_str())) {
        errors.push(
            key.as_str(),
            format!(
                "\"{key}\" is not a key of a client document (known: {})",
                KEYS.join(", ")
            ),
        );
    }
    let mut list = |key: &str, items: Option<Items<'a>>| {
        items.unwrap_or_else(|| {
            errors.push(key, format!("\"{key}\" must be a list"));
            Items::Values(Vec::new())
        })
    };
    let features = list("features", sections.features);
    let segments = list("segments", sections.segments);
    let mut document = ClientDocument::default();
    let mut names = HashSet::new();
    for (i, item) in features.into_values().enumerate() {
        let path = format!("features[{i}]");
        let Some(feature) = read_item::<ClientFeature>(item, &path, &mut errors) else {
            continue;
        };
        refuse_unsupported(
            &feature.extra,
            &path,
            &READ_ONLY_FEATURE_FIELDS,
            &mut errors,
        );
        let length = feature.name.chars().count();
        if length == 0 || length > IMPORTED_NAME_MAX {
            errors.push(
                format!("{path}.name"),
                format!("a toggle name is 1 to {IMPORTED_NAME_MAX} characters long"),
            );
        } else if !names.insert(feature.name.clone()) {
            errors.push(
                format!("{path}.name"),
                format!("the toggle \"{}\" is listed twice", feature.name),
            );
        }
        document.features.push((i, feature));
    }
    let mut ids = HashSet::new();
    for (i, item) in segments.into_values().enumerate() {
        let path = format!("segments[{i}]");
        let Some(segment) = read_item::<ClientSegment>(item, &path, &mut errors) else {
            continue;
        };
        if !ids.insert(segment.id) {
            errors.push(
                format!("{path}.id"),
                format!("the segment {} is listed twice", segment.id),
            );
        }
        document.segments.push((i, segment));
    }
    errors.into_result(document)
}

/// An item as a `T`, or its problems recorded under `path`.
fn read_item<T: DeserializeOwned>(
    item: Result<Value, DomainError>,
    path: &str,
    errors: &mut ValidationErrors,
) -> Option<T> {
    match item {
        Ok(value) => parse_item(value, path, errors),
        Err(problem) => {
            errors.push(path, problem.to_string());
            None
        }
    }
}

/// `base` with `document` imported into `environment`: each listed toggle's configuration in
/// the environment replaced by the document's (toggle-wide fields — type, description,
/// project, stale, impression data, dependencies — taken from it too; an archived toggle of
/// the name is revived), each listed segment written by id, projects the toggles name made
/// when missing; with `drop`, toggles the document does not list lose their configuration in
/// the environment.
pub fn apply_client_document(
    base: &ConfigState,
    document: &ClientDocument,
    environment: &str,
    drop: bool,
    now: DateTime<Utc>,
) -> Result<(ConfigState, ClientImportSummary), DomainError> {
    if !base.environments.contains_key(environment) {
        return Err(ValidationErrors::single(
            "environment",
            format!("there is no environment \"{environment}\"; create it first"),
        ));
    }
    let mut next = base.clone();
    let mut summary = ClientImportSummary {
        environment: environment.to_string(),
        ..Default::default()
    };
    for (_, segment) in &document.segments {
        let key = segment.id.to_string();
        let current = next.segments.get(&key);
        let record = Segment {
            id: segment.id,
            name: segment
                .name
                .clone()
                .unwrap_or_else(|| format!("segment-{}", segment.id)),
            constraints: segment.constraints.clone(),
            ..match current {
                Some(current) => (**current).clone(),
                None => Segment {
                    id: segment.id,
                    name: String::new(),
                    description: None,
                    project: None,
                    constraints: Vec::new(),
                    created_by: None,
                    created_at: now,
                },
            }
        };
        count(&mut summary.segments, current.map(|c| **c == record));
        next.segments.insert(key, Arc::new(record));
    }
    if let Some(highest) = document.segments.iter().map(|(_, s)| u64::from(s.id)).max() {
        let counter = next.counters.entry(SEGMENT_IDS.to_string()).or_insert(0);
        *counter = (*counter).max(highest);
    }
    for (_, feature) in &document.features {
        let project = feature.project.as_deref().unwrap_or(DEFAULT_PROJECT);
        if project != DEFAULT_PROJECT && !next.projects.contains_key(project) {
            next.projects.insert(
                project.to_string(),
                Arc::new(Project::adopted(project, now)),
            );
        }
        let active = next.features.get(&feature.name).cloned();
        let existing = active
            .clone()
            .or_else(|| next.archive.get(&feature.name).cloned());
        let toggle = imported_toggle(feature, existing.as_deref(), environment, now);
        if existing.is_some() && active.is_none() {
            next.archive.remove(&feature.name);
        }
        count(
            &mut summary.features,
            active.as_deref().map(|a| *a == toggle),
        );
        next.features.insert(feature.name.clone(), Arc::new(toggle));
    }
    if drop {
        let listed: HashSet<&str> = document
            .features
            .iter()
            .map(|(_, f)| f.name.as_str())
            .collect();
        let unlisted: Vec<Arc<Toggle>> = next
            .features
            .values()
            .filter(|t| {
                !listed.contains(t.name.as_str()) && t.environments.contains_key(environment)
            })
            .cloned()
            .collect();
        for toggle in unlisted {
            let mut dropped = (*toggle).clone();
            dropped.environments.remove(environment);
            summary.features.dropped += 1;
            next.features
                .insert(dropped.name.to_string(), Arc::new(dropped));
        }
    }
    Ok((next, summary))
}

fn count(counts: &mut ClientImportCounts, same_as_before: Option<bool>) {
    match same_as_before {
        None => counts.created += 1,
        Some(true) => counts.unchanged += 1,
        Some(false) => counts.updated += 1,
    }
}

/// `feature` as a stored toggle: `existing`'s other environments, tags and timestamps kept,
/// strategy ids kept position by position.
fn imported_toggle(
    feature: &ClientFeature,
    existing: Option<&Toggle>,
    environment: &str,
    now: DateTime<Utc>,
) -> Toggle {
    let mut strategies = feature.strategies.clone();
    let previous = existing.map_or(&[][..], |t| &t.environment(environment).strategies[..]);
    assign_ids(&mut strategies, previous);
    let variants = feature
        .variants
        .iter()
        .map(|v| Variant {
            name: v.name.clone(),
            weight: v.weight,
            weight_type: v.weight_type.unwrap_or(WeightType::Variable),
            stickiness: v.stickiness.clone().unwrap_or_else(|| "default".into()),
            payload: v.payload.clone(),
            overrides: v.overrides.clone(),
        })
        .collect();
    let mut toggle = match existing {
        Some(existing) => Toggle {
            archived_at: None,
            ..existing.clone()
        },
        None => Toggle {
            name: feature.name.as_str().into(),
            description: Text::default(),
            kind: DEFAULT_TYPE.into(),
            project: DEFAULT_PROJECT.into(),
            stale: false,
            impression_data: None,
            dependencies: Vec::new(),
            environments: Default::default(),
            created_at: now,
            last_seen_at: None,
            tags: Vec::new(),
            archived_at: None,
        },
    };
    toggle.description = feature.description.as_deref().unwrap_or("").into();
    toggle.kind = feature.kind.as_deref().unwrap_or(DEFAULT_TYPE).into();
    toggle.project = feature.project.as_deref().unwrap_or(DEFAULT_PROJECT).into();
    toggle.stale = feature.stale.unwrap_or(false);
    toggle.impression_data = feature.impression_data;
    toggle.dependencies = feature.dependencies.clone();
    *toggle.environment_mut(environment) = FeatureEnvironment {
        enabled: feature.enabled,
        strategies,
        variants,
    };
    toggle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::environment::seeded_environments;
    use serde_json::json;

    fn state() -> ConfigState {
        let mut state = ConfigState::default();
        for environment in seeded_environments(Utc::now()) {
            state
                .environments
                .insert(environment.name.clone(), Arc::new(environment));
        }
        state
    }

    #[test]
    fn what_the_admin_api_refuses_is_stored_as_written() {
        let document = read_client_document(json!({"version": 2, "features": [
            {"name": "Feature.UTF-8.Hellø_Wørld", "enabled": true, "strategies": [
                {"name": "default", "parameters": {}, "segments": [404],
                 "constraints": [{"contextName": "x", "operator": "NOT_A_VALID_OPERATOR", "values": []}],
                 "variants": [{"name": "a", "weight": 1}]}],
             "variants": [{"name": "v", "weight": 33, "payload": {"type": "number", "value": "1"}}],
             "dependencies": [{"feature": "a"}, {"feature": "b", "enabled": false}]}],
            "segments": [{"id": 7, "name": "s", "constraints": []}]}))
        .expect("reads");
        let (next, summary) =
            apply_client_document(&state(), &document, "production", false, Utc::now())
                .expect("applies");
        assert_eq!(summary.features.created, 1);
        assert_eq!(summary.segments.created, 1);
        let toggle = &next.features["Feature.UTF-8.Hellø_Wørld"];
        let production = toggle.environment("production");
        assert!(production.enabled);
        assert_eq!(production.strategies[0].segments, [404]);
        assert_eq!(production.variants[0].weight, 33);
        assert_eq!(toggle.dependencies.len(), 2);
        assert!(!toggle.default_environment().enabled);
        let constraint =
            serde_json::to_value(&production.strategies[0].constraints[0]).expect("json");
        assert_eq!(constraint["operator"], "NOT_A_VALID_OPERATOR");
        assert_eq!(next.counters[SEGMENT_IDS], 7);
        // The same document again changes nothing.
        let (again, summary) =
            apply_client_document(&next, &document, "production", false, Utc::now())
                .expect("applies");
        assert_eq!(summary.features.unchanged, 1);
        assert_eq!(summary.segments.unchanged, 1);
        assert_eq!(again.features, next.features);
    }

    #[test]
    fn problems_are_reported_with_their_paths() {
        let err = read_client_document(
            json!({"features": [{"name": ""}, {"name": "a", "enabled": "yes"},
            {"name": "b", "owner": "x"}, {"name": "b"}], "extra": 1}),
        )
        .unwrap_err();
        let DomainError::Invalid(errors) = err else {
            panic!("not a validation error")
        };
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "extra",
                "features[0].name",
                "features[1].enabled",
                "features[2].owner",
                "features[3].name"
            ]
        );
        let document = read_client_document(json!({"features": []})).expect("reads");
        assert!(apply_client_document(&state(), &document, "nowhere", false, Utc::now()).is_err());
    }

    #[test]
    fn json_is_read_item_by_item_as_values_are() {
        let bytes = br#"{"version": 2, "features": [{"name": "a", "enabled": true},
            {"name": "b", "name": "c"}, {"name": "d", "enabled": "yes"}], "segments": null}"#;
        let DomainError::Invalid(errors) =
            read_client_document_in(bytes, DocumentFormat::Sniff).unwrap_err()
        else {
            panic!("not a validation error")
        };
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["features[1]", "features[2].enabled"]);
        assert!(errors.0[0].message.contains("appears twice"), "{errors:?}");
        let read = read_client_document_in(
            br#"{"features": [{"name": "a", "enabled": true}]}"#,
            DocumentFormat::Json,
        )
        .expect("reads");
        assert_eq!(read.features[0].1.name, "a");
        let yaml = read_client_document_in(b"features:\n  - name: a\n", DocumentFormat::Sniff)
            .expect("reads YAML");
        assert_eq!(yaml.features[0].1.name, "a");
        for bad in [&b"[]"[..], b"{\"features\": 1}", b"{\"features\": []} x"] {
            assert!(read_client_document_in(bad, DocumentFormat::Json).is_err());
        }
    }

    #[test]
    fn drop_removes_the_environment_of_unlisted_toggles_only() {
        let first = read_client_document(json!({"features": [
            {"name": "a", "enabled": true, "strategies": []}, {"name": "b", "enabled": true}]}))
        .expect("reads");
        let (state, _) = apply_client_document(&state(), &first, "production", false, Utc::now())
            .expect("applies");
        let (state, _) = apply_client_document(&state, &first, "development", false, Utc::now())
            .expect("applies");
        let second = read_client_document(json!({"features": [{"name": "a", "enabled": false}]}))
            .expect("reads");
        let (state, summary) =
            apply_client_document(&state, &second, "production", true, Utc::now())
                .expect("applies");
        assert_eq!(summary.features.dropped, 1);
        assert!(!state.features["b"].environments.contains_key("production"));
        assert!(state.features["b"].environment("development").enabled);
    }
}
