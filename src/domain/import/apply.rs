//! Applying a read document to a configuration: the configuration it makes and what happened
//! to each section's records, with every broken reference reported against the document —
//! all before anything is written.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use imbl::ordmap::DiffItem;
use imbl::OrdMap;
use serde::Serialize;
use serde_json::Value;

use super::document::ImportDocument;
use super::instance::{apply_after_toggles, apply_before_toggles, InstanceSummary};
use crate::domain::config_state::ConfigState;
use crate::domain::context_field::is_built_in;
use crate::domain::event_diff::differences;
use crate::domain::project::DEFAULT_PROJECT;
use crate::domain::tag::{Tag, TagRef};
use crate::domain::toggle::Toggle;
use crate::domain::{DomainError, ValidationErrors};

/// How a document meets what exists (API-FACTS §7.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ImportOptions {
    /// Remove, in each section the document has, what it does not list (toggles are archived,
    /// not deleted; built-ins and `default` stay).
    pub drop: bool,
    /// Leave existing records as they are; only add what is missing.
    pub keep: bool,
}

/// What an import did (or would do), section by section; absent sections are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<ToggleCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategies: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projects: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_fields: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag_types: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<RecordCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_tags: Option<FeatureTagCounts>,
    /// The sections of a whole instance (version 2).
    #[serde(flatten)]
    pub instance: InstanceSummary,
}

/// What happened to the toggles.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToggleCounts {
    pub created: usize,
    pub updated: usize,
    /// Archived toggles of the document's names, brought back with its definition.
    pub revived: usize,
    /// Active toggles the document does not list (with `drop`).
    pub archived: usize,
    pub unchanged: usize,
}

/// What happened to the records of another section.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecordCounts {
    pub created: usize,
    pub updated: usize,
    /// Records the document does not list (with `drop`).
    pub deleted: usize,
    pub unchanged: usize,
}

/// What happened to the tags on toggles.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FeatureTagCounts {
    pub added: usize,
    /// Tags the document does not list, taken off their toggles (with `drop`).
    pub removed: usize,
    pub unchanged: usize,
}

/// One toggle an import changes, with the differences of its stored form (deep-diff format).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToggleChange {
    pub name: String,
    /// `created`, `updated`, `revived` or `archived`.
    pub change: &'static str,
    pub diffs: Vec<Value>,
}

/// The configuration an import makes, and its account.
#[derive(Debug, Clone)]
pub struct ImportResult {
    pub state: ConfigState,
    pub summary: ImportSummary,
}

impl ImportResult {
    /// Every toggle whose record the import changes, with its differences, by name.
    pub fn toggle_changes(&self, before: &ConfigState) -> Vec<ToggleChange> {
        let mut changes = BTreeMap::new();
        let json = |t: &Toggle| serde_json::to_value(t).unwrap_or(Value::Null);
        for item in before.features.diff(&self.state.features) {
            let (name, change, old, new) = match item {
                DiffItem::Add(name, new) => match before.archive.get(name) {
                    Some(old) => (name, "revived", json(old), json(new)),
                    None => (name, "created", Value::Null, json(new)),
                },
                DiffItem::Update { old, new } => (old.0, "updated", json(old.1), json(new.1)),
                DiffItem::Remove(name, old) => {
                    let new = self
                        .state
                        .archive
                        .get(name)
                        .map_or(Value::Null, |t| json(t));
                    (name, "archived", json(old), new)
                }
            };
            changes.insert(
                name.clone(),
                ToggleChange {
                    name: name.clone(),
                    change,
                    // A new record is one "N" (new) at the top, as deep-diff has it.
                    diffs: if old.is_null() {
                        vec![serde_json::json!({"kind": "N", "path": [], "rhs": new})]
                    } else {
                        differences(&old, &new)
                    },
                },
            );
        }
        changes.into_values().collect()
    }
}

