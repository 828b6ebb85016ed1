//! The `archivedFeatures` section of a version-2 document: archived toggles, so that their
//! names stay taken (Unleash refuses a new toggle of an archived name too).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use litemap::LiteMap;
use serde::Deserialize;
use serde_json::Value;

use super::apply::ToggleCounts;
use super::document::parse_item;
use crate::domain::config_state::ConfigState;
use crate::domain::project::DEFAULT_PROJECT;
use crate::domain::toggle::{Toggle, DEFAULT_TYPE};

/// An `archivedFeatures` item.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArchivedItem {
    name: String,
    #[serde(default)]
    project: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    archived_at: Option<DateTime<Utc>>,
}

/// An archived toggle as the document lists it.
#[derive(Debug, Clone)]
pub struct ArchivedName {
    pub name: String,
    pub project: String,
    pub kind: String,
    pub description: String,
    pub created_at: Option<DateTime<Utc>>,
    pub archived_at: Option<DateTime<Utc>>,
}

/// Reads the `archivedFeatures` section.
pub fn read_archived(
    list: Vec<(usize, Value)>,
    errors: &mut crate::domain::ValidationErrors,
) -> Vec<(usize, ArchivedName)> {
    let mut seen = HashMap::new();
    let mut read = Vec::new();
    for (i, item) in list {
        let path = format!("archivedFeatures[{i}]");
        let Some(item) = parse_item::<ArchivedItem>(item, &path, errors) else {
            continue;
        };
        if item.name.is_empty() {
            errors.push(
                format!("{path}.name"),
                "\"name\" is not allowed to be empty",
            );
            continue;
        }
        if let Some(earlier) = seen.insert(item.name.clone(), i) {
            errors.push(
                format!("{path}.name"),
                format!(
                    "\"{}\" appears twice (also at archivedFeatures[{earlier}])",
                    item.name
                ),
            );
            continue;
        }
        read.push((
            i,
            ArchivedName {
                name: item.name,
                project: item.project.unwrap_or_else(|| DEFAULT_PROJECT.into()),
                kind: item.kind.unwrap_or_else(|| DEFAULT_TYPE.into()),
                description: item.description.unwrap_or_default(),
                created_at: item.created_at,
                archived_at: item.archived_at,
            },
        ));
    }
    read
}

/// Archives what the document lists as archived: a name stored nowhere becomes an archived
/// toggle with no configuration; an active toggle of the name is archived (unless `keep`); an
/// archived one stays as it is. A name also among the document's active `features` is a
/// contradiction.
pub fn apply_archived(
    next: &mut ConfigState,
    listed: &[(usize, ArchivedName)],
    active_in_document: &HashSet<&str>,
    keep: bool,
    now: DateTime<Utc>,
    errors: &mut crate::domain::ValidationErrors,
) -> ToggleCounts {
    let mut counts = ToggleCounts::default();
    for (i, archived) in listed {
        if active_in_document.contains(archived.name.as_str()) {
            errors.push(
                format!("archivedFeatures[{i}].name"),
                format!(
                    "\"{}\" is also an active toggle of the document's \"features\"",
                    archived.name
                ),
            );
            continue;
        }
        if next.archive.contains_key(&archived.name) {
            counts.unchanged += 1;
            continue;
        }
        let archived_at = Some(archived.archived_at.unwrap_or(now));
        if let Some(active) = next.features.get(&archived.name).cloned() {
            if keep {
                counts.unchanged += 1;
                continue;
            }
            next.features.remove(&archived.name);
            let toggle = Toggle {
                archived_at,
                ..(*active).clone()
            }
            .switched_off();
            next.archive.insert(archived.name.clone(), Arc::new(toggle));
            counts.archived += 1;
            continue;
        }
        let toggle = Toggle {
            name: archived.name.as_str().into(),
            description: archived.description.as_str().into(),
            kind: archived.kind.as_str().into(),
            project: archived.project.as_str().into(),
            stale: false,
            impression_data: None,
            dependencies: Vec::new(),
            environments: LiteMap::new(),
            created_at: archived.created_at.unwrap_or(now),
            last_seen_at: None,
            tags: Vec::new(),
            archived_at,
        };
        next.archive.insert(archived.name.clone(), Arc::new(toggle));
        counts.created += 1;
    }
    counts
}
