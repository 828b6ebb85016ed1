//! Reading an import document: every section and item checked on its own, every problem
//! recorded with its path (`features[3].strategies[0].name`), the valid items kept so that
//! their references can be checked too.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::addons::{read_addons, ListedAddon};
use super::archived::{read_archived, ArchivedName};
use super::environments::{
    read_environments, read_feature_environments, ImportedFeatureEnvironment,
};
use super::segments::read_segments;
use super::tokens::read_tokens;
use crate::domain::api_token::ApiToken;
use crate::domain::context_field::{is_built_in, ContextField, ContextFieldSpec};
use crate::domain::environment::Environment;
use crate::domain::export::DOCUMENT_VERSION;
use crate::domain::fields::{refuse_unsupported, says_nothing, ExtraFields};
use crate::domain::name::{check_name, NAME_MAX};
use crate::domain::project::{Project, ProjectSpec};
use crate::domain::segment::Segment;
use crate::domain::strategy::{built_in_strategies, StrategyDefinition, StrategyDefinitionSpec};
use crate::domain::tag::{TagRef, TagSpec, TagType, TagTypeSpec};
use crate::domain::toggle::{StrategySpec, ToggleSpec, ValidToggle};
use crate::domain::{DomainError, ValidationErrors};

/// The top-level keys a document may have.
const KEYS: [&str; 14] = [
    "version",
    "features",
    "strategies",
    "projects",
    "contextFields",
    "tagTypes",
    "tags",
    "featureTags",
    "environments",
    "featureEnvironments",
    "segments",
    "archivedFeatures",
    "apiTokens",
    "addons",
];

/// The keys only a version-2 document (a whole instance) may have.
const INSTANCE_KEYS: [&str; 6] = [
    "environments",
    "featureEnvironments",
    "segments",
    "archivedFeatures",
    "apiTokens",
    "addons",
];

/// The valid items of a document, section by section (`None`: the section is absent), each
/// with its index in the document.
#[derive(Debug, Default)]
pub struct ImportDocument {
    pub features: Option<Vec<(usize, ImportedToggle)>>,
    pub strategies: Option<Vec<(usize, StrategyDefinition)>>,
    pub projects: Option<Vec<(usize, Project)>>,
    pub context_fields: Option<Vec<(usize, ContextField)>>,
    pub tag_types: Option<Vec<(usize, TagType)>>,
    pub tags: Option<Vec<(usize, TagRef)>>,
    pub feature_tags: Option<Vec<(usize, FeatureTagRef)>>,
    pub environments: Option<Vec<(usize, Environment)>>,
    pub feature_environments: Option<Vec<(usize, ImportedFeatureEnvironment)>>,
    pub segments: Option<Vec<(usize, Segment)>>,
    pub archived_features: Option<Vec<(usize, ArchivedName)>>,
    pub api_tokens: Option<Vec<(usize, ApiToken)>>,
    pub addons: Option<Vec<(usize, ListedAddon)>>,
}

/// A toggle of the document, with its `createdAt` when it has a valid one.
#[derive(Debug, Clone)]
pub struct ImportedToggle {
    pub toggle: ValidToggle,
    pub created_at: Option<DateTime<Utc>>,
}

/// A tag on a toggle, as the document names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FeatureTagRef {
    pub feature_name: String,
    pub tag: TagRef,
}

/// A `featureTags` item as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FeatureTagSpec {
    feature_name: Option<String>,
    tag_type: Option<String>,
    tag_value: Option<String>,
    #[serde(flatten)]
    extra: ExtraFields,
}