/// Applies `document` to `state` with `options`; `errors` holds the problems reading it
/// found. Fails with every problem, those and the broken references, in one error.
pub fn apply_import(
    state: &ConfigState,
    document: &ImportDocument,
    options: ImportOptions,
    now: DateTime<Utc>,
    mut errors: ValidationErrors,
) -> Result<ImportResult, DomainError> {
    let mut next = state.clone();
    let mut summary = ImportSummary::default();
    if let Some(projects) = &document.projects {
        let listed: Vec<_> = projects.iter().map(|(_, p)| p.clone()).collect();
        let (counts, _) = merge(
            &mut next.projects,
            listed,
            options,
            |p| &p.id,
            |old, new| {
                new.created_at = old.created_at;
            },
            |id| id == DEFAULT_PROJECT,
        );
        summary.projects = Some(counts);
    }
    if let Some(fields) = &document.context_fields {
        let listed: Vec<_> = fields.iter().map(|(_, f)| f.clone()).collect();
        let (counts, _) = merge(
            &mut next.context_fields,
            listed,
            options,
            |f| &f.name,
            |old, new| {
                new.created_at = old.created_at;
                new.built_in = old.built_in;
            },
            is_built_in,
        );
        summary.context_fields = Some(counts);
    }
    if let Some(strategies) = &document.strategies {
        let listed: Vec<_> = strategies.iter().map(|(_, s)| s.clone()).collect();
        let built_ins: HashSet<String> = next
            .strategies
            .values()
            .filter(|s| s.built_in)
            .map(|s| s.name.clone())
            .collect();
        let (counts, _) = merge(
            &mut next.strategies,
            listed,
            options,
            |s| &s.name,
            |_, _| {},
            |name| built_ins.contains(name),
        );
        summary.strategies = Some(counts);
    }
    if let Some(tag_types) = &document.tag_types {
        let listed: Vec<_> = tag_types.iter().map(|(_, t)| t.clone()).collect();
        // A tag type an addon reads (slack channels) stays, as a deletion would refuse.
        let read_by_addons: Vec<String> = next
            .tag_types
            .keys()
            .filter(|name| state.addon_reading_tag_type(name).is_some())
            .cloned()
            .collect();
        let (counts, removed) = merge(
            &mut next.tag_types,
            listed,
            options,
            |t| &t.name,
            |_, _| {},
            |name| read_by_addons.iter().any(|n| n == name),
        );
        let gone: Vec<TagRef> = next
            .tags
            .values()
            .filter(|t| removed.contains(&t.kind))
            .map(|t| t.reference())
            .collect();
        remove_tags(&mut next, &gone);
        summary.tag_types = Some(counts);
    }
    if let Some(tags) = &document.tags {
        summary.tags = Some(import_tags(&mut next, tags, options, &mut errors));
    }
    summary.instance = apply_before_toggles(&mut next, document, options, &mut errors);
    let mut written = HashSet::new();
    if let Some(features) = &document.features {
        let (counts, names) = import_toggles(&mut next, features, options, now);
        summary.features = Some(counts);
        written = names;
    }
    apply_after_toggles(
        state,
        &mut next,
        document,
        options,
        &written,
        summary.features.as_mut(),
        &mut summary.instance,
        now,
        &mut errors,
    );
    if let Some(feature_tags) = &document.feature_tags {
        summary.feature_tags = Some(import_feature_tags(
            &mut next,
            feature_tags,
            options,
            &written,
            &mut errors,
        ));
    }
    move_orphans_to_default(&mut next);
    check_references(state, &next, document, &written, &mut errors);
    errors.into_result(ImportResult {
        state: next,
        summary,
    })
}

