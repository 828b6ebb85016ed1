//! The `addons` section of a version-2 document: addon configurations by id, validated as the
//! admin API validates them when applied, so that a masked secret (`*****`, as an export shows
//! it unless asked for secrets) keeps the value stored under the same id. Unleash 7 shows
//! webhook and Slack secrets only masked; the migration brings such addons in disabled, with
//! what to re-enter listed (see `migration`).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::apply::RecordCounts;
use super::document::parse_item;
use crate::domain::addon::{slack_tag_type, AddonConfig, AddonSpec};
use crate::domain::config_state::ConfigState;
use crate::domain::ValidationErrors;

/// The id sequence of addons (as the admin API advances it).
pub const ADDON_IDS: &str = "addon";

/// An addon of the document, parsed; validated when applied against what is stored.
#[derive(Debug, Clone)]
pub struct ListedAddon {
    id: u64,
    created_at: DateTime<Utc>,
    spec: AddonSpec,
}

/// Reads the `addons` section: each item an addon as the admin API takes it, plus its `id`.
pub fn read_addons(
    list: Vec<(usize, Value)>,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, ListedAddon)> {
    let mut seen = HashMap::new();
    let mut read = Vec::new();
    for (i, item) in list {
        let path = format!("addons[{i}]");
        let id = item.get("id").and_then(Value::as_u64).filter(|id| *id > 0);
        let created_at = item
            .get("createdAt")
            .and_then(Value::as_str)
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map_or(now, |t| t.with_timezone(&Utc));
        let Some(spec) = parse_item::<AddonSpec>(item, &path, errors) else {
            continue;
        };
        let Some(id) = id else {
            errors.push(format!("{path}.id"), "\"id\" must be a positive integer");
            continue;
        };
        if let Some(earlier) = seen.insert(id, i) {
            errors.push(
                format!("{path}.id"),
                format!("the addon id {id} appears twice (also at addons[{earlier}])"),
            );
            continue;
        }
        read.push((
            i,
            ListedAddon {
                id,
                created_at,
                spec,
            },
        ));
    }
    read
}

/// Writes the document's addons by id (unless `keep` and stored), advancing the id sequence
/// past them; a Slack addon brings the tag type its channels are read from.
pub fn apply_addons(
    next: &mut ConfigState,
    listed: &[(usize, ListedAddon)],
    keep: bool,
    errors: &mut ValidationErrors,
) -> RecordCounts {
    let mut counts = RecordCounts::default();
    for (i, listed) in listed {
        let key = listed.id.to_string();
        // A masked secret keeps the stored one only of an addon of the same provider: another
        // provider under the same id is a replacement, as it always was.
        let stored = next
            .addons
            .get(&key)
            .filter(|old| listed.spec.provider.as_deref() == Some(old.provider.as_str()))
            .cloned();
        let Some(valid) = errors.absorb(
            &format!("addons[{i}]"),
            listed.spec.clone().validate(stored.as_deref()),
        ) else {
            continue;
        };
        let addon = AddonConfig::create(listed.id, valid, listed.created_at);
        match next.addons.get(&key) {
            None => {
                counts.created += 1;
                next.addons.insert(key, Arc::new(addon.clone()));
            }
            Some(_) if keep => counts.unchanged += 1,
            Some(old) => {
                let record = AddonConfig {
                    created_at: old.created_at,
                    ..addon.clone()
                };
                if **old == record {
                    counts.unchanged += 1;
                } else {
                    counts.updated += 1;
                    next.addons.insert(key, Arc::new(record));
                }
            }
        }
        if addon.provider == "slack" {
            let slack = slack_tag_type();
            if !next.tag_types.contains_key(&slack.name) {
                next.tag_types.insert(slack.name.clone(), Arc::new(slack));
            }
        }
    }
    if let Some(highest) = listed.iter().map(|(_, a)| a.id).max() {
        let counter = next.counters.entry(ADDON_IDS.to_string()).or_insert(0);
        *counter = (*counter).max(highest);
    }
    counts
}
