//! The state document (API-FACTS §7.2): what `GET /api/admin/state/export` serves and
//! `POST /api/admin/state/import` reads.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::config_state::ConfigState;
use super::dependency::Dependency;
use super::project::Project;
use super::strategy::{ParameterDefinition, StrategyDefinition};
use super::tag::{TagRef, TagType};
use super::toggle::Toggle;
use super::views::ContextFieldView;
use super::views::{ClientSegment, ClientToggle, SegmentForm};

mod instance;
pub use instance::{instance_sections, InstanceSections};

/// The version of the document format.
pub const DOCUMENT_VERSION: u32 = 2;

/// Which sections an export holds (the `featureToggles`, `strategies`, `tags` and `projects`
/// query parameters; context fields, environments, segments, API tokens and addons go with
/// projects, each toggle's configuration per environment and the archived toggles with the
/// toggles), and whether addons carry their secrets (`addonSecrets`; masked otherwise, as the
/// addon views show them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSections {
    pub features: bool,
    pub strategies: bool,
    pub tags: bool,
    pub projects: bool,
    pub addon_secrets: bool,
}

impl Default for ExportSections {
    fn default() -> Self {
        Self {
            features: true,
            strategies: true,
            tags: true,
            projects: true,
            addon_secrets: false,
        }
    }
}

/// The whole document; absent sections are left out.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateDocument<'a> {
    pub version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<ExportedToggle<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategies: Option<Vec<ExportedStrategy<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projects: Option<Vec<&'a Project>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_fields: Option<Vec<ContextFieldView<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag_types: Option<Vec<&'a TagType>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<TagRef>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_tags: Option<Vec<FeatureTag<'a>>>,
    #[serde(flatten)]
    pub instance: InstanceSections<'a>,
}

/// An active toggle's toggle-wide fields (its configuration per environment travels in
/// `featureEnvironments`, its tags in `featureTags`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedToggle<'a> {
    pub name: &'a str,
    pub description: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub project: &'a str,
    pub stale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impression_data: Option<bool>,
    #[serde(skip_serializing_if = "<[Dependency]>::is_empty")]
    pub dependencies: &'a [Dependency],
    pub created_at: DateTime<Utc>,
    pub last_seen_at: Option<DateTime<Utc>>,
}

/// A strategy definition as exported: no `editable` (only non-built-ins are exported).
#[derive(Debug, Serialize)]
pub struct ExportedStrategy<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a [ParameterDefinition],
    pub deprecated: bool,
}

/// A tag on a toggle.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureTag<'a> {
    pub feature_name: &'a str,
    pub tag_type: &'a str,
    pub tag_value: &'a str,
}

impl<'a> ExportedToggle<'a> {
    fn new(toggle: &'a Toggle) -> Self {
        Self {
            name: &toggle.name,
            description: &toggle.description,
            kind: &toggle.kind,
            project: &toggle.project,
            stale: toggle.stale,
            impression_data: toggle.impression_data,
            dependencies: &toggle.dependencies,
            created_at: toggle.created_at,
            last_seen_at: toggle.last_seen_at,
        }
    }
}

impl<'a> ExportedStrategy<'a> {
    fn new(strategy: &'a StrategyDefinition) -> Self {
        Self {
            name: &strategy.name,
            description: &strategy.description,
            parameters: &strategy.parameters,
            deprecated: strategy.deprecated,
        }
    }
}

/// The document of `state` with the chosen sections.
///
/// Version 2: the 3.x sections, toggles with their toggle-wide fields only, and the sections
/// of a whole instance (see `instance_sections`).
pub fn export(state: &ConfigState, sections: ExportSections) -> StateDocument<'_> {
    let features = sections.features.then(|| {
        state
            .features
            .values()
            .map(|t| ExportedToggle::new(t))
            .collect()
    });
    let strategies = sections.strategies.then(|| {
        state
            .strategies
            .values()
            .filter(|s| !s.built_in)
            .map(|s| ExportedStrategy::new(s))
            .collect()
    });
    let projects = sections
        .projects
        .then(|| state.projects.values().map(|p| &**p).collect());
    let context_fields = sections.projects.then(|| {
        state
            .context_fields
            .values()
            .map(|f| ContextFieldView::new(f))
            .collect()
    });
    let tag_types = sections
        .tags
        .then(|| state.tag_types.values().map(|t| &**t).collect());
    let tags = sections
        .tags
        .then(|| state.tags.values().map(|t| t.reference()).collect());
    let feature_tags = sections.tags.then(|| {
        state
            .features
            .values()
            .flat_map(|t| {
                t.tags.iter().map(|tag| FeatureTag {
                    feature_name: &t.name,
                    tag_type: &tag.kind,
                    tag_value: &tag.value,
                })
            })
            .collect()
    });
    StateDocument {
        version: DOCUMENT_VERSION,
        features,
        strategies,
        projects,
        context_fields,
        tag_types,
        tags,
        feature_tags,
        instance: instance_sections(state, sections),
    }
}

/// The client document of one environment, as `GET /api/client/features` serves it with
/// segments by reference, but with every active toggle and every segment: what the
/// client-shaped import (`POST /api/admin/state/import?environment=E`) takes back.
#[derive(Debug, Serialize)]
pub struct EnvironmentDocument<'a> {
    pub version: u32,
    pub features: Vec<ClientToggle<'a>>,
    pub segments: Vec<ClientSegment<'a>>,
}

/// The client document of `environment` in `state` with only the active toggles of `names`
/// (by name; unknown names left out) and the segments their strategies there refer to: the
/// UI's bulk export, which the client-shaped import takes back.
pub fn export_environment_of<'a>(
    state: &'a ConfigState,
    environment: &str,
    names: &[String],
) -> EnvironmentDocument<'a> {
    let chosen: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let toggles: Vec<&Toggle> = chosen
        .iter()
        .filter_map(|name| state.features.get(*name))
        .map(|t| &**t)
        .collect();
    let referenced: std::collections::BTreeSet<u32> = toggles
        .iter()
        .flat_map(|t| t.environment(environment).strategies.iter())
        .flat_map(|s| s.segments.iter().copied())
        .collect();
    EnvironmentDocument {
        version: 1,
        features: toggles
            .into_iter()
            .map(|t| ClientToggle::in_environment(t, environment, SegmentForm::ByReference))
            .collect(),
        segments: referenced
            .into_iter()
            .filter_map(|id| state.segments.get(&id.to_string()))
            .map(|s| ClientSegment::new(s))
            .collect(),
    }
}

/// The client document of `environment` in `state`.
pub fn export_environment<'a>(
    state: &'a ConfigState,
    environment: &str,
) -> EnvironmentDocument<'a> {
    EnvironmentDocument {
        version: 1,
        features: state
            .features
            .values()
            .map(|t| ClientToggle::in_environment(t, environment, SegmentForm::ByReference))
            .collect(),
        segments: state
            .segments
            .values()
            .map(|s| ClientSegment::new(s))
            .collect(),
    }
}
