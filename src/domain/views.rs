//! The JSON shapes toggles are served in. Pure serde; built from domain types.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::config_state::ConfigState;
use super::context_field::ContextField;
use super::tag::Tag;
use super::toggle::{serialize_parameters, Parameters, Strategy, Toggle, Variant};

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
    fn of(toggle: &'a Toggle) -> Self {
        match toggle.strategies.first() {
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
            enabled: toggle.enabled,
            stale: toggle.stale,
            strategies: &toggle.strategies,
            variants: &toggle.variants,
            impression_data: toggle.impression_data,
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
            legacy: Some(LegacyStrategy::of(toggle)),
            ..Self::new(toggle, state)
        }
    }
}

/// A toggle in client responses (spec §4.1): `strategies` plus the legacy pair; variants and
/// constraints only when configured. Equal views serialise to equal bytes.
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToggle<'a> {
    pub name: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub enabled: bool,
    pub stale: bool,
    pub strategies: &'a [Strategy],
    #[serde(flatten)]
    pub legacy: LegacyStrategy<'a>,
    #[serde(skip_serializing_if = "<[Variant]>::is_empty")]
    pub variants: &'a [Variant],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impression_data: Option<bool>,
}

impl<'a> ClientToggle<'a> {
    /// The client view of `toggle`.
    pub fn new(toggle: &'a Toggle) -> Self {
        Self {
            name: &toggle.name,
            kind: &toggle.kind,
            enabled: toggle.enabled,
            stale: toggle.stale,
            strategies: &toggle.strategies,
            legacy: LegacyStrategy::of(toggle),
            variants: &toggle.variants,
            impression_data: toggle.impression_data,
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
