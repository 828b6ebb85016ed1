//! Dependencies on a parent toggle (Unleash 5.7+): a child is on only when its parent is on
//! (or off), optionally with one of the parent's variants (MODERN-MODEL §3).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ValidationErrors;
use super::exact_capacity;
use super::fields::{refuse_unsupported, ExtraFields};
use super::name::{check_name, NAME_MAX};
use super::text::Text;

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
    #[schema(required = true, nullable = false, min_length = 1, max_length = 100)]
    pub feature: Option<String>,
    /// `true` when not sent.
    pub enabled: Option<bool>,
    /// Only with `enabled: true`.
    #[schema(value_type = Option<Vec<String>>)]
    pub variants: Option<Vec<Value>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

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
