//! The sections of a version-2 document beyond the 3.x ones, applied around the toggles:
//! environments, segments, addons and API tokens before them (toggles and tokens refer to
//! them), each toggle's configuration per environment and the archived names after them.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::addons::apply_addons;
use super::apply::{ImportOptions, RecordCounts, ToggleCounts};
use super::archived::apply_archived;
use super::document::ImportDocument;
use super::environments::{apply_environments, apply_feature_environments};
use super::segments::apply_segments;
use super::tokens::apply_tokens;
use crate::domain::config_state::ConfigState;
use crate::domain::ValidationErrors;

/// What an import did with the version-2 sections; absent sections are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environments: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addons: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_tokens: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_features: Option<ToggleCounts>,
}

/// Applies the sections toggles refer to: environments, segments, addons, API tokens.
pub fn apply_before_toggles(
    next: &mut ConfigState,
    document: &ImportDocument,
    options: ImportOptions,
    errors: &mut ValidationErrors,
) -> InstanceSummary {
    InstanceSummary {
        environments: document
            .environments
            .as_ref()
            .map(|listed| apply_environments(next, listed, options.keep)),
        segments: document
            .segments
            .as_ref()
            .map(|listed| apply_segments(next, listed, options.keep, errors)),
        addons: document
            .addons
            .as_ref()
            .map(|listed| apply_addons(next, listed, options.keep, errors)),
        api_tokens: document
            .api_tokens
            .as_ref()
            .map(|listed| apply_tokens(next, listed, options.keep, errors)),
        archived_features: None,
    }
}

/// Applies the sections that refer to toggles: configuration per environment of the toggles
/// the import wrote (`written`), then the archived names. Recounts the toggles (`counts`)
/// against `before`: a toggle is unchanged when its whole record is.
#[allow(clippy::too_many_arguments)]
pub fn apply_after_toggles(
    before: &ConfigState,
    next: &mut ConfigState,
    document: &ImportDocument,
    options: ImportOptions,
    written: &HashSet<String>,
    counts: Option<&mut ToggleCounts>,
    summary: &mut InstanceSummary,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) {
    let in_document: HashSet<&str> = document
        .features
        .iter()
        .flatten()
        .map(|(_, t)| t.toggle.name.as_str())
        .collect();
    if let Some(listed) = &document.feature_environments {
        apply_feature_environments(before, next, listed, &in_document, written, errors);
        if let Some(counts) = counts {
            // `replaced_by` first set each toggle's `default` from its 3.x fields: what counts
            // is the record as the section left it.
            let existed: Vec<&String> = written
                .iter()
                .filter(|name| before.features.contains_key(name.as_str()))
                .collect();
            counts.updated = 0;
            counts.unchanged = 0;
            for name in existed {
                if before.features.get(name.as_str()) == next.features.get(name.as_str()) {
                    counts.unchanged += 1;
                } else {
                    counts.updated += 1;
                }
            }
            counts.unchanged += document
                .features
                .iter()
                .flatten()
                .filter(|(_, t)| !written.contains(&t.toggle.name))
                .count();
        }
    }
    if let Some(listed) = &document.archived_features {
        summary.archived_features = Some(apply_archived(
            next,
            listed,
            &in_document,
            options.keep,
            now,
            errors,
        ));
    }
}
