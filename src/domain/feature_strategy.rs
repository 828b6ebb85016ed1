//! Activation strategies on a toggle (a toggle's, per environment): their stored form and the
//! rules that turn a strategy as sent into one (spec §2.2; MODERN-MODEL §1–2).

use std::collections::BTreeMap;

use litemap::LiteMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::constraint::{Constraint, ConstraintSpec};
use super::context_field::is_built_in;
use super::error::ValidationErrors;
use super::exact_capacity;
use super::fields::{refuse_unsupported, ExtraFields};
use super::known::KnownNames;
use super::name::{check_name, NAME_MAX};
use super::text::Text;
use super::variant::{validate_strategy_variants, StrategyVariant, StrategyVariantSpec};

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

/// An activation strategy on a toggle, in one environment.
///
/// Stored as written: fields an import brings that Flagpole's admin API would have refused
/// (dangling segment ids, variant weights not adding up to 1,000) stay, because SDKs evaluate
/// them as the client specification says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    /// Stable within the toggle's environment; what the per-environment routes address it by.
    /// Empty only in strategies built before ids existed (given one when next written).
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    #[schema(value_type = String)]
    pub id: Text,
    #[schema(value_type = String)]
    pub name: Text,
    /// A label for people; not served to SDKs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub title: Option<Text>,
    /// A disabled strategy is kept but left out of the client document.
    #[serde(default, skip_serializing_if = "is_false")]
    pub disabled: bool,
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
    /// Ids of the segments whose constraints also apply (ANDed with the strategy's own).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_capacity::vec"
    )]
    pub segments: Vec<u32>,
    /// The variants this strategy hands out when it is the one that enables the toggle.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_capacity::vec"
    )]
    pub variants: Vec<StrategyVariant>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl Strategy {
    /// A strategy of `name` with nothing else set (no id yet).
    pub fn named(name: &str) -> Self {
        Self {
            id: Text::default(),
            name: name.into(),
            title: None,
            disabled: false,
            parameters: Parameters::new(),
            constraints: Vec::new(),
            segments: Vec::new(),
            variants: Vec::new(),
        }
    }
}

