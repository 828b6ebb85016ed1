//! Feature toggles, their activation strategies, constraints and variants, and the rules that
//! turn an untrusted input document into a valid toggle (API-FACTS §11.2, §14).

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use litemap::LiteMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::constraint::ConstraintSpec;
pub use super::constraint::{Constraint, Operator};
use super::context_field::is_built_in;
use super::error::{DomainError, ValidationErrors};
use super::exact_capacity;
use super::fields::{refuse_unsupported, ExtraFields};
use super::known::KnownNames;
use super::name::{check_name, NAME_MAX};
use super::project::DEFAULT_PROJECT;
use super::tag::TagRef;
use super::text::Text;

/// The toggle type used when none is given.
pub const DEFAULT_TYPE: &str = "release";

/// A stored feature toggle, active or archived.
///
/// `Eq` matters for speed: two `Arc<Toggle>` of an `Eq` type compare equal by pointer before
/// comparing contents, so diffing two versions' toggle maps passes over the toggles they share
/// instead of comparing each field of every toggle near a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toggle {
    pub name: Text,
    #[serde(default)]
    pub description: Text,
    #[serde(rename = "type")]
    pub kind: Text,
    pub project: Text,
    pub enabled: bool,
    pub stale: bool,
    #[serde(deserialize_with = "exact_capacity::vec")]
    pub strategies: Vec<Strategy>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    pub variants: Vec<Variant>,
    /// Whether SDKs emit impression events for this toggle; absent unless it was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impression_data: Option<bool>,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Tags carried by the toggle, in the order they were added.
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    pub tags: Vec<TagRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<DateTime<Utc>>,
}

/// A strategy's parameters, in key order. A sorted vector rather than a `BTreeMap`: a map of
/// two or three entries then takes one small allocation, not a B-tree node of eleven slots
/// (at 10,000 toggles, about 6 MiB less).
pub type Parameters = LiteMap<Text, Text>;

/// Writes parameters as an object, also when empty (`LiteMap` on its own writes an empty map
/// as `[]` in human-readable formats).
pub fn serialize_parameters<S: serde::Serializer>(
    parameters: &Parameters,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(parameters.iter())
}

/// An activation strategy on a toggle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    #[schema(value_type = String)]
    pub name: Text,
    #[serde(
        default,
        serialize_with = "serialize_parameters",
        deserialize_with = "exact_capacity::lite_map"
    )]
    #[schema(value_type = BTreeMap<String, String>)]
    pub parameters: Parameters,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_capacity::vec"
    )]
    pub constraints: Vec<Constraint>,
}

/// A variant of a toggle (spec §2.4, API-FACTS §14).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    #[schema(value_type = String)]
    pub name: Text,
    pub weight: u16,
    pub weight_type: WeightType,
    #[schema(value_type = String)]
    pub stickiness: Text,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    pub overrides: Vec<Override>,
}

/// How a variant's weight is treated when weights are redistributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WeightType {
    Variable,
    Fix,
}

/// A variant payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Payload {
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: Text,
    #[schema(value_type = String)]
    pub value: Text,
}

/// Selects a variant when a context field has one of the values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Override {
    #[schema(value_type = String)]
    pub context_name: Text,
    #[serde(deserialize_with = "exact_capacity::vec")]
    #[schema(value_type = Vec<String>)]
    pub values: Vec<Text>,
}

/// A toggle as sent to create or replace it; every field optional so that all problems are
/// reported at once instead of the first one serde meets.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToggleSpec {
    /// Required on create; on replace, when sent, it must be the name in the path.
    #[schema(
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "my-feature"
    )]
    pub name: Option<String>,
    pub description: Option<String>,
    /// Not blank; `release` when not sent.
    #[serde(rename = "type")]
    #[schema(pattern = "\\S", example = "release")]
    pub kind: Option<String>,
    /// An existing project; `default` when not sent.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "default"
    )]
    pub project: Option<String>,
    pub enabled: Option<bool>,
    pub stale: Option<bool>,
    #[schema(required = true, nullable = false, min_items = 1)]
    pub strategies: Option<Vec<StrategySpec>>,
    pub variants: Option<Vec<VariantSpec>>,
    pub impression_data: Option<bool>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Toggle fields that responses and exports carry and tools echo back in a body; ignored
