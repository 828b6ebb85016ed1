//! The sections a version-2 state document adds for a whole instance: environments, each
//! toggle's configuration per environment, segments, archived toggles, API tokens (by the
//! SHA-256 of their secret: secrets are never stored) and addons (their secrets masked unless
//! asked for, as the addon views show them, so that an export passed around by habit does not
//! carry them; any admin may still ask).

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::ExportSections;
use crate::domain::addon::AddonConfig;
use crate::domain::config_state::ConfigState;
use crate::domain::environment::{Environment, FeatureEnvironment};
use crate::domain::segment::Segment;

/// The version-2 sections; absent ones are left out.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSections<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environments: Option<Vec<&'a Environment>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_environments: Option<Vec<ExportedFeatureEnvironment<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments: Option<Vec<&'a Segment>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_features: Option<Vec<ArchivedFeature<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_tokens: Option<Vec<ExportedToken<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addons: Option<Vec<Cow<'a, AddonConfig>>>,
}

/// One toggle's configuration in one environment.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedFeatureEnvironment<'a> {
    pub feature_name: &'a str,
    pub environment: &'a str,
    #[serde(flatten)]
    pub config: &'a FeatureEnvironment,
}

/// An archived toggle: its name stays taken.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchivedFeature<'a> {
    pub name: &'a str,
    pub project: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub description: &'a str,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<DateTime<Utc>>,
}

/// An API token, named by the SHA-256 of its secret.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedToken<'a> {
    pub secret_sha256: &'a str,
    pub secret_prefix: &'a str,
    pub token_name: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub projects: &'a [String],
    pub environment: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// The version-2 sections of `state` that `sections` asks for.
pub fn instance_sections(state: &ConfigState, sections: ExportSections) -> InstanceSections<'_> {
    InstanceSections {
        environments: sections
            .projects
            .then(|| state.environments.values().map(|e| &**e).collect()),
        feature_environments: sections.features.then(|| {
            state
                .features
                .values()
                .flat_map(|t| {
                    t.environments
                        .iter()
                        .map(|(environment, config)| ExportedFeatureEnvironment {
                            feature_name: &t.name,
                            environment,
                            config,
                        })
                })
                .collect()
        }),
        segments: sections
            .projects
            .then(|| state.segments.values().map(|s| &**s).collect()),
        archived_features: sections.features.then(|| {
            state
                .archive
                .values()
                .map(|t| ArchivedFeature {
                    name: &t.name,
                    project: &t.project,
                    kind: &t.kind,
                    description: &t.description,
                    created_at: t.created_at,
                    archived_at: t.archived_at,
                })
                .collect()
        }),
        api_tokens: sections.projects.then(|| {
            state
                .api_tokens
                .values()
                .map(|t| ExportedToken {
                    secret_sha256: &t.hash,
                    secret_prefix: &t.prefix,
                    token_name: &t.username,
                    kind: t.kind.name(),
                    projects: &t.projects,
                    environment: &t.environment,
                    alias: t.alias.as_deref(),
                    expires_at: t.expires_at,
                    created_at: t.created_at,
                })
                .collect()
        }),
        addons: sections.projects.then(|| {
            state
                .addons
                .values()
                .map(|a| match sections.addon_secrets {
                    true => Cow::Borrowed(&**a),
                    false => Cow::Owned(a.masked()),
                })
                .collect()
        }),
    }
}
