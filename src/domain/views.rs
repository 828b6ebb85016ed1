//! The JSON shapes toggles are served in. Pure serde; built from domain types.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use imbl::OrdMap;
use serde::Serialize;
use std::sync::Arc;

use super::config_state::ConfigState;
use super::constraint::Constraint;
use super::context_field::ContextField;
use super::dependency::{ClientDependency, Dependency};
use super::environment::{FeatureEnvironment, DEFAULT_ENVIRONMENT};
use super::segment::Segment;
use super::tag::Tag;
use super::toggle::{serialize_parameters, Parameters, Strategy, StrategyVariant, Toggle, Variant};

/// A toggle in admin responses: `variants` and `tags` (with `id`) always present (spec §2.1).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminToggle<'a> {
    pub name: &'a str,
    pub description: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub project: &'a str,
    pub enabled: bool,
    pub stale: bool,
    pub strategies: &'a [Strategy],
    pub variants: &'a [Variant],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impression_data: Option<bool>,
    #[serde(skip_serializing_if = "<[Dependency]>::is_empty")]
    pub dependencies: &'a [Dependency],
    pub tags: Vec<Tag>,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<DateTime<Utc>>,
    /// Legacy fields, only on archive listings (spec §4.2).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub legacy: Option<LegacyStrategy<'a>>,
}

/// spec §2.1: the legacy `strategy`/`parameters` pair (name and parameters of the first
/// strategy), kept until version 2 of the client format.
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LegacyStrategy<'a> {
    pub strategy: &'a str,
    #[serde(serialize_with = "serialize_borrowed_parameters")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub parameters: &'a Parameters,
}

fn serialize_borrowed_parameters<S: serde::Serializer>(
    parameters: &&Parameters,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serialize_parameters(parameters, serializer)
}

static NO_PARAMETERS: Parameters = Parameters::new();

impl<'a> LegacyStrategy<'a> {
    fn of(strategies: &'a [Strategy]) -> Self {
        match strategies.iter().find(|s| !s.disabled) {
            Some(first) => Self {
                strategy: &first.name,
                parameters: &first.parameters,
            },
            None => Self {
                strategy: "default",
                parameters: &NO_PARAMETERS,
            },
        }
    }
}

impl<'a> AdminToggle<'a> {
    /// The admin view of `toggle`; tag ids are looked up in `state`.
    pub fn new(toggle: &'a Toggle, state: &ConfigState) -> Self {
        let environment = toggle.default_environment();
        let tags = toggle
            .tags
            .iter()
            .filter_map(|t| state.tag(t).map(|tag| (**tag).clone()))
            .collect();
        Self {
            name: &toggle.name,
            description: &toggle.description,
            kind: &toggle.kind,
            project: &toggle.project,
            enabled: environment.enabled,
            stale: toggle.stale,
            strategies: &environment.strategies,
            variants: &environment.variants,
            impression_data: toggle.impression_data,
            dependencies: &toggle.dependencies,
            tags,
            created_at: toggle.created_at,
            last_seen_at: toggle.last_seen_at,
            archived_at: toggle.archived_at,
            legacy: None,
        }
    }

    /// The archive-listing view: the admin view plus the legacy fields.
    pub fn archived(toggle: &'a Toggle, state: &ConfigState) -> Self {
        Self {
            legacy: Some(LegacyStrategy::of(&toggle.default_environment().strategies)),
            ..Self::new(toggle, state)
        }
    }
}

/// How a client document serves segments (MODERN-MODEL §1): by reference (strategies carry
/// ids, the document a top-level `segments`) for SDKs that send `Unleash-Client-Spec` 4.2.0 or
/// later, inlined into the strategies' constraints for the others.
#[derive(Debug, Clone, Copy)]
pub enum SegmentForm<'a> {
    ByReference,
    Inline(&'a OrdMap<String, Arc<Segment>>),
}

/// What an inlined segment id that names no segment becomes: a constraint no context meets
/// (`IN` an empty list is false in every SDK that follows the client specification), so the
/// strategy is off as it is for SDKs served the dangling id by reference.
fn unsatisfiable() -> &'static Constraint {
    static NEVER: std::sync::OnceLock<Constraint> = std::sync::OnceLock::new();
    NEVER.get_or_init(|| {
        serde_json::from_str(r#"{"contextName":"appName","operator":"IN","values":[]}"#)
            .expect("a valid constraint")
    })
}

/// A strategy in client responses: no id, title or sort order; `variants` always present.
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ClientStrategy<'a> {
    pub name: &'a str,
    #[serde(serialize_with = "serialize_borrowed_parameters")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub parameters: &'a Parameters,
    #[serde(skip_serializing_if = "<[Constraint]>::is_empty")]
    #[schema(value_type = Vec<Constraint>)]
    pub constraints: Cow<'a, [Constraint]>,
    #[serde(skip_serializing_if = "<[u32]>::is_empty")]
    pub segments: &'a [u32],
    pub variants: &'a [StrategyVariant],
}

