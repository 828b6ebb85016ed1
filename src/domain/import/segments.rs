//! The `segments` section of a version-2 document: segments with their ids (strategies refer
//! to them by id), names, projects and constraints, stored as written.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::apply::RecordCounts;
use super::document::parse_item;
use crate::domain::config_state::ConfigState;
use crate::domain::constraint::Constraint;
use crate::domain::name::{check_name, NAME_MAX};
use crate::domain::segment::{Segment, SEGMENT_IDS};
use crate::domain::ValidationErrors;

/// A `segments` item.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SegmentItem {
    id: u32,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    constraints: Vec<Constraint>,
    #[serde(default)]
    created_by: Option<String>,
    #[serde(default)]
    created_at: Option<DateTime<Utc>>,
}

/// Reads the `segments` section: ids and names unique.
pub fn read_segments(
    list: Vec<(usize, Value)>,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, Segment)> {
    let mut ids = HashMap::new();
    let mut names = HashMap::new();
    let mut read = Vec::new();
    for (i, item) in list {
        let path = format!("segments[{i}]");
        let Some(item) = parse_item::<SegmentItem>(item, &path, errors) else {
            continue;
        };
        if let Err(m) = check_name("name", &item.name, 1, NAME_MAX) {
            errors.push(format!("{path}.name"), m);
            continue;
        }
        if let Some(earlier) = ids.insert(item.id, i) {
            errors.push(
                format!("{path}.id"),
                format!(
                    "the segment id {} appears twice (also at segments[{earlier}])",
                    item.id
                ),
            );
            continue;
        }
        if let Some(earlier) = names.insert(item.name.clone(), i) {
            errors.push(
                format!("{path}.name"),
                format!(
                    "the segment name \"{}\" appears twice (also at segments[{earlier}])",
                    item.name
                ),
            );
            continue;
        }
        read.push((
            i,
            Segment {
                id: item.id,
                name: item.name,
                description: item.description.filter(|d| !d.is_empty()),
                project: item.project,
                constraints: item.constraints,
                created_by: item.created_by,
                created_at: item.created_at.unwrap_or(now),
            },
        ));
    }
    read
}

/// Writes the document's segments by id (unless `keep` and stored), advancing the id
/// sequence past them. A stored segment of another id may not have a listed name.
pub fn apply_segments(
    next: &mut ConfigState,
    listed: &[(usize, Segment)],
    keep: bool,
    errors: &mut ValidationErrors,
) -> RecordCounts {
    let mut counts = RecordCounts::default();
    for (i, segment) in listed {
        let key = segment.id.to_string();
        let clash = next
            .segments
            .values()
            .find(|s| s.name == segment.name && s.id != segment.id && !listed_id(listed, s.id));
        if let Some(other) = clash {
            errors.push(
                format!("segments[{i}].name"),
                format!(
                    "the stored segment {} is named \"{}\" already",
                    other.id, other.name
                ),
            );
            continue;
        }
        match next.segments.get(&key) {
            None => {
                counts.created += 1;
                next.segments.insert(key, Arc::new(segment.clone()));
            }
            Some(_) if keep => counts.unchanged += 1,
            Some(old) => {
                let record = Segment {
                    created_at: old.created_at,
                    ..segment.clone()
                };
                if **old == record {
                    counts.unchanged += 1;
                } else {
                    counts.updated += 1;
                    next.segments.insert(key, Arc::new(record));
                }
            }
        }
    }
    if let Some(highest) = listed.iter().map(|(_, s)| u64::from(s.id)).max() {
        let counter = next.counters.entry(SEGMENT_IDS.to_string()).or_insert(0);
        *counter = (*counter).max(highest);
    }
    counts
}

/// Whether the document lists a segment of `id` (it is then renamed too).
fn listed_id(listed: &[(usize, Segment)], id: u32) -> bool {
    listed.iter().any(|(_, s)| s.id == id)
}