/// A strategy as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategySpec {
    /// Kept when given (an export imports back with its ids); else a replaced list keeps its
    /// strategies' ids position by position, and new strategies get a new one.
    #[schema(max_length = 100)]
    pub id: Option<String>,
    #[schema(
        required = true,
        nullable = false,
        min_length = 1,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "default"
    )]
    pub name: Option<String>,
    /// At most 100 characters.
    #[schema(max_length = 100)]
    pub title: Option<String>,
    pub disabled: Option<bool>,
    /// Strings; numbers, booleans and null are stored as text.
    #[schema(value_type = Option<BTreeMap<String, ParameterValue>>)]
    pub parameters: Option<BTreeMap<String, Value>>,
    pub constraints: Option<Vec<ConstraintSpec>>,
    /// Ids of existing segments.
    #[schema(value_type = Option<Vec<u32>>)]
    pub segments: Option<Vec<Value>>,
    pub variants: Option<Vec<StrategyVariantSpec>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Strategy fields that responses carry and tools echo back; ignored (order is the list's).
const READ_ONLY_STRATEGY_FIELDS: [&str; 3] = ["sortOrder", "featureName", "milestoneId"];

/// Longest strategy title.
const TITLE_MAX: usize = 100;

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

/// Validates a strategy as sent; `path` prefixes the problems' paths (`strategies[0]`).
/// Segments are checked against `references` when given (an import checks them in the
/// configuration it is about to make).
pub fn validate_strategy(
    spec: StrategySpec,
    path: &str,
    references: Option<&dyn KnownNames>,
    errors: &mut ValidationErrors,
) -> Strategy {
    refuse_unsupported(&spec.extra, path, &READ_ONLY_STRATEGY_FIELDS, errors);
    let name = spec.name.unwrap_or_default();
    if let Err(m) = check_name("name", &name, 1, NAME_MAX) {
        errors.push(format!("{path}.name"), m);
    }
    let title = spec.title.filter(|t| !t.is_empty());
    if title
        .as_ref()
        .is_some_and(|t| t.chars().count() > TITLE_MAX)
    {
        errors.push(
            format!("{path}.title"),
            format!("\"title\" must be at most {TITLE_MAX} characters long"),
        );
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
    let segments =
        validate_segment_ids(spec.segments.unwrap_or_default(), path, references, errors);
    let stickiness = parameters.get("stickiness").cloned();
    let variants = validate_strategy_variants(
        spec.variants.unwrap_or_default(),
        &format!("{path}.variants"),
        stickiness.as_deref().unwrap_or("default"),
        errors,
    );
    let id = spec.id.filter(|id| !id.is_empty()).unwrap_or_default();
    if id.chars().count() > TITLE_MAX {
        errors.push(
            format!("{path}.id"),
            format!("\"id\" must be at most {TITLE_MAX} characters long"),
        );
    }
    Strategy {
        id: id.into(),
        name: name.into(),
        title: title.map(Text::from),
        disabled: spec.disabled.unwrap_or(false),
        parameters,
        constraints,
        segments,
        variants,
    }
}

/// Segment ids: whole numbers, each of an existing segment (when `references` is given),
/// sorted and without repeats (as SDKs receive them).
fn validate_segment_ids(
    ids: Vec<Value>,
    path: &str,
    references: Option<&dyn KnownNames>,
    errors: &mut ValidationErrors,
) -> Vec<u32> {
    let mut out = Vec::with_capacity(ids.len());
    for (i, value) in ids.iter().enumerate() {
        match value.as_u64().and_then(|id| u32::try_from(id).ok()) {
            Some(id) => {
                if references.is_some_and(|state| !state.has_segment(id)) {
                    errors.push(
                        format!("{path}.segments[{i}]"),
                        format!("there is no segment with id {id}"),
                    );
                }
                out.push(id);
            }
            None => errors.push(
                format!("{path}.segments[{i}]"),
                "a segment id must be a whole number from 0 to 4294967295",
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

impl Strategy {
    /// Gives a strategy with variants a `groupId` (the toggle's name) when it has none, so
    /// that every SDK hashes its variants the same way (Yggdrasil falls back to the toggle's
    /// name, Node to the text "undefined"; MODERN-MODEL §2).
    pub fn settle_variant_group(&mut self, toggle: &str) {
        if !self.variants.is_empty() && !self.parameters.contains_key("groupId") {
            self.parameters.insert("groupId".into(), toggle.into());
        }
    }
}

/// Gives every strategy of `strategies` without an id one: the id of the strategy at the
/// same position in `previous` (so replacing a list with an equal one changes nothing) unless
/// the list uses it already, a new one otherwise.
pub fn assign_ids(strategies: &mut [Strategy], previous: &[Strategy]) {
    let given: std::collections::HashSet<Text> = strategies
        .iter()
        .filter(|s| !s.id.is_empty())
        .map(|s| s.id.clone())
        .collect();
    for (i, strategy) in strategies.iter_mut().enumerate() {
        if !strategy.id.is_empty() {
            continue;
        }
        strategy.id = match previous.get(i) {
            Some(old) if !old.id.is_empty() && !given.contains(&old.id) => old.id.clone(),
            _ => new_strategy_id(),
        };
    }
}

/// Refuses a strategy list that gives one id twice.
pub fn check_unique_ids(strategies: &[Strategy], prefix: &str, errors: &mut ValidationErrors) {
    let mut seen = std::collections::HashSet::new();
    for (i, strategy) in strategies.iter().enumerate() {
        if !strategy.id.is_empty() && !seen.insert(&strategy.id) {
            errors.push(
                format!("{prefix}strategies[{i}].id"),
                format!("the strategy id \"{}\" is used twice", strategy.id),
            );
        }
    }
}

/// A new random strategy id (a UUID, as Unleash's).
pub fn new_strategy_id() -> Text {
    uuid::Uuid::new_v4().to_string().into()
}

/// A constraint's context field must exist (built-in fields do by rule) and its values be
/// legal for it.
pub(super) fn check_context_field(
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