/// Reads `value` (JSON, or YAML turned into JSON): the valid items and every problem found.
/// Items are stamped `now` unless they carry a valid `createdAt`.
pub fn read_document(value: Value, now: DateTime<Utc>) -> (ImportDocument, ValidationErrors) {
    let mut errors = ValidationErrors::default();
    let Value::Object(mut sections) = value else {
        errors.push(
            "",
            "the document must be an object with the sections to import",
        );
        return (ImportDocument::default(), errors);
    };
    for key in sections.keys() {
        if !KEYS.contains(&key.as_str()) {
            errors.push(
                key.as_str(),
                format!(
                    "\"{key}\" is not a section of the document (known: {})",
                    KEYS.join(", ")
                ),
            );
        }
    }
    match sections.get("version") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_u64() == Some(u64::from(DOCUMENT_VERSION)) => {}
        Some(v) if v.as_u64() == Some(1) => {
            for key in INSTANCE_KEYS.iter().filter(|k| sections.contains_key(**k)) {
                errors.push(
                    *key,
                    format!("\"{key}\" is a section of version {DOCUMENT_VERSION} documents"),
                );
            }
        }
        Some(v) => errors.push(
            "version",
            format!("\"version\" must be 1 or {DOCUMENT_VERSION}, got {v}"),
        ),
    }
    // A whole instance's toggles are configured per environment, nowhere else.
    let per_environment = sections.contains_key("featureEnvironments");
    let mut section = |name: &str| items(&mut sections, name, &mut errors);
    let raw = RawSections {
        features: section("features"),
        strategies: section("strategies"),
        projects: section("projects"),
        context_fields: section("contextFields"),
        tag_types: section("tagTypes"),
        tags: section("tags"),
        feature_tags: section("featureTags"),
        environments: section("environments"),
        feature_environments: section("featureEnvironments"),
        segments: section("segments"),
        archived_features: section("archivedFeatures"),
        api_tokens: section("apiTokens"),
        addons: section("addons"),
    };
    let document = ImportDocument {
        features: raw
            .features
            .map(|list| features(list, per_environment, &mut errors)),
        strategies: raw.strategies.map(|list| strategies(list, &mut errors)),
        projects: raw.projects.map(|list| projects(list, now, &mut errors)),
        context_fields: raw
            .context_fields
            .map(|list| context_fields(list, now, &mut errors)),
        tag_types: raw.tag_types.map(|list| {
            parse_each::<TagTypeSpec, _>(list, "tagTypes", &mut errors, |spec| spec.validate(None))
        }),
        tags: raw
            .tags
            .map(|list| parse_each::<TagSpec, _>(list, "tags", &mut errors, TagSpec::validate)),
        feature_tags: raw.feature_tags.map(|list| feature_tags(list, &mut errors)),
        environments: raw
            .environments
            .map(|list| read_environments(list, now, &mut errors)),
        feature_environments: raw
            .feature_environments
            .map(|list| read_feature_environments(list, &mut errors)),
        segments: raw
            .segments
            .map(|list| read_segments(list, now, &mut errors)),
        archived_features: raw
            .archived_features
            .map(|list| read_archived(list, &mut errors)),
        api_tokens: raw
            .api_tokens
            .map(|list| read_tokens(list, now, &mut errors)),
        addons: raw.addons.map(|list| read_addons(list, now, &mut errors)),
    };
    refuse_duplicates(&document, &mut errors);
    (document, errors)
}

struct RawSections {
    features: Option<Vec<(usize, Value)>>,
    strategies: Option<Vec<(usize, Value)>>,
    projects: Option<Vec<(usize, Value)>>,
    context_fields: Option<Vec<(usize, Value)>>,
    tag_types: Option<Vec<(usize, Value)>>,
    tags: Option<Vec<(usize, Value)>>,
    feature_tags: Option<Vec<(usize, Value)>>,
    environments: Option<Vec<(usize, Value)>>,
    feature_environments: Option<Vec<(usize, Value)>>,
    segments: Option<Vec<(usize, Value)>>,
    archived_features: Option<Vec<(usize, Value)>>,
    api_tokens: Option<Vec<(usize, Value)>>,
    addons: Option<Vec<(usize, Value)>>,
}

/// The items of section `name` (`None` when absent or null); a section that is not a list is
/// a problem.
fn items(
    sections: &mut Map<String, Value>,
    name: &str,
    errors: &mut ValidationErrors,
) -> Option<Vec<(usize, Value)>> {
    match sections.remove(name)? {
        Value::Null => None,
        Value::Array(items) => Some(items.into_iter().enumerate().collect()),
        _ => {
            errors.push(name, format!("\"{name}\" must be a list"));
            None
        }
    }
}

