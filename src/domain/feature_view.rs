//! The Unleash 5–7 shapes of a toggle on the per-project routes (`featureSchema` with its
//! `environments`, `featureStrategySchema`) and of the environment registry. Pure serde.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::config_state::ConfigState;
use super::constraint::Constraint;
use super::dependency::Dependency;
use super::environment::Environment;
use super::feature_strategy::{serialize_parameters, Parameters, Strategy};
use super::tag::Tag;
use super::toggle::Toggle;
use super::variant::{StrategyVariant, Variant};

/// The environments of the registry in Unleash's order: by `sortOrder`, then by name.
pub fn environments_in_order(state: &ConfigState) -> Vec<&Environment> {
    let mut environments: Vec<&Environment> = state.environments.values().map(|e| &**e).collect();
    environments.sort_by(|a, b| {
        a.sort_order
            .cmp(&b.sort_order)
            .then_with(|| a.name.cmp(&b.name))
    });
    environments
}

/// An environment in the registry listing, with Unleash's counts.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentView<'a> {
    #[serde(flatten)]
    pub environment: &'a Environment,
    /// Projects that can use it (every project: all environments are every project's).
    pub project_count: usize,
    /// Active toggles enabled in it.
    pub enabled_toggle_count: usize,
}

impl<'a> EnvironmentView<'a> {
    /// `environment` with its counts in `state`.
    pub fn new(environment: &'a Environment, state: &ConfigState) -> Self {
        Self {
            environment,
            project_count: state.projects.len().max(1),
            enabled_toggle_count: state
                .features
                .values()
                .filter(|t| t.environment(&environment.name).enabled)
                .count(),
        }
    }
}

/// A strategy as the per-environment routes show it (`featureStrategySchema`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureStrategyView<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub title: Option<&'a str>,
    pub disabled: bool,
    pub feature_name: &'a str,
    /// Its position in the environment's evaluation order.
    pub sort_order: usize,
    pub segments: &'a [u32],
    pub constraints: &'a [Constraint],
    pub variants: &'a [StrategyVariant],
    #[serde(serialize_with = "serialize_parameters_ref")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub parameters: &'a Parameters,
}

fn serialize_parameters_ref<S: serde::Serializer>(
    parameters: &&Parameters,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serialize_parameters(parameters, serializer)
}

impl<'a> FeatureStrategyView<'a> {
    /// The strategy at `sort_order` of `toggle`'s list.
    pub fn new(toggle: &'a Toggle, strategy: &'a Strategy, sort_order: usize) -> Self {
        Self {
            id: &strategy.id,
            name: &strategy.name,
            title: strategy.title.as_deref(),
            disabled: strategy.disabled,
            feature_name: &toggle.name,
            sort_order,
            segments: &strategy.segments,
            constraints: &strategy.constraints,
            variants: &strategy.variants,
            parameters: &strategy.parameters,
        }
    }

    /// Every strategy of `toggle` in `environment`, in order.
    pub fn all(toggle: &'a Toggle, environment: &str) -> Vec<Self> {
        toggle
            .environment(environment)
            .strategies
            .iter()
            .enumerate()
            .map(|(i, s)| Self::new(toggle, s, i))
            .collect()
    }
}

/// A toggle in one environment (`featureEnvironmentSchema`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureEnvironmentView<'a> {
    pub name: &'a str,
    pub environment: &'a str,
    pub feature_name: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub enabled: bool,
    pub sort_order: i64,
    pub variant_count: usize,
    pub strategies: Vec<FeatureStrategyView<'a>>,
    pub variants: &'a [Variant],
    pub has_strategies: bool,
    pub has_enabled_strategies: bool,
}

impl<'a> FeatureEnvironmentView<'a> {
    /// `toggle` in `environment`.
    pub fn new(toggle: &'a Toggle, environment: &'a Environment) -> Self {
        let config = toggle.environment(&environment.name);
        Self {
            name: &environment.name,
            environment: &environment.name,
            feature_name: &toggle.name,
            kind: &environment.kind,
            enabled: config.enabled,
            sort_order: environment.sort_order,
            variant_count: config.variants.len(),
            strategies: FeatureStrategyView::all(toggle, &environment.name),
            variants: &config.variants,
            has_strategies: !config.strategies.is_empty(),
            has_enabled_strategies: config.strategies.iter().any(|s| !s.disabled),
        }
    }
}

/// A toggle on the per-project routes (`featureSchema`): toggle-wide fields and its
/// configuration in every environment of the registry.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectFeatureView<'a> {
    pub name: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub description: &'a str,
    pub project: &'a str,
    pub stale: bool,
    pub archived: bool,
    pub impression_data: bool,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: Option<DateTime<Utc>>,
    pub archived_at: Option<DateTime<Utc>>,
    pub environments: Vec<FeatureEnvironmentView<'a>>,
    /// The `default` environment's variants (what the 3.x API reads and writes).
    pub variants: &'a [Variant],
    pub tags: Vec<Tag>,
    pub dependencies: &'a [Dependency],
    /// The names of the toggles that depend on this one, by name.
    pub children: Vec<String>,
}

impl<'a> ProjectFeatureView<'a> {
    /// `toggle` as the per-project routes show it; environments, tags and children from `state`.
    pub fn new(toggle: &'a Toggle, state: &'a ConfigState) -> Self {
        let environments = environments_in_order(state)
            .into_iter()
            .map(|e| FeatureEnvironmentView::new(toggle, e))
            .collect();
        let children = state
            .features
            .values()
            .filter(|t| t.dependencies.iter().any(|d| d.feature == toggle.name))
            .map(|t| t.name.to_string())
            .collect();
        Self {
            name: &toggle.name,
            kind: &toggle.kind,
            description: &toggle.description,
            project: &toggle.project,
            stale: toggle.stale,
            archived: toggle.archived_at.is_some(),
            impression_data: toggle.impression_data.unwrap_or(false),
            created_at: toggle.created_at,
            last_seen_at: toggle.last_seen_at,
            archived_at: toggle.archived_at,
            environments,
            variants: &toggle.default_environment().variants,
            tags: toggle
                .tags
                .iter()
                .filter_map(|t| state.tag(t).map(|tag| (**tag).clone()))
                .collect(),
            dependencies: &toggle.dependencies,
            children,
        }
    }
}