/// (`strategy` and `parameters` are the legacy pair of archive listings).
const READ_ONLY_TOGGLE_FIELDS: [&str; 6] = [
    "createdAt",
    "lastSeenAt",
    "tags",
    "archivedAt",
    "strategy",
    "parameters",
];

/// A strategy as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct StrategySpec {
    #[schema(
        required = true,
        nullable = false,
        min_length = 1,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "default"
    )]
    pub name: Option<String>,
    /// Strings; numbers, booleans and null are stored as text.
    #[schema(value_type = Option<BTreeMap<String, ParameterValue>>)]
    pub parameters: Option<BTreeMap<String, Value>>,
    pub constraints: Option<Vec<ConstraintSpec>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// A strategy parameter's value as sent (documentation only): a string, or a number,
/// boolean or null, which are stored as text (an array or object is refused).
pub struct ParameterValue;

impl utoipa::PartialSchema for ParameterValue {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([
                Type::String,
                Type::Number,
                Type::Boolean,
                Type::Null,
            ]))
            .into()
    }
}

impl utoipa::ToSchema for ParameterValue {}

/// A variant as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariantSpec {
    /// Unique among the toggle's variants.
    #[schema(
        required = true,
        nullable = false,
        min_length = 1,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$"
    )]
    pub name: Option<String>,
    /// A whole number.
    #[schema(
        required = true,
        nullable = false,
        minimum = 0,
        maximum = 1000,
        multiple_of = 1
    )]
    pub weight: Option<f64>,
    #[schema(value_type = Option<WeightType>)]
    pub weight_type: Option<String>,
    pub stickiness: Option<String>,
    pub payload: Option<PayloadSpec>,
    pub overrides: Option<Vec<OverrideSpec>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// A payload as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct PayloadSpec {
    #[serde(rename = "type")]
    #[schema(required = true, nullable = false)]
    pub kind: Option<String>,
    #[schema(required = true, nullable = false)]
    pub value: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// An override as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverrideSpec {
    #[schema(required = true, nullable = false, min_length = 1)]
    pub context_name: Option<String>,
    #[schema(value_type = Option<Vec<String>>)]
    pub values: Option<Vec<Text>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// The validated, defaulted content of a [`ToggleSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidToggle {
    pub name: String,
    pub description: Option<String>,
    pub kind: String,
    pub project: String,
    pub enabled: bool,
    pub stale: bool,
    pub strategies: Vec<Strategy>,
    pub variants: Vec<Variant>,
    pub impression_data: Option<bool>,
}

/// Checks a toggle name (URL friendly, 2–100 characters).
pub fn validate_toggle_name(name: &str) -> Result<(), DomainError> {
    check_name("name", name, 2, NAME_MAX).map_err(|m| ValidationErrors::single("name", m))
}

impl ToggleSpec {
    /// Validates the document and applies the defaults of API-FACTS §11.2; what it refers to
    /// (project, context fields) is checked in `references` when given (an import checks them
    /// in the configuration it is about to make instead).
    pub fn validate(self, references: Option<&dyn KnownNames>) -> Result<ValidToggle, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &READ_ONLY_TOGGLE_FIELDS, &mut errors);
        let name = match self.name {
            Some(name) => {
                if let Err(m) = check_name("name", &name, 2, NAME_MAX) {
                    errors.push("name", m);
                }
                name
            }
            None => {
                errors.push("name", "\"name\" is required");
                String::new()
            }
        };
        let kind = self.kind.unwrap_or_else(|| DEFAULT_TYPE.to_string());
        if kind.trim().is_empty() {
            errors.push("type", "\"type\" is not allowed to be empty");
        }
        let project = self.project.unwrap_or_else(|| DEFAULT_PROJECT.to_string());
        if let Err(m) = check_name("project", &project, 1, NAME_MAX) {
            errors.push("project", m);
        } else if let Some(state) = references {
            check_project(&project, state, &mut errors);
        }
        let strategies = match self.strategies {
            Some(list) if !list.is_empty() => list
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    validate_strategy(s, &format!("strategies[{i}]"), references, &mut errors)
                })
                .collect(),
            Some(_) => {
                errors.push("strategies", "\"strategies\" must contain at least 1 items");
                Vec::new()
            }
            None => {
                errors.push("strategies", "\"strategies\" is required");
                Vec::new()
            }
        };
        let variants = validate_variants(self.variants.unwrap_or_default(), &mut errors);
        errors.into_result(ValidToggle {
            name,
            description: self.description,
            kind,
            project,
            enabled: self.enabled.unwrap_or(false),
            stale: self.stale.unwrap_or(false),
            strategies,
            variants,
            impression_data: self.impression_data,
        })
    }
}

