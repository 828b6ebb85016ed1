//! State import as one atomic write: the document is read and applied to the configuration in
//! memory (`domain::import`), and the records that differ, with one event each plus a summary
//! event, are committed together — or, on a dry run, only reported.

use std::sync::{Arc, Mutex};

use chrono::Utc;
use imbl::ordmap::DiffItem;
use imbl::OrdMap;
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::addons::addon_data;
use super::projects::project_data;
use super::{event_data, Actor, Plan, Service, ServiceError, COMMIT_ATTEMPTS};
use crate::domain::config_state::ConfigState;
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::event::EventKind;
use crate::domain::import::{
    apply_import, parse_document, read_document, DocumentFormat, ImportDocument, ImportOptions,
    ImportSummary, ToggleChange,
};
use crate::domain::tag::TagRef;
use crate::domain::views::{ContextFieldView, ToggleRecord};
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

/// The document of `--import-file`, read when the replica starts and applied once per store:
/// the commit that applies it also writes `marker` (a counter record named after the
/// document's hash and the mode), and a store holding the marker is left alone.
#[derive(Debug, Clone)]
pub struct StartupImport {
    document: Value,
    options: ImportOptions,
    marker: String,
}

impl StartupImport {
    /// Parses `bytes` (JSON or YAML, by `file_name`'s extension or by sniffing), to apply
    /// with `options`.
    pub fn new(bytes: &[u8], file_name: &str, options: ImportOptions) -> Result<Self, DomainError> {
        let document = parse_document(bytes, DocumentFormat::of_file_name(file_name))?;
        let mut hash = Sha256::new();
        hash.update(bytes);
        hash.update([u8::from(options.drop), u8::from(options.keep)]);
        let digest = hash.finalize();
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Ok(Self {
            document,
            options,
            marker: format!("import-file:{hex}"),
        })
    }
}

/// What an import answers: the options, the summary and, on a dry run, every toggle it would
/// change with the differences.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    pub dry_run: bool,
    #[serde(flatten)]
    pub options: ImportOptions,
    pub summary: ImportSummary,
    /// Whether anything was (or would be) written.
    pub changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toggles: Option<Vec<ToggleChange>>,
}

impl Service {
    /// Imports `document` (JSON, or YAML turned into JSON) with `options`; `dry_run` only
    /// reports.
    pub async fn import_state(
        &self,
        actor: &Actor,
        document: Value,
        options: ImportOptions,
        dry_run: bool,
    ) -> Result<ImportReport, ServiceError> {
        self.state()?;
        self.import_loaded(actor, document, options, dry_run, None)
            .await
    }

    /// Applies the start-up document unless this store has had it (see [`StartupImport`]).
    pub async fn import_at_startup(
        &self,
        import: &StartupImport,
    ) -> Result<ImportReport, ServiceError> {
        let actor = Actor("import".into());
        self.import_loaded(
            &actor,
            import.document.clone(),
            import.options,
            false,
            Some(&import.marker),
        )
        .await
    }