/// Archived toggles whose project is gone (dropped by this import, possibly after they were
/// archived by it) move to `default`, as a project deletion does, so they can be revived.
fn move_orphans_to_default(next: &mut ConfigState) {
    let orphans: Vec<_> = next
        .archive
        .values()
        .filter(|t| t.project != DEFAULT_PROJECT && !next.projects.contains_key(t.project.as_str()))
        .cloned()
        .collect();
    for toggle in orphans {
        let toggle = Toggle {
            project: DEFAULT_PROJECT.into(),
            ..(*toggle).clone()
        };
        next.archive
            .insert(toggle.name.to_string(), Arc::new(toggle));
    }
}

/// Merges the `listed` records into `map` (keyed by `key`): new ones are added; existing ones
/// are replaced (after `carry` copies over what the document does not decide) unless `keep`
/// or equal; with `drop`, records not listed are removed unless `protected`. Returns the
/// counts and the removed keys.
pub(super) fn merge<V: Clone + PartialEq>(
    map: &mut OrdMap<String, Arc<V>>,
    listed: Vec<V>,
    options: ImportOptions,
    key: impl Fn(&V) -> &String,
    carry: impl Fn(&V, &mut V),
    protected: impl Fn(&str) -> bool,
) -> (RecordCounts, Vec<String>) {
    let mut counts = RecordCounts::default();
    let names: HashSet<String> = listed.iter().map(|v| key(v).clone()).collect();
    for mut record in listed {
        let name = key(&record).clone();
        match map.get(&name) {
            None => {
                counts.created += 1;
                map.insert(name, Arc::new(record));
            }
            Some(_) if options.keep => counts.unchanged += 1,
            Some(old) => {
                carry(old, &mut record);
                if **old == record {
                    counts.unchanged += 1;
                } else {
                    counts.updated += 1;
                    map.insert(name, Arc::new(record));
                }
            }
        }
    }
    let mut removed = Vec::new();
    if options.drop {
        removed = map
            .keys()
            .filter(|k| !names.contains(*k) && !protected(k))
            .cloned()
            .collect();
        for k in &removed {
            map.remove(k);
        }
        counts.deleted = removed.len();
    }
    (counts, removed)
}

/// Takes `gone` out of the tags and off every toggle that carries one.
fn remove_tags(next: &mut ConfigState, gone: &[TagRef]) {
    if gone.is_empty() {
        return;
    }
    for tag in gone {
        next.tags.remove(&tag.key());
    }
    let gone: HashSet<&TagRef> = gone.iter().collect();
    for map in [&mut next.features, &mut next.archive] {
        let affected: Vec<_> = map
            .values()
            .filter(|t| t.tags.iter().any(|r| gone.contains(r)))
            .cloned()
            .collect();
        for toggle in affected {
            let mut toggle = (*toggle).clone();
            toggle.tags.retain(|r| !gone.contains(r));
            map.insert(toggle.name.to_string(), Arc::new(toggle));
        }
    }
}

/// Adds a tag with the next id unless it exists; whether it was added.
fn ensure_tag(next: &mut ConfigState, tag: &TagRef) -> bool {
    if next.tag(tag).is_some() {
        return false;
    }
    let id = next.next_id("tag");
    next.counters.insert("tag".into(), id);
    next.tags.insert(
        tag.key(),
        Arc::new(Tag {
            id,
            kind: tag.kind.to_string(),
            value: tag.value.to_string(),
        }),
    );
    true
}

fn import_tags(
    next: &mut ConfigState,
    tags: &[(usize, TagRef)],
    options: ImportOptions,
    errors: &mut ValidationErrors,
) -> RecordCounts {
    let mut counts = RecordCounts::default();
    for (i, tag) in tags {
        if !next.tag_types.contains_key(tag.kind.as_str()) {
            errors.push(
                format!("tags[{i}].type"),
                format!(
                    "there is no tag type \"{}\" (in the document or stored)",
                    tag.kind
                ),
            );
        } else if ensure_tag(next, tag) {
            counts.created += 1;
        } else {
            counts.unchanged += 1;
        }
    }
    if options.drop {
        let listed: HashSet<String> = tags.iter().map(|(_, t)| t.key()).collect();
        let gone: Vec<TagRef> = next
            .tags
            .values()
            .filter(|t| !listed.contains(&t.reference().key()))
            .map(|t| t.reference())
            .collect();
        counts.deleted = gone.len();
        remove_tags(next, &gone);
    }
    counts
}