impl ValidToggle {
    /// Checks again what the toggle refers to, in `state` (the state a write is decided on,
    /// which may be newer than the one it was validated against).
    pub fn check_references(&self, state: &dyn KnownNames) -> Result<(), DomainError> {
        check_references(&self.project, &self.strategies, state)
    }
}

/// The project and the constraints' context fields of a toggle exist in `state` (and the
/// constraints' values are legal for their fields).
fn check_references(
    project: &str,
    strategies: &[Strategy],
    state: &dyn KnownNames,
) -> Result<(), DomainError> {
    let mut errors = ValidationErrors::default();
    check_project(project, state, &mut errors);
    for (i, strategy) in strategies.iter().enumerate() {
        for (j, constraint) in strategy.constraints.iter().enumerate() {
            check_context_field(
                constraint,
                state,
                &format!("strategies[{i}].constraints[{j}]"),
                &mut errors,
            );
        }
    }
    errors.into_result(())
}

/// A toggle's project must exist. `default` exists by rule, stored or not (a store that lost
/// everything takes writes before it is seeded again).
fn check_project(project: &str, state: &dyn KnownNames, errors: &mut ValidationErrors) {
    if project != DEFAULT_PROJECT && !state.has_project(project) {
        errors.push(
            "project",
            format!(
                "there is no project \"{project}\"; create it first (POST /api/admin/projects)"
            ),
        );
    }
}

/// A constraint's context field must exist (built-in fields do by rule) and its values be
/// legal for it.
fn check_context_field(
    constraint: &Constraint,
    state: &dyn KnownNames,
    path: &str,
    errors: &mut ValidationErrors,
) {
    let name = &constraint.context_name;
    let field = state.context_field(name.as_str());
    if field.is_none() && is_built_in(name) {
        return;
    }
    constraint.check_field(field, path, errors);
}

fn validate_strategy(
    spec: StrategySpec,
    path: &str,
    references: Option<&dyn KnownNames>,
    errors: &mut ValidationErrors,
) -> Strategy {
    refuse_unsupported(&spec.extra, path, &[], errors);
    let name = spec.name.unwrap_or_default();
    if let Err(m) = check_name("name", &name, 1, NAME_MAX) {
        errors.push(format!("{path}.name"), m);
    }
    let mut parameters = Parameters::new();
    for (key, value) in spec.parameters.unwrap_or_default() {
        // Clients evaluate parameters as strings; numbers and booleans are accepted for
        // convenience and stored in their string form.
        let text = match value {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
            _ => {
                errors.push(
                    format!("{path}.parameters.{key}"),
                    format!("\"{key}\" must be a string"),
                );
                continue;
            }
        };
        parameters.insert(key.into(), text.into());
    }
    let constraints = spec
        .constraints
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let path = format!("{path}.constraints[{i}]");
            let constraint = c.validate(&path, errors)?;
            if let Some(state) = references {
                check_context_field(&constraint, state, &path, errors);
            }
            Some(constraint)
        })
        .collect();
    Strategy {
        name: name.into(),
        parameters,
        constraints,
    }
}

