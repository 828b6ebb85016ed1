//! Dependencies on a parent toggle (Unleash 5.7+): a child is on only when its parent is on
//! (or off), optionally with one of the parent's variants (MODERN-MODEL §3); and the admin
//! rules between a child and its parent (Unleash 7.5.1).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config_state::ConfigState;
use super::error::{DomainError, ValidationErrors};
use super::exact_capacity;
use super::fields::{refuse_unsupported, ExtraFields};
use super::name::{check_name, NAME_MAX};
use super::text::Text;
use super::toggle::Toggle;

/// A toggle's dependency on a parent, stored as written. SDKs served a dependency they cannot
/// satisfy (a missing parent, a parent with parents of its own) evaluate the child as off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Dependency {
    /// The parent toggle's name.
    #[schema(value_type = String)]
    pub feature: Text,
    /// Whether the parent must be on (`true`, the default) or off.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// With `enabled`, the parent's variant must be one of these (any when empty).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_capacity::vec"
    )]
    #[schema(value_type = Vec<String>)]
    pub variants: Vec<Text>,
}

fn enabled_by_default() -> bool {
    true
}

/// A dependency as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct DependencySpec {
    /// The parent toggle's name.
    #[schema(
        required = true,
        nullable = false,
        min_length = 1,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$"
    )]
    pub feature: Option<String>,
    /// `true` when not sent.
    pub enabled: Option<bool>,
    /// Only with `enabled: true`.
    #[schema(value_type = Option<Vec<VariantName>>)]
    pub variants: Option<Vec<Value>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// A variant name a dependency asks for: a non-empty string.
// Documentation only: `DependencySpec::validate` reads the values.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, min_length = 1)]
#[allow(dead_code)]
struct VariantName(String);

impl DependencySpec {
    /// Validates the dependency's own fields (`path` prefixes problems); the rules between
    /// toggles (one parent, no chains, same project, parent active) are the service's.
    pub fn validate(self, path: &str, errors: &mut ValidationErrors) -> Option<Dependency> {
        let before = errors.0.len();
        refuse_unsupported(&self.extra, path, &[], errors);
        let join = |field: &str| {
            if path.is_empty() {
                field.to_string()
            } else {
                format!("{path}.{field}")
            }
        };
        let feature = self.feature.unwrap_or_default();
        if let Err(m) = check_name("feature", &feature, 1, NAME_MAX) {
            errors.push(join("feature"), m);
        }
        let enabled = self.enabled.unwrap_or(true);
        let mut variants = Vec::new();
        for (i, value) in self.variants.unwrap_or_default().into_iter().enumerate() {
            match value {
                Value::String(name) if !name.is_empty() => variants.push(Text::from(name)),
                _ => errors.push(
                    join(&format!("variants[{i}]")),
                    "a variant is named by a non-empty string",
                ),
            }
        }
        if !enabled && !variants.is_empty() {
            errors.push(
                join("variants"),
                "\"variants\" can only be given with \"enabled\": true",
            );
        }
        (errors.0.len() == before).then(|| Dependency {
            feature: feature.into(),
            enabled,
            variants,
        })
    }
}

/// The client form (MODERN-MODEL §3): `variants` only with `enabled`, and then always
/// (`[]` when none).
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ClientDependency<'a> {
    pub feature: &'a str,
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    pub variants: Option<&'a [Text]>,
}

impl<'a> ClientDependency<'a> {
    /// The client form of `dependency`.
    pub fn new(dependency: &'a Dependency) -> Self {
        Self {
            feature: &dependency.feature,
            enabled: dependency.enabled,
            variants: dependency.enabled.then_some(&dependency.variants[..]),
        }
    }
}

/// Refused when archiving a toggle other toggles depend on (Unleash 7.5.1's words).
pub const HAS_CHILDREN: &str =
    "You can not archive/delete this feature since other features depend on it.";

