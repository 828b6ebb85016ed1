//! Feature toggles, their activation strategies, constraints and variants, and the rules that
//! turn an untrusted input document into a valid toggle (API-FACTS §11.2, §14).

use chrono::{DateTime, Utc};
use litemap::LiteMap;
use serde::{Deserialize, Serialize};

pub use super::constraint::{Constraint, Operator};
use super::dependency::{Dependency, DependencySpec};
use super::environment::{only_default, FeatureEnvironment, DEFAULT_ENVIRONMENT, UNCONFIGURED};
use super::error::{DomainError, ValidationErrors};
use super::exact_capacity;
use super::feature_strategy::{
    assign_ids, check_context_field, check_unique_ids, validate_strategy,
};
pub use super::feature_strategy::{serialize_parameters, Parameters, Strategy, StrategySpec};
use super::fields::{refuse_unsupported, ExtraFields};
use super::known::KnownNames;
use super::name::{check_name, NAME_MAX};
use super::project::DEFAULT_PROJECT;
use super::tag::TagRef;
use super::text::Text;
pub use super::variant::{
    validate_variants, Override, Payload, StrategyVariant, Variant, VariantSpec, WeightType,
};

/// The toggle type used when none is given.
pub const DEFAULT_TYPE: &str = "release";

/// A stored feature toggle, active or archived.
///
/// `Eq` matters for speed: two `Arc<Toggle>` of an `Eq` type compare equal by pointer before
/// comparing contents, so diffing two versions' toggle maps passes over the toggles they share
/// instead of comparing each field of every toggle near a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "StoredToggle")]
pub struct Toggle {
    pub name: Text,
    pub description: Text,
    #[serde(rename = "type")]
    pub kind: Text,
    pub project: Text,
    pub stale: bool,
    /// Whether SDKs emit impression events for this toggle; absent unless it was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impression_data: Option<bool>,
    /// The parents this toggle depends on (at most one through the admin API).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Dependency>,
    /// Its configuration per environment, by environment name; an environment missing here
    /// is off with no strategies (`UNCONFIGURED`).
    pub environments: LiteMap<Text, FeatureEnvironment>,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Tags carried by the toggle, in the order they were added.
    pub tags: Vec<TagRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<DateTime<Utc>>,
}

/// A toggle record as stored, in either generation: since environments (`environments`), or
/// before them (`enabled`, `strategies` and `variants` at the top, which are `default`'s).
/// Older records are read as they are; they take the new form when next written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredToggle {
    name: Text,
    #[serde(default)]
    description: Text,
    #[serde(rename = "type")]
    kind: Text,
    project: Text,
    stale: bool,
    #[serde(default)]
    impression_data: Option<bool>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    dependencies: Vec<Dependency>,
    #[serde(default, deserialize_with = "exact_capacity::option_lite_map")]
    environments: Option<LiteMap<Text, FeatureEnvironment>>,
    #[serde(default)]
    enabled: bool,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    strategies: Vec<Strategy>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    variants: Vec<Variant>,
    created_at: DateTime<Utc>,
    #[serde(default)]
    last_seen_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    tags: Vec<TagRef>,
    #[serde(default)]
    archived_at: Option<DateTime<Utc>>,
}

impl From<StoredToggle> for Toggle {
    fn from(stored: StoredToggle) -> Self {
        let environments = stored.environments.unwrap_or_else(|| {
            only_default(FeatureEnvironment {
                enabled: stored.enabled,
                strategies: stored.strategies,
                variants: stored.variants,
            })
        });
        Self {
            name: stored.name,
            description: stored.description,
            kind: stored.kind,
            project: stored.project,
            stale: stored.stale,
            impression_data: stored.impression_data,
            dependencies: stored.dependencies,
            environments,
            created_at: stored.created_at,
            last_seen_at: stored.last_seen_at,
            tags: stored.tags,
            archived_at: stored.archived_at,
        }
    }
}

/// A toggle as the 3.x API sends it to create or replace it (its `enabled`, `strategies` and
/// `variants` are the `default` environment's); every field optional so that all problems are
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
    /// Parents this toggle depends on: at most one, in the same project, itself without
    /// parents (checked when written).
    #[schema(max_items = 1)]
    pub dependencies: Option<Vec<DependencySpec>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Toggle fields that responses and exports carry and tools echo back in a body; ignored