fn import_toggles(
    next: &mut ConfigState,
    features: &[(usize, super::ImportedToggle)],
    options: ImportOptions,
    now: DateTime<Utc>,
) -> (ToggleCounts, HashSet<String>) {
    let mut counts = ToggleCounts::default();
    let mut written = HashSet::new();
    for (_, imported) in features {
        let valid = imported.toggle.clone();
        let name = valid.name.clone();
        let existing = next.features.get(&name).or_else(|| next.archive.get(&name));
        // `keep` never overrides what exists, archived toggles included (the reference
        // revives those; a start-up seed must not bring back what an admin archived).
        if existing.is_some() && options.keep {
            counts.unchanged += 1;
            continue;
        }
        if let Some(current) = next.features.get(&name) {
            let toggle = current.replaced_by(valid);
            if **current == toggle {
                counts.unchanged += 1;
                continue;
            }
            counts.updated += 1;
            next.features.insert(name.clone(), Arc::new(toggle));
        } else if let Some(archived) = next.archive.remove(&name) {
            // As the reference does: an import brings an archived toggle of its name back.
            counts.revived += 1;
            next.features
                .insert(name.clone(), Arc::new(archived.replaced_by(valid)));
        } else {
            counts.created += 1;
            let toggle = Toggle::create(valid, imported.created_at.unwrap_or(now));
            next.features.insert(name.clone(), Arc::new(toggle));
        }
        written.insert(name);
    }
    if options.drop {
        let listed: HashSet<&str> = features
            .iter()
            .map(|(_, t)| t.toggle.name.as_str())
            .collect();
        let unlisted: Vec<_> = next
            .features
            .values()
            .filter(|t| !listed.contains(t.name.as_str()))
            .cloned()
            .collect();
        for toggle in unlisted {
            next.features.remove(toggle.name.as_str());
            let archived = Toggle {
                archived_at: Some(now),
                ..(*toggle).clone()
            }
            .switched_off();
            next.archive
                .insert(archived.name.to_string(), Arc::new(archived));
            counts.archived += 1;
        }
    }
    (counts, written)
}

/// Tags on toggles. With `keep` (and no `drop`), toggles this import did not write are left as
/// they are; a
/// tag on an archived toggle (archived since the document was written) is left alone too, so
/// a start-up document stays valid when an admin archives a toggle it seeded.
fn import_feature_tags(
    next: &mut ConfigState,
    feature_tags: &[(usize, super::FeatureTagRef)],
    options: ImportOptions,
    written: &HashSet<String>,
    errors: &mut ValidationErrors,
) -> FeatureTagCounts {
    let mut counts = FeatureTagCounts::default();
    if options.drop {
        // The document's list is the whole truth: every other tag comes off its toggle.
        let listed: HashSet<(&str, &TagRef)> = feature_tags
            .iter()
            .map(|(_, f)| (f.feature_name.as_str(), &f.tag))
            .collect();
        let affected: Vec<_> = next
            .features
            .values()
            .filter(|t| {
                t.tags
                    .iter()
                    .any(|r| !listed.contains(&(t.name.as_str(), r)))
            })
            .cloned()
            .collect();
        for toggle in affected {
            let mut toggle = (*toggle).clone();
            let before = toggle.tags.len();
            toggle
                .tags
                .retain(|r| listed.contains(&(toggle.name.as_str(), r)));
            counts.removed += before - toggle.tags.len();
            next.features
                .insert(toggle.name.to_string(), Arc::new(toggle));
        }
    }
    for (i, feature_tag) in feature_tags {
        let path = format!("featureTags[{i}]");
        let name = &feature_tag.feature_name;
        // With `drop` the section is the whole truth (as the reference has it), `keep` or not.
        let kept = options.keep
            && !options.drop
            && !written.contains(name)
            && next.features.contains_key(name);
        if kept || next.archive.contains_key(name) {
            counts.unchanged += 1;
            continue;
        }
        let Some(toggle) = next.features.get(name) else {
            errors.push(
                format!("{path}.featureName"),
                format!(
                    "there is no active toggle \"{}\" (in the document or stored)",
                    feature_tag.feature_name
                ),
            );
            continue;
        };
        if !next.tag_types.contains_key(feature_tag.tag.kind.as_str()) {
            errors.push(
                format!("{path}.tagType"),
                format!(
                    "there is no tag type \"{}\" (in the document or stored)",
                    feature_tag.tag.kind
                ),
            );
            continue;
        }
        if toggle.tags.contains(&feature_tag.tag) {
            counts.unchanged += 1;
            continue;
        }
        let mut toggle = (**toggle).clone();
        toggle.tags.push(feature_tag.tag.clone());
        ensure_tag(next, &feature_tag.tag);
        next.features
            .insert(toggle.name.to_string(), Arc::new(toggle));
        counts.added += 1;
    }
    counts
}