/// The active toggles that depend on `parent`.
pub fn children_of<'a>(
    state: &'a ConfigState,
    parent: &'a str,
) -> impl Iterator<Item = &'a Arc<Toggle>> + 'a {
    state
        .features
        .values()
        .filter(move |t| t.dependencies.iter().any(|d| d.feature == parent))
}

/// The rules of Unleash 7.5.1 for `child` (in `project`) depending on `dependency`, in its
/// order; a rule broken is a 403 (`Forbidden`). One parent at most is the caller's rule (the
/// routes replace the old parent, the 3.x body may name one). Imports are not subject to
/// these: they keep what a client document serves.
pub fn check_dependency(
    state: &ConfigState,
    child: &str,
    project: &str,
    dependency: &Dependency,
) -> Result<(), DomainError> {
    let parent = dependency.feature.as_str();
    if parent == child {
        return Err(forbidden("A feature flag cannot depend on itself."));
    }
    if children_of(state, child).next().is_some() {
        return Err(forbidden(
            "Transitive dependency detected. Cannot add a dependency to the feature that other features depend on.",
        ));
    }
    let active_parent = state.features.get(parent);
    if active_parent.is_some_and(|p| !p.dependencies.is_empty()) {
        return Err(forbidden(
            "Transitive dependency detected. Cannot add a dependency to the feature that has parent dependency.",
        ));
    }
    let Some(active_parent) = active_parent else {
        return Err(forbidden(format!("No active feature {parent} exists")));
    };
    if active_parent.project != project {
        return Err(forbidden(
            "Parent and child features should be in the same project",
        ));
    }
    Ok(())
}

/// Whether a 3.x write turning `current` (none on create) into `next` must be checked against
/// other toggles: it sets other dependencies, or moves the toggle to another project. Such a
/// decision reads other toggles' records (so it may not declare `reads_only_its_toggles`).
pub fn needs_dependency_check(current: Option<&Toggle>, next: &Toggle) -> bool {
    match current {
        None => !next.dependencies.is_empty(),
        Some(current) => {
            current.project != next.project
                || (current.dependencies != next.dependencies && !next.dependencies.is_empty())
        }
    }
}

/// The dependency rules for a 3.x write (`needs_dependency_check` said it is one to check): a
/// toggle with children may not change project (Unleash 7.5.1 refuses that with 403 too), and
/// its dependencies follow `check_dependency`. Dependencies the write leaves as they were
/// (e.g. kept from an import) are not checked again.
pub fn check_written_dependencies(
    state: &ConfigState,
    current: Option<&Toggle>,
    next: &Toggle,
) -> Result<(), DomainError> {
    if current.is_some_and(|c| c.project != next.project)
        && children_of(state, &next.name).next().is_some()
    {
        return Err(forbidden(
            "Changing project not allowed. Feature has dependencies.",
        ));
    }
    for dependency in &next.dependencies {
        check_dependency(state, &next.name, &next.project, dependency)?;
    }
    Ok(())
}

/// The names of `parent`'s variants a dependency may ask for: its strategies' variants in
/// every environment and its toggle variants in every environment, once each, sorted (as
/// Unleash 7 collects them).
pub fn parent_variant_names(parent: &Toggle) -> Vec<String> {
    let strategy_variants = parent
        .all_strategies()
        .flat_map(|s| s.variants.iter().map(|v| v.name.as_str()));
    let toggle_variants = parent
        .environments
        .iter()
        .flat_map(|(_, e)| e.variants.iter().map(|v| v.name.as_str()));
    let names: BTreeSet<&str> = strategy_variants.chain(toggle_variants).collect();
    names.into_iter().map(str::to_string).collect()
}

/// The toggles `child` could depend on: the active toggles of its project without parents of
/// their own, but itself, by name.
pub fn possible_parents(state: &ConfigState, child: &Toggle) -> Vec<String> {
    state
        .features
        .values()
        .filter(|t| t.project == child.project && t.name != child.name && t.dependencies.is_empty())
        .map(|t| t.name.to_string())
        .collect()
}

fn forbidden(message: impl Into<String>) -> DomainError {
    DomainError::Forbidden(message.into())
}