/// (`strategy` and `parameters` are the legacy pair of archive listings).
const READ_ONLY_TOGGLE_FIELDS: [&str; 9] = [
    "environment",
    "environments",
    "children",
    "createdAt",
    "lastSeenAt",
    "tags",
    "archivedAt",
    "strategy",
    "parameters",
];

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
    pub dependencies: Vec<Dependency>,
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
        // Events and exports name the environment a record is in; this API writes `default`.
        if let Some(environment) = self.extra.get("environment") {
            if environment.as_str() != Some(DEFAULT_ENVIRONMENT) {
                errors.push(
                    "environment",
                    "this API writes the \"default\" environment; other environments are written through /api/admin/projects/{project}/features/{name}/environments/{environment}",
                );
            }
        }
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
        let dependencies = self.dependencies.unwrap_or_default();
        // Unleash 7 keeps one parent per toggle; its routes replace it, a body cannot choose.
        if dependencies.len() > 1 {
            errors.push(
                "dependencies",
                "a toggle depends on at most one parent (Unleash 7's rule); send one dependency",
            );
        }
        let dependencies = dependencies
            .into_iter()
            .enumerate()
            .filter_map(|(i, d)| d.validate(&format!("dependencies[{i}]"), &mut errors))
            .collect();
        let mut strategies: Vec<Strategy> = strategies;
        check_unique_ids(&strategies, "", &mut errors);
        for strategy in &mut strategies {
            strategy.settle_variant_group(&name);
        }
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
            dependencies,
        })
    }
}

impl ValidToggle {
    /// Checks again what the toggle refers to, in `state` (the state a write is decided on,
    /// which may be newer than the one it was validated against).
    pub fn check_references(&self, state: &dyn KnownNames) -> Result<(), DomainError> {
        check_references(&self.project, [("", &self.strategies[..])], state)
    }
}