/// Deserialises one item into its spec type, naming the path of a type mismatch.
pub(super) fn parse_item<T: DeserializeOwned>(
    item: Value,
    path: &str,
    errors: &mut ValidationErrors,
) -> Option<T> {
    serde_path_to_error::deserialize(item)
        .map_err(|e| {
            let inner = e.path().to_string();
            let at = if inner == "." {
                path.to_string()
            } else {
                format!("{path}.{inner}")
            };
            errors.push(
                at.clone(),
                format!("invalid value at \"{at}\": {}", e.into_inner()),
            );
        })
        .ok()
}

/// Parses and validates every item of a section with `validate`.
fn parse_each<S: DeserializeOwned, T>(
    list: Vec<(usize, Value)>,
    section: &str,
    errors: &mut ValidationErrors,
    validate: impl Fn(S) -> Result<T, DomainError>,
) -> Vec<(usize, T)> {
    list.into_iter()
        .filter_map(|(i, item)| {
            let path = format!("{section}[{i}]");
            let spec = parse_item::<S>(item, &path, errors)?;
            errors.absorb(&path, validate(spec)).map(|v| (i, v))
        })
        .collect()
}

/// `result` with one more problem at `path`.
fn with_problem<T>(
    result: Result<T, DomainError>,
    path: &str,
    message: &str,
) -> Result<T, DomainError> {
    let mut errors = match result {
        Err(DomainError::Invalid(errors)) => errors,
        _ => ValidationErrors::default(),
    };
    errors.push(path, message);
    Err(DomainError::Invalid(errors))
}