/// What `toggle` refers to that `state` lacks, by the document section it belongs to: its
/// project, its constraints' context fields (or their legal values), its strategy definitions.
fn problems_of(toggle: &Toggle, state: &ConfigState) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    if let Err(DomainError::Invalid(errors)) = toggle.check_references(state) {
        for e in errors.0 {
            let section = if e.path == "project" {
                "projects"
            } else {
                "contextFields"
            };
            problems.push((section, e.message));
        }
    }
    for strategy in toggle.all_strategies() {
        if !state.strategies.contains_key(strategy.name.as_str()) {
            problems.push((
                "strategies",
                format!("there is no strategy definition \"{}\"", strategy.name),
            ));
        }
    }
    problems
}

/// How many broken references of toggles the document does not write are listed one by one.
const BROKEN_SHOWN: usize = 20;

/// The references of the configuration the import makes: the toggles it writes name existing
/// projects, context fields (with legal values) and strategy definitions; every other active
/// toggle (kept, unchanged or not listed) lost none of its references to this import.
fn check_references(
    before: &ConfigState,
    next: &ConfigState,
    document: &ImportDocument,
    written: &HashSet<String>,
    errors: &mut ValidationErrors,
) {
    for (i, imported) in document.features.iter().flatten() {
        let toggle = &imported.toggle;
        if !written.contains(&toggle.name) {
            continue;
        }
        let path = format!("features[{i}]");
        errors.absorb(&path, toggle.check_references(next));
        for (j, strategy) in toggle.strategies.iter().enumerate() {
            if !next.strategies.contains_key(strategy.name.as_str()) {
                errors.push(
                    format!("{path}.strategies[{j}].name"),
                    format!(
                        "there is no strategy definition \"{}\" (in the document or stored)",
                        strategy.name
                    ),
                );
            }
        }
    }
    let mut broken = Vec::new();
    for toggle in next
        .features
        .values()
        .filter(|t| !written.contains(t.name.as_str()))
    {
        let problems = problems_of(toggle, next);
        // Broken before this import already: not its doing.
        let unchanged = before.features.get(toggle.name.as_str()) == Some(toggle);
        if problems.is_empty() || (unchanged && !problems_of(toggle, before).is_empty()) {
            continue;
        }
        for (section, problem) in problems {
            broken.push((
                section,
                format!(
                    "the active toggle \"{}\" would be left broken: {problem}",
                    toggle.name
                ),
            ));
        }
    }
    let more = broken.len().saturating_sub(BROKEN_SHOWN);
    for (section, message) in broken.into_iter().take(BROKEN_SHOWN) {
        errors.push(section, message);
    }
    if more > 0 {
        errors.push(
            "",
            format!("… and {more} more broken references of active toggles"),
        );
    }
}