/// Validates variants: unique names, weights 0–1000, known weight types (API-FACTS §14).
pub fn validate_variants(specs: Vec<VariantSpec>, errors: &mut ValidationErrors) -> Vec<Variant> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        let path = format!("variants[{i}]");
        let before = errors.0.len();
        refuse_unsupported(&spec.extra, &path, &[], errors);
        let name = spec.name.unwrap_or_default();
        if let Err(m) = check_name("name", &name, 1, NAME_MAX) {
            errors.push(format!("{path}.name"), m);
        } else if !seen.insert(name.clone()) {
            errors.push(
                format!("{path}.name"),
                format!("variant name \"{name}\" is used twice; names must be unique"),
            );
        }
        let weight = match spec.weight {
            Some(w) if (0.0..=1000.0).contains(&w) && w.fract() == 0.0 => w as u16,
            Some(_) => {
                errors.push(
                    format!("{path}.weight"),
                    "\"weight\" must be a whole number from 0 to 1000",
                );
                0
            }
            None => {
                errors.push(format!("{path}.weight"), "\"weight\" is required");
                0
            }
        };
        let weight_type = match spec.weight_type.as_deref() {
            None | Some("variable") => WeightType::Variable,
            Some("fix") => WeightType::Fix,
            Some(_) => {
                errors.push(
                    format!("{path}.weightType"),
                    format!("\"{path}.weightType\" must be one of [variable, fix]"),
                );
                WeightType::Variable
            }
        };
        let payload = spec.payload.and_then(|p| {
            refuse_unsupported(&p.extra, &format!("{path}.payload"), &[], errors);
            match (p.kind, p.value) {
                (Some(kind), Some(value)) => Some(Payload {
                    kind: kind.into(),
                    value: value.into(),
                }),
                _ => {
                    errors.push(
                        format!("{path}.payload"),
                        "\"payload\" needs both \"type\" and \"value\"",
                    );
                    None
                }
            }
        });
        let overrides = spec
            .overrides
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter_map(|(j, o)| {
                refuse_unsupported(&o.extra, &format!("{path}.overrides[{j}]"), &[], errors);
                match o.context_name {
                    Some(context_name) if !context_name.is_empty() => Some(Override {
                        context_name: context_name.into(),
                        values: o.values.unwrap_or_default(),
                    }),
                    _ => {
                        errors.push(
                            format!("{path}.overrides[{j}].contextName"),
                            "\"contextName\" is required",
                        );
                        None
                    }
                }
            })
            .collect();
        if errors.0.len() == before {
            out.push(Variant {
                name: name.into(),
                weight,
                weight_type,
                stickiness: spec
                    .stickiness
                    .map_or_else(|| Text::from("default"), Text::from),
                payload,
                overrides,
            });
        }
    }
    out
}

impl Toggle {
    /// A new active toggle from validated input.
    pub fn create(valid: ValidToggle, now: DateTime<Utc>) -> Self {
        Self {
            name: valid.name.into(),
            description: valid.description.map(Text::from).unwrap_or_default(),
            kind: valid.kind.into(),
            project: valid.project.into(),
            enabled: valid.enabled,
            stale: valid.stale,
            strategies: valid.strategies,
            variants: valid.variants,
            impression_data: valid.impression_data,
            created_at: now,
            last_seen_at: None,
            tags: Vec::new(),
            archived_at: None,
        }
    }

    /// Checks what the toggle refers to in `state` (before reviving it: a context field its
    /// constraints use may have been deleted while it was archived).
    pub fn check_references(&self, state: &dyn KnownNames) -> Result<(), DomainError> {
        check_references(&self.project, &self.strategies, state)
    }