/// The `createdAt` an exported item carries, when it is a valid timestamp.
fn created_at(extra: &ExtraFields) -> Option<DateTime<Utc>> {
    extra
        .get("createdAt")
        .and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

fn features(
    list: Vec<(usize, Value)>,
    per_environment: bool,
    errors: &mut ValidationErrors,
) -> Vec<(usize, ImportedToggle)> {
    parse_each::<ToggleSpec, _>(list, "features", errors, |mut spec| {
        let created_at = created_at(&spec.extra);
        // A toggle body's `tags` are ignored (responses carry them); a document's tags on
        // toggles are `featureTags`, and one written by hand must not lose them silently.
        let tagged = spec.extra.get("tags").is_some_and(|t| !says_nothing(t));
        let configured_here =
            spec.enabled.is_some() || spec.strategies.is_some() || spec.variants.is_some();
        if per_environment {
            // Checked as a 3.x toggle with one placeholder strategy, taken off again: its
            // configuration comes from `featureEnvironments`.
            spec.strategies = Some(vec![StrategySpec {
                name: Some("default".into()),
                ..StrategySpec::default()
            }]);
        }
        let mut result = spec
            .validate(None)
            .map(|mut toggle| {
                if per_environment {
                    toggle.strategies.clear();
                }
                toggle
            })
            .map(|toggle| ImportedToggle { toggle, created_at });
        if per_environment && configured_here {
            result = with_problem(
                result,
                "strategies",
                "with \"featureEnvironments\", a toggle's \"enabled\", \"strategies\" and \
                 \"variants\" are given per environment there, not on the toggle",
            );
        }
        if tagged {
            return with_problem(
                result,
                "tags",
                "a state document carries tags on toggles in \"featureTags\" \
                 ({featureName, tagType, tagValue})",
            );
        }
        result
    })
}

fn strategies(
    list: Vec<(usize, Value)>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, StrategyDefinition)> {
    let built_ins: Vec<String> = built_in_strategies().into_iter().map(|s| s.name).collect();
    parse_each::<StrategyDefinitionSpec, _>(list, "strategies", errors, |spec| {
        let deprecated = match spec.extra.get("deprecated") {
            None | Some(Value::Null) => Some(false),
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => None,
        };
        let mut result = spec.validate(None);
        if let Ok(strategy) = &result {
            if built_ins.contains(&strategy.name) {
                result = with_problem(
                    result,
                    "name",
                    "this is a built-in strategy; built-ins are not imported (exports leave them out)",
                );
            }
        }
        match deprecated {
            Some(deprecated) => result.map(|mut strategy| {
                strategy.deprecated = deprecated;
                strategy
            }),
            None => with_problem(result, "deprecated", "\"deprecated\" must be true or false"),
        }
    })
}

fn projects(
    list: Vec<(usize, Value)>,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, Project)> {
    parse_each::<ProjectSpec, _>(list, "projects", errors, |spec| {
        let created = created_at(&spec.extra).unwrap_or(now);
        spec.validate(None)
            .map(|valid| Project::create(valid, created))
    })
}

fn context_fields(
    list: Vec<(usize, Value)>,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, ContextField)> {
    parse_each::<ContextFieldSpec, _>(list, "contextFields", errors, |spec| {
        let created = created_at(&spec.extra).unwrap_or(now);
        spec.validate(None).map(|valid| {
            let mut field = ContextField::create(valid, created);
            field.built_in = is_built_in(&field.name);
            field
        })
    })
}

fn feature_tags(
    list: Vec<(usize, Value)>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, FeatureTagRef)> {
    list.into_iter()
        .filter_map(|(i, item)| {
            let path = format!("featureTags[{i}]");
            let spec = parse_item::<FeatureTagSpec>(item, &path, errors)?;
            let before = errors.0.len();
            refuse_unsupported(&spec.extra, &path, &[], errors);
            let feature_name = spec.feature_name.unwrap_or_default();
            if let Err(m) = check_name("featureName", &feature_name, 2, NAME_MAX) {
                errors.push(format!("{path}.featureName"), m);
            }
            let tag = TagSpec {
                kind: spec.tag_type,
                value: spec.tag_value,
                extra: ExtraFields::new(),
            }
            .validate()
            // The tag's own paths are `type` and `value`; here they are `tagType`/`tagValue`.
            .map_err(|e| match e {
                DomainError::Invalid(mut problems) => {
                    for p in &mut problems.0 {
                        p.path = match p.path.as_str() {
                            "type" => "tagType".into(),
                            "value" => "tagValue".into(),
                            other => other.into(),
                        };
                    }
                    DomainError::Invalid(problems)
                }
                other => other,
            });
            let tag = errors.absorb(&path, tag)?;
            (errors.0.len() == before).then_some((i, FeatureTagRef { feature_name, tag }))
        })
        .collect()
}

/// Refuses a name that appears twice in one section.
fn refuse_duplicates(document: &ImportDocument, errors: &mut ValidationErrors) {
    fn check<'a, T>(
        section: &str,
        field: &str,
        items: Option<&'a Vec<(usize, T)>>,
        key: impl Fn(&'a T) -> String,
        errors: &mut ValidationErrors,
    ) {
        let mut first: HashMap<String, usize> = HashMap::new();
        for (i, item) in items.into_iter().flatten() {
            let key = key(item);
            if let Some(earlier) = first.get(&key) {
                errors.push(
                    format!("{section}[{i}].{field}"),
                    format!(
                        "\"{key}\" appears twice in \"{section}\" (also at {section}[{earlier}])"
                    ),
                );
            } else {
                first.insert(key, *i);
            }
        }
    }
    check(
        "features",
        "name",
        document.features.as_ref(),
        |t| t.toggle.name.clone(),
        errors,
    );
    check(
        "strategies",
        "name",
        document.strategies.as_ref(),
        |s| s.name.clone(),
        errors,
    );
    check(
        "projects",
        "id",
        document.projects.as_ref(),
        |p| p.id.clone(),
        errors,
    );
    check(
        "contextFields",
        "name",
        document.context_fields.as_ref(),
        |f| f.name.clone(),
        errors,
    );
    check(
        "tagTypes",
        "name",
        document.tag_types.as_ref(),
        |t| t.name.clone(),
        errors,
    );
    check("tags", "value", document.tags.as_ref(), TagRef::key, errors);
    check(
        "featureTags",
        "tagValue",
        document.feature_tags.as_ref(),
        |f| format!("{}:{}", f.feature_name, f.tag.key()),
        errors,
    );
}