    /// `import_state` without the readiness check, applied at most once per `marker`.
    ///
    /// The import is worked out on a blocking thread against the snapshot (reading, applying
    /// and serialising 10,000 toggles takes a while: not on the runtime, and not while the
    /// replica's other writers wait for their turn to decide); the decision then only checks
    /// that nothing happened since, or works it out again.
    async fn import_loaded(
        &self,
        actor: &Actor,
        document: Value,
        options: ImportOptions,
        dry_run: bool,
        marker: Option<&str>,
    ) -> Result<ImportReport, ServiceError> {
        let read = blocking(move || Ok(read_document(document, Utc::now()))).await?;
        let read = Arc::new(read);
        let report = |summary, changed, toggles| ImportReport {
            dry_run,
            options,
            summary,
            changed,
            toggles,
        };
        if dry_run {
            let state = self.snapshot.state();
            let (summary, changed, toggles) = blocking(move || {
                let (document, errors) = &*read;
                let result = apply_import(&state, document, options, Utc::now(), errors.clone())?;
                let changed = !same_records(&state, &result.state);
                Ok((
                    result.summary.clone(),
                    changed,
                    result.toggle_changes(&state),
                ))
            })
            .await?;
            return Ok(report(summary, changed, Some(toggles)));
        }
        for _ in 0..COMMIT_ATTEMPTS {
            let base = self.snapshot.state();
            let prepared = {
                let (base, read, actor) = (base.clone(), read.clone(), actor.clone());
                let marker = marker.map(str::to_string);
                blocking(move || {
                    let (document, errors) = &*read;
                    prepare(
                        &base,
                        document,
                        options,
                        errors.clone(),
                        &actor,
                        marker.as_deref(),
                    )
                })
                .await?
            };
            let summary = prepared.summary.clone();
            let changed = prepared.changed;
            let plan = Mutex::new(Some(prepared.plan));
            let decided = self
                .write_loaded(|state, now| {
                    // Anything decided or committed since makes the prepared plan stale.
                    let plan = same_base(state, &base)
                        .then(|| plan.lock().ok().and_then(|mut p| p.take()))
                        .flatten();
                    Ok(match plan {
                        Some(plan) => {
                            plan.with_output(Some(report(summary.clone(), changed, None)))
                        }
                        None => Plan::new(now, None),
                    })
                })
                .await?;
            if let Some(report) = decided {
                return Ok(report);
            }
        }
        Err(ServiceError::Contention)
    }
}

/// An import worked out against one state: the plan to commit and its account.
struct PreparedImport {
    plan: Plan<()>,
    summary: ImportSummary,
    changed: bool,
}

/// The counter record counting imports that changed something.
pub(super) const IMPORTS: &str = "state-imports";

/// Works out the import of `document` into `base` (a no-op when `marker` is there already).
fn prepare(
    base: &ConfigState,
    document: &ImportDocument,
    options: ImportOptions,
    errors: ValidationErrors,
    actor: &Actor,
    marker: Option<&str>,
) -> Result<PreparedImport, DomainError> {
    let now = Utc::now();
    if marker.is_some_and(|m| base.counters.contains_key(m)) {
        return Ok(PreparedImport {
            plan: Plan::new(now, ()),
            summary: ImportSummary::default(),
            changed: false,
        });
    }
    let result = apply_import(base, document, options, now, errors)?;
    let mut plan = Plan::new(now, ());
    record_changes(base, &result.state, &mut plan, actor, DEFAULT_ENVIRONMENT)?;
    let changed = !plan.is_empty();
    if changed {
        // An import reads every record it may replace or drop, so its batch must never be
        // committed again undecided on top of another replica's writes: a record outside the
        // toggles keeps `group_commit::rebase` away from it (it only takes toggle-only batches).
        plan.put(Collection::Counters, IMPORTS, &base.next_id(IMPORTS))?;
        plan.event(
            EventKind::StateImported,
            actor,
            json!({"drop": options.drop, "keep": options.keep, "summary": result.summary}),
            vec![],
        );
    }
    if let Some(marker) = marker {
        plan.put(Collection::Counters, marker, &now.timestamp().max(1))?;
    }
    Ok(PreparedImport {
        plan,
        summary: result.summary,
        changed,
    })
}

/// Runs CPU-heavy `work` on a blocking thread.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, DomainError> + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ServiceError::Internal(format!("import task failed: {e}")))?
        .map_err(ServiceError::Domain)
}

/// Whether `state` is exactly `base`: the same position and the same maps (a decision's
/// state also holds what this replica decided but has not committed yet).
pub(super) fn same_base(state: &ConfigState, base: &ConfigState) -> bool {
    state.version == base.version
        && state.head == base.head
        && state.features.ptr_eq(&base.features)
        && state.archive.ptr_eq(&base.archive)
        && state.shares_all_but_toggles(base)
}

