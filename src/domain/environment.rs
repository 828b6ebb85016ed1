//! Environments (Unleash 4.3+): the registry of environments, and a toggle's configuration in
//! one of them (MODERN-MODEL §5). The 3.x API acts on `default`, as Unleash 4's did.

use chrono::{DateTime, Utc};
use litemap::LiteMap;
use serde::{Deserialize, Serialize};

use super::error::{DomainError, ValidationErrors};
use super::exact_capacity;
use super::feature_strategy::Strategy;
use super::fields::{refuse_unsupported, ExtraFields};
use super::name::{check_name, NAME_MAX};
use super::text::Text;
use super::variant::Variant;

/// The environment the 3.x API reads and writes, and open client requests are served.
pub const DEFAULT_ENVIRONMENT: &str = "default";

/// The environment types Unleash knows; others are accepted as given.
pub const ENVIRONMENT_TYPES: [&str; 4] = ["development", "test", "preproduction", "production"];

/// An environment of the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// A disabled environment is hidden from toggle listings and its client documents are
    /// still served (Unleash 7 does the same).
    pub enabled: bool,
    /// A protected environment cannot be deleted (`default` is).
    pub protected: bool,
    pub sort_order: i64,
    pub created_at: DateTime<Utc>,
}

/// The environments every installation starts with (Unleash's seeds, plus `default` which
/// instances begun before Unleash 4.3 have and the 3.x API acts on).
pub fn seeded_environments(now: DateTime<Utc>) -> Vec<Environment> {
    [
        (DEFAULT_ENVIRONMENT, "production", 1, true),
        ("development", "development", 100, false),
        ("production", "production", 200, false),
    ]
    .into_iter()
    .map(|(name, kind, sort_order, protected)| Environment {
        name: name.into(),
        kind: kind.into(),
        enabled: true,
        protected,
        sort_order,
        created_at: now,
    })
    .collect()
}

/// An environment as sent to create or update it.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentSpec {
    /// Required on create; on update it must be the name in the path when sent.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "staging"
    )]
    pub name: Option<String>,
    /// E.g. `development`, `test`, `preproduction`, `production`.
    #[serde(rename = "type")]
    #[schema(required = true, nullable = false, min_length = 1, max_length = 100)]
    pub kind: Option<String>,
    pub enabled: Option<bool>,
    pub sort_order: Option<i64>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Fields of the served environment that tools echo back; ignored.
const READ_ONLY_ENVIRONMENT_FIELDS: [&str; 7] = [
    "protected",
    "createdAt",
    "projectCount",
    "apiTokenCount",
    "enabledToggleCount",
    "requiredApprovals",
    "visible",
];

impl EnvironmentSpec {
    /// Validates the document; `current` is the environment it updates (its name, protection,
    /// creation time and, when not sent, enabled state and sort order are kept).
    pub fn validate(
        self,
        path_name: Option<&str>,
        current: Option<&Environment>,
        now: DateTime<Utc>,
    ) -> Result<Environment, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &READ_ONLY_ENVIRONMENT_FIELDS, &mut errors);
        let name = match (self.name, path_name) {
            (Some(body), Some(path)) if body != path => {
                errors.push(
                    "name",
                    format!("\"name\" in the body (\"{body}\") must match the environment in the path (\"{path}\")"),
                );
                body
            }
            (Some(name), _) => name,
            (None, Some(path)) => path.to_string(),
            (None, None) => {
                errors.push("name", "\"name\" is required");
                String::new()
            }
        };
        if !name.is_empty() {
            if let Err(m) = check_name("name", &name, 1, NAME_MAX) {
                errors.push("name", m);
            }
        }
        let kind = match self.kind {
            Some(kind) if !kind.trim().is_empty() && kind.chars().count() <= NAME_MAX => kind,
            Some(_) => {
                errors.push("type", "\"type\" must be 1 to 100 characters long");
                String::new()
            }
            None => {
                errors.push("type", "\"type\" is required");
                String::new()
            }
        };
        errors.into_result(Environment {
            name,
            kind,
            enabled: self
                .enabled
                .unwrap_or_else(|| current.is_none_or(|c| c.enabled)),
            protected: current.is_some_and(|c| c.protected),
            sort_order: self
                .sort_order
                .unwrap_or_else(|| current.map_or(0, |c| c.sort_order)),
            created_at: current.map_or(now, |c| c.created_at),
        })
    }
}

/// A toggle's configuration in one environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureEnvironment {
    pub enabled: bool,
    /// In evaluation order (the list's order is the strategies' `sortOrder`).
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    pub strategies: Vec<Strategy>,
    /// The toggle's variants in this environment (Unleash 4.18+ keeps them per environment).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_capacity::vec"
    )]
    pub variants: Vec<Variant>,
}

/// What a toggle is in an environment it has no configuration for: off, no strategies.
pub static UNCONFIGURED: FeatureEnvironment = FeatureEnvironment {
    enabled: false,
    strategies: Vec::new(),
    variants: Vec::new(),
};

/// The environments of a toggle configured in `default` only (what the 3.x API makes).
pub fn only_default(config: FeatureEnvironment) -> LiteMap<Text, FeatureEnvironment> {
    let mut environments = LiteMap::with_capacity(1);
    environments.insert(Text::from(DEFAULT_ENVIRONMENT), config);
    environments
}