impl<'a> ClientStrategy<'a> {
    /// The client form of `strategy`, its segments served in `form`.
    pub fn new(strategy: &'a Strategy, form: SegmentForm<'a>) -> Self {
        let (constraints, segments) = match form {
            SegmentForm::ByReference => (
                Cow::Borrowed(&strategy.constraints[..]),
                &strategy.segments[..],
            ),
            SegmentForm::Inline(_) if strategy.segments.is_empty() => {
                (Cow::Borrowed(&strategy.constraints[..]), &[][..])
            }
            SegmentForm::Inline(segments) => {
                let mut all = strategy.constraints.clone();
                for id in &strategy.segments {
                    match segments.get(&id.to_string()) {
                        Some(segment) => all.extend(segment.constraints.iter().cloned()),
                        None => all.push(unsatisfiable().clone()),
                    }
                }
                (Cow::Owned(all), &[][..])
            }
        };
        Self {
            name: &strategy.name,
            parameters: &strategy.parameters,
            constraints,
            segments,
            variants: &strategy.variants,
        }
    }
}

/// A toggle in client responses (spec §4.1), in one environment: its enabled strategies plus
/// the legacy pair; variants, dependencies and impression data only when there are some.
/// Equal views serialise to equal bytes.
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToggle<'a> {
    pub name: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub enabled: bool,
    pub stale: bool,
    pub strategies: Vec<ClientStrategy<'a>>,
    #[serde(flatten)]
    pub legacy: LegacyStrategy<'a>,
    #[serde(skip_serializing_if = "<[Variant]>::is_empty")]
    pub variants: &'a [Variant],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impression_data: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<ClientDependency<'a>>,
}

impl<'a> ClientToggle<'a> {
    /// The client view of `toggle` in the `default` environment, segments by reference.
    pub fn new(toggle: &'a Toggle) -> Self {
        Self::in_environment(toggle, DEFAULT_ENVIRONMENT, SegmentForm::ByReference)
    }

    /// The client view of `toggle` in `environment`, its segments served in `form`.
    pub fn in_environment(toggle: &'a Toggle, environment: &str, form: SegmentForm<'a>) -> Self {
        let config: &'a FeatureEnvironment = toggle.environment(environment);
        Self {
            name: &toggle.name,
            kind: &toggle.kind,
            enabled: config.enabled,
            stale: toggle.stale,
            strategies: config
                .strategies
                .iter()
                .filter(|s| !s.disabled)
                .map(|s| ClientStrategy::new(s, form))
                .collect(),
            legacy: LegacyStrategy::of(&config.strategies),
            variants: &config.variants,
            impression_data: toggle.impression_data,
            dependencies: toggle
                .dependencies
                .iter()
                .map(ClientDependency::new)
                .collect(),
        }
    }
}

/// A segment as client documents serve it (by reference: their top-level `segments`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClientSegment<'a> {
    pub id: u32,
    pub name: &'a str,
    pub constraints: &'a [Constraint],
}

impl<'a> ClientSegment<'a> {
    /// The client form of `segment`.
    pub fn new(segment: &'a Segment) -> Self {
        Self {
            id: segment.id,
            name: &segment.name,
            constraints: &segment.constraints,
        }
    }
}

/// A toggle in one environment in the record shape events carry (`data`), which is the shape
/// stored toggles had before environments: addon templates read `event.data.enabled`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToggleRecord<'a> {
    pub name: &'a str,
    pub description: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub project: &'a str,
    pub environment: &'a str,
    pub enabled: bool,
    pub stale: bool,
    pub strategies: &'a [Strategy],
    pub variants: &'a [Variant],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impression_data: Option<bool>,
    #[serde(skip_serializing_if = "<[Dependency]>::is_empty")]
    pub dependencies: &'a [Dependency],
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<DateTime<Utc>>,
    pub tags: &'a [super::tag::TagRef],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<DateTime<Utc>>,
}

impl<'a> ToggleRecord<'a> {
    /// `toggle` as it is in `environment`.
    pub fn new(toggle: &'a Toggle, environment: &'a str) -> Self {
        let config = toggle.environment(environment);
        Self {
            name: &toggle.name,
            description: &toggle.description,
            kind: &toggle.kind,
            project: &toggle.project,
            environment,
            enabled: config.enabled,
            stale: toggle.stale,
            strategies: &config.strategies,
            variants: &config.variants,
            impression_data: toggle.impression_data,
            dependencies: &toggle.dependencies,
            created_at: toggle.created_at,
            last_seen_at: toggle.last_seen_at,
            tags: &toggle.tags,
            archived_at: toggle.archived_at,
        }
    }
}

/// A context field as served (spec §2.9): `legalValues` only when it has some.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextFieldView<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub stickiness: bool,
    pub sort_order: i64,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub legal_values: &'a [String],
    pub created_at: DateTime<Utc>,
}

impl<'a> ContextFieldView<'a> {
    /// The served form of `field`.
    pub fn new(field: &'a ContextField) -> Self {
        Self {
            name: &field.name,
            description: &field.description,
            stickiness: field.stickiness,
            sort_order: field.sort_order,
            legal_values: &field.legal_values,
            created_at: field.created_at,
        }
    }
}