/// The project and the constraints' context fields of a toggle exist in `state` (and the
/// constraints' values are legal for their fields).
/// `lists` are strategy lists with the path prefix of each (`""` for the 3.x body,
/// `environments.production.` for a stored toggle's environment).
fn check_references<'a>(
    project: &str,
    lists: impl IntoIterator<Item = (&'a str, &'a [Strategy])>,
    state: &dyn KnownNames,
) -> Result<(), DomainError> {
    let mut errors = ValidationErrors::default();
    check_project(project, state, &mut errors);
    for (prefix, strategies) in lists {
        for (i, strategy) in strategies.iter().enumerate() {
            for (j, constraint) in strategy.constraints.iter().enumerate() {
                check_context_field(
                    constraint,
                    state,
                    &format!("{prefix}strategies[{i}].constraints[{j}]"),
                    &mut errors,
                );
            }
            for (j, id) in strategy.segments.iter().enumerate() {
                if !state.has_segment(*id) {
                    errors.push(
                        format!("{prefix}strategies[{i}].segments[{j}]"),
                        format!("there is no segment with id {id}"),
                    );
                }
            }
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

impl Toggle {
    /// A new active toggle from validated 3.x input: its configuration is `default`'s.
    pub fn create(valid: ValidToggle, now: DateTime<Utc>) -> Self {
        let mut strategies = valid.strategies;
        assign_ids(&mut strategies, &[]);
        let environments = only_default(FeatureEnvironment {
            enabled: valid.enabled,
            strategies,
            variants: valid.variants,
        });
        Self {
            name: valid.name.into(),
            description: valid.description.map(Text::from).unwrap_or_default(),
            kind: valid.kind.into(),
            project: valid.project.into(),
            stale: valid.stale,
            impression_data: valid.impression_data,
            dependencies: valid.dependencies,
            environments,
            created_at: now,
            last_seen_at: None,
            tags: Vec::new(),
            archived_at: None,
        }
    }

    /// The toggle's configuration in `environment` (off, no strategies, when it has none).
    pub fn environment(&self, environment: &str) -> &FeatureEnvironment {
        self.environments.get(environment).unwrap_or(&UNCONFIGURED)
    }

    /// The toggle's configuration in `environment`, made (off, no strategies) when missing.
    pub fn environment_mut(&mut self, environment: &str) -> &mut FeatureEnvironment {
        if !self.environments.contains_key(environment) {
            self.environments
                .insert(Text::from(environment), FeatureEnvironment::default());
        }
        self.environments
            .get_mut(environment)
            .expect("inserted just above")
    }

    /// The toggle switched off in every environment (what archiving and reviving do).
    pub fn switched_off(mut self) -> Self {
        for (_, environment) in self.environments.iter_mut() {
            environment.enabled = false;
        }
        self
    }

    /// Every strategy of the toggle, in every environment.
    pub fn all_strategies(&self) -> impl Iterator<Item = &Strategy> + '_ {
        self.environments
            .iter()
            .flat_map(|(_, environment)| &environment.strategies)
    }

    /// The `default` environment's configuration: what the 3.x API reads and writes.
    pub fn default_environment(&self) -> &FeatureEnvironment {
        self.environment(DEFAULT_ENVIRONMENT)
    }

    /// Checks what the toggle refers to in `state` (before reviving it: a context field its
    /// constraints use may have been deleted while it was archived).
    pub fn check_references(&self, state: &dyn KnownNames) -> Result<(), DomainError> {
        let prefixes: Vec<String> = self
            .environments
            .iter()
            .map(|(name, _)| format!("environments.{name}."))
            .collect();
        check_references(
            &self.project,
            prefixes
                .iter()
                .zip(self.environments.iter())
                .map(|(prefix, (_, env))| (prefix.as_str(), &env.strategies[..])),
            state,
        )
    }

    /// PUT semantics of the 3.x API (API-FACTS §11.2): the document replaces the toggle's
    /// toggle-wide fields and its `default` environment; other environments stay; an omitted
    /// description keeps the old one; tags and timestamps are not part of the document.
    /// Strategies keep their ids position by position.
    pub fn replaced_by(&self, valid: ValidToggle) -> Self {
        let mut next = Self {
            name: self.name.clone(),
            description: valid
                .description
                .map_or_else(|| self.description.clone(), Text::from),
            kind: valid.kind.into(),
            project: valid.project.into(),
            stale: valid.stale,
            impression_data: valid.impression_data,
            dependencies: valid.dependencies,
            environments: self.environments.clone(),
            created_at: self.created_at,
            last_seen_at: self.last_seen_at,
            tags: self.tags.clone(),
            archived_at: None,
        };
        let mut strategies = valid.strategies;
        assign_ids(&mut strategies, &self.default_environment().strategies);
        *next.environment_mut(DEFAULT_ENVIRONMENT) = FeatureEnvironment {
            enabled: valid.enabled,
            strategies,
            variants: valid.variants,
        };
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::known::NothingKnown;
    use serde_json::{json, Value};

    fn spec(v: Value) -> ToggleSpec {
        serde_json::from_value(v).expect("spec parses")
    }

    #[test]
    fn parameters_are_written_as_an_object_in_key_order_even_when_empty() {
        let mut strategy = Strategy::named("default");
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
            "owner": "x", "dependencies": [{"feature": "parent", "enabled": false, "variants": ["a"]}],
            "strategies": [{"name": "default", "segments": [1], "sortOrder": 3, "shards": 2,
                "variants": [{"name": "v"}]}]}))
        .validate(Some(&NothingKnown))
        .unwrap_err();
        let DomainError::Invalid(errors) = err else {
            panic!("not a validation error")
        };
        let paths: Vec<_> = errors.0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "owner",
                "strategies[0].shards",
                "strategies[0].segments[0]",
                "dependencies[0].variants"
            ]
        );
    }

    #[test]
    fn the_modern_fields_are_accepted_for_default() {
        let valid = spec(
            json!({"name": "demo", "dependencies": [{"feature": "parent"}],
            "strategies": [{"name": "flexibleRollout", "title": "Beta", "disabled": true,
                "parameters": {"rollout": "50", "stickiness": "userId"},
                "variants": [{"name": "b"}, {"name": "a", "weight": 200, "weightType": "fix"}]}]}),
        )
        .validate(Some(&NothingKnown))
        .expect("valid");
        let strategy = &valid.strategies[0];
        assert_eq!(strategy.title.as_deref(), Some("Beta"));
        assert!(strategy.disabled);
        // Sorted by name, the rest shared by the variable one; stickiness and groupId from the
        // strategy and the toggle.
        let variants: Vec<(&str, u32, Option<&str>)> = strategy
            .variants
            .iter()
            .map(|v| (v.name.as_str(), v.weight, v.stickiness.as_deref()))
            .collect();
        assert_eq!(
            variants,
            [("a", 200, Some("userId")), ("b", 800, Some("userId"))]
        );
        assert_eq!(
            strategy.parameters.get("groupId").map(Text::as_str),
            Some("demo")
        );
        assert_eq!(valid.dependencies[0].feature, "parent");
        assert!(valid.dependencies[0].enabled);
    }

    #[test]
    fn records_stored_before_environments_are_read_as_defaults() {
        let old = json!({"name": "legacy", "description": "", "type": "release", "project": "default",
            "enabled": true, "stale": false, "strategies": [{"name": "default", "parameters": {}}],
            "variants": [], "createdAt": "2024-01-01T00:00:00Z", "tags": []});
        let toggle: Toggle = serde_json::from_value(old).expect("reads");
        assert!(toggle.default_environment().enabled);
        assert_eq!(toggle.default_environment().strategies[0].name, "default");
        assert!(!toggle.environment("production").enabled);
        let again: Toggle =
            serde_json::from_str(&serde_json::to_string(&toggle).expect("writes")).expect("reads");
        assert_eq!(again, toggle);
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