    /// PUT semantics (API-FACTS §11.2): the document replaces the toggle; an omitted
    /// description keeps the old one; tags and timestamps are not part of the document.
    pub fn replaced_by(&self, valid: ValidToggle) -> Self {
        Self {
            name: self.name.clone(),
            description: valid
                .description
                .map_or_else(|| self.description.clone(), Text::from),
            kind: valid.kind.into(),
            project: valid.project.into(),
            enabled: valid.enabled,
            stale: valid.stale,
            strategies: valid.strategies,
            variants: valid.variants,
            impression_data: valid.impression_data,
            created_at: self.created_at,
            last_seen_at: self.last_seen_at,
            tags: self.tags.clone(),
            archived_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::known::NothingKnown;
    use serde_json::json;

    fn spec(v: Value) -> ToggleSpec {
        serde_json::from_value(v).expect("spec parses")
    }

    #[test]
    fn parameters_are_written_as_an_object_in_key_order_even_when_empty() {
        let mut strategy = Strategy {
            name: "default".into(),
            parameters: Parameters::new(),
            constraints: Vec::new(),
        };
        let text = |s: &Strategy| serde_json::to_string(s).expect("serialises");
        assert_eq!(text(&strategy), r#"{"name":"default","parameters":{}}"#);
        strategy.parameters.insert("z".into(), "1".into());
        strategy.parameters.insert("a".into(), "2".into());
        assert_eq!(
            text(&strategy),
            r#"{"name":"default","parameters":{"a":"2","z":"1"}}"#
        );
        let back: Strategy = serde_json::from_str(&text(&strategy)).expect("parses");
        assert_eq!(back, strategy);
    }

    #[test]
    fn defaults_are_applied() {
        let t = spec(json!({"name": "demo", "strategies": [{"name": "default"}]}))
            .validate(Some(&NothingKnown))
            .expect("valid");
        assert_eq!(t.kind, "release");
        assert_eq!(t.project, "default");
        assert!(!t.enabled && !t.stale);
        assert!(t.variants.is_empty());
    }

    #[test]
    fn all_problems_are_reported() {
        let err = spec(json!({"name": "a b", "strategies": [],
            "variants": [{"name": "x", "weight": 2000, "weightType": "odd"}]}))
        .validate(Some(&NothingKnown))
        .unwrap_err();
        let DomainError::Invalid(errors) = err else {
            panic!("not a validation error")
        };
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "name",
                "strategies",
                "variants[0].weight",
                "variants[0].weightType"
            ]
        );
    }

    #[test]
    fn duplicate_variant_names_are_rejected() {
        let err = spec(json!({"name": "demo", "strategies": [{"name": "default"}],
            "variants": [{"name": "a", "weight": 500}, {"name": "a", "weight": 500}]}))
        .validate(Some(&NothingKnown));
        assert!(matches!(err, Err(DomainError::Invalid(_))));
    }

    #[test]
    fn unsupported_fields_are_named_and_read_only_ones_ignored() {
        let err = spec(json!({"name": "demo", "createdAt": "2020-01-01T00:00:00Z", "tags": [],
            "dependencies": [{"feature": "parent"}], "impressionData": true,
            "strategies": [{"name": "default", "segments": [1], "variants": [{"name": "v"}],
                "constraints": [{"contextName": "userId", "operator": "IN", "values": ["1"], "inverted": true}]}]}))
        .validate(Some(&NothingKnown))
        .unwrap_err();
        let DomainError::Invalid(errors) = err else {
            panic!("not a validation error")
        };
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "dependencies",
                "strategies[0].segments",
                "strategies[0].variants"
            ]
        );
    }

    #[test]
    fn constraints_are_kept_as_written() {
        let good = spec(json!({"name": "demo", "impressionData": true, "strategies": [{"name": "default",
            "parameters": {"rollout": 50},
            "constraints": [{"contextName": "userId", "operator": "NOT_IN", "values": ["1"], "inverted": false}]}]}))
        .validate(Some(&NothingKnown))
        .expect("valid");
        assert_eq!(
            good.strategies[0]
                .parameters
                .get("rollout")
                .map(Text::as_str),
            Some("50")
        );
        assert_eq!(good.impression_data, Some(true));
        assert_eq!(
            serde_json::to_value(&good.strategies[0].constraints[0]).expect("json"),
            json!({"contextName": "userId", "operator": "NOT_IN", "values": ["1"], "inverted": false})
        );
    }
}