/// Whether two configurations hold the same records.
pub(super) fn same_records(a: &ConfigState, b: &ConfigState) -> bool {
    let ConfigState {
        version: _,
        head: _,
        features,
        archive,
        strategies,
        tag_types,
        tags,
        projects,
        context_fields,
        addons,
        api_tokens,
        environments,
        segments,
        counters,
    } = b;
    a.features == *features
        && a.archive == *archive
        && a.strategies == *strategies
        && a.tag_types == *tag_types
        && a.tags == *tags
        && a.projects == *projects
        && a.context_fields == *context_fields
        && a.addons == *addons
        && a.api_tokens == *api_tokens
        && a.environments == *environments
        && a.segments == *segments
        && a.counters == *counters
}

/// What happened to one record.
enum RecordChange<'a, V> {
    Written(&'a V),
    Removed(&'a V),
}

/// Puts into `plan` every record that differs between `before` and `after`, with its event.
pub(super) fn record_changes<T>(
    before: &ConfigState,
    after: &ConfigState,
    plan: &mut Plan<T>,
    actor: &Actor,
    environment: &str,
) -> Result<(), DomainError> {
    use RecordChange::{Removed, Written};
    diff_records(
        &before.features,
        &after.features,
        Collection::Features,
        plan,
        |name, change| {
            match change {
                Written(t) => Some((
                    EventKind::FeatureImport,
                    event_data(&ToggleRecord::new(t, environment)),
                    t.tags.clone(),
                )),
                // Gone from the active toggles: archived by a `drop`.
                Removed(t) => Some((
                    EventKind::FeatureArchived,
                    json!({"name": name}),
                    t.tags.clone(),
                )),
            }
        },
        actor,
    )?;
    // Archive records come and go with the toggles above (archived, revived); one that stays
    // archived changes when a dropped project's toggles move to `default` or dropped tags
    // come off: an update of its own.
    diff_records(
        &before.archive,
        &after.archive,
        Collection::Archive,
        plan,
        |name, change| match change {
            Written(t) if before.archive.contains_key(name) => Some((
                EventKind::FeatureUpdated,
                event_data(&ToggleRecord::new(t, environment)),
                t.tags.clone(),
            )),
            _ => None,
        },
        actor,
    )?;
    diff_records(
        &before.strategies,
        &after.strategies,
        Collection::Strategies,
        plan,
        |name, change| {
            Some(match change {
                Written(s) => (EventKind::StrategyImport, event_data(s), vec![]),
                Removed(_) => (EventKind::StrategyDeleted, json!({"name": name}), vec![]),
            })
        },
        actor,
    )?;
    diff_records(
        &before.projects,
        &after.projects,
        Collection::Projects,
        plan,
        |id, change| {
            Some(match change {
                Written(p) => (EventKind::ProjectImport, project_data(p), vec![]),
                Removed(_) => (EventKind::ProjectDeleted, json!({"id": id}), vec![]),
            })
        },
        actor,
    )?;
    diff_records(
        &before.context_fields,
        &after.context_fields,
        Collection::ContextFields,
        plan,
        |name, change| {
            Some(match change {
                Written(f) => (
                    EventKind::ContextFieldImport,
                    event_data(&ContextFieldView::new(f)),
                    vec![],
                ),
                Removed(_) => (
                    EventKind::ContextFieldDeleted,
                    json!({"name": name}),
                    vec![],
                ),
            })
        },
        actor,
    )?;
    diff_records(
        &before.tag_types,
        &after.tag_types,
        Collection::TagTypes,
        plan,
        |name, change| {
            Some(match change {
                Written(t) => (EventKind::TagTypeImport, event_data(t), vec![]),
                Removed(_) => (EventKind::TagTypeDeleted, json!({"name": name}), vec![]),
            })
        },
        actor,
    )?;
    diff_records(
        &before.tags,
        &after.tags,
        Collection::Tags,
        plan,
        |_, change| {
            Some(match change {
                Written(t) => (
                    EventKind::TagImport,
                    json!({"type": t.kind, "value": t.value}),
                    vec![],
                ),
                Removed(t) => (
                    EventKind::TagDeleted,
                    json!({"type": t.kind, "value": t.value}),
                    vec![],
                ),
            })
        },
        actor,
    )?;
    diff_records(
        &before.segments,
        &after.segments,
        Collection::Segments,
        plan,
        |id, change| {
            Some(match change {
                Written(s) => (EventKind::SegmentImport, event_data(s), vec![]),
                Removed(_) => (
                    EventKind::SegmentImport,
                    json!({"id": id, "deleted": true}),
                    vec![],
                ),
            })
        },
        actor,
    )?;
    diff_records(
        &before.environments,
        &after.environments,
        Collection::Environments,
        plan,
        |name, change| {
            Some(match change {
                Written(e) if before.environments.contains_key(name) => {
                    (EventKind::EnvironmentUpdated, event_data(e), vec![])
                }
                Written(e) => (EventKind::EnvironmentCreated, event_data(e), vec![]),
                Removed(_) => (EventKind::EnvironmentDeleted, json!({"name": name}), vec![]),
            })
        },
        actor,
    )?;
    diff_records(
        &before.api_tokens,
        &after.api_tokens,
        Collection::ApiTokens,
        plan,
        |hash, change| {
            Some(match change {
                Written(t) if before.api_tokens.contains_key(hash) => {
                    (EventKind::ApiTokenUpdated, json!(t.view()), vec![])
                }
                Written(t) => (EventKind::ApiTokenCreated, json!(t.view()), vec![]),
                Removed(t) => (EventKind::ApiTokenDeleted, json!(t.view()), vec![]),
            })
        },
        actor,
    )?;
    diff_records(
        &before.addons,
        &after.addons,
        Collection::Addons,
        plan,
        |id, change| {
            Some(match change {
                Written(a) if before.addons.contains_key(id) => {
                    (EventKind::AddonConfigUpdated, addon_data(a), vec![])
                }
                Written(a) => (EventKind::AddonConfigCreated, addon_data(a), vec![]),
                Removed(a) => (EventKind::AddonConfigDeleted, addon_data(a), vec![]),
            })
        },
        actor,
    )?;
    for item in before.counters.diff(&after.counters) {
        match item {
            DiffItem::Add(name, n) | DiffItem::Update { new: (name, n), .. } => {
                plan.put(Collection::Counters, name, n)?;
            }
            DiffItem::Remove(name, _) => plan.delete(Collection::Counters, name),
        }
    }
    Ok(())
}

/// Puts or deletes, in `collection`, each record of `after` that differs from `before`, with
/// the event `event` gives for it (if any).
fn diff_records<V: Serialize + PartialEq, T>(
    before: &OrdMap<String, Arc<V>>,
    after: &OrdMap<String, Arc<V>>,
    collection: Collection,
    plan: &mut Plan<T>,
    event: impl Fn(&str, RecordChange<'_, V>) -> Option<(EventKind, Value, Vec<TagRef>)>,
    actor: &Actor,
) -> Result<(), DomainError> {
    for item in before.diff(after) {
        let (name, change) = match item {
            DiffItem::Add(name, record)
            | DiffItem::Update {
                new: (name, record),
                ..
            } => {
                plan.put(collection, name, &**record)?;
                (name, RecordChange::Written(&**record))
            }
            DiffItem::Remove(name, record) => {
                plan.delete(collection, name);
                (name, RecordChange::Removed(&**record))
            }
        };
        if let Some((kind, data, tags)) = event(name, change) {
            plan.event(kind, actor, data, tags);
        }
    }
    Ok(())
}
