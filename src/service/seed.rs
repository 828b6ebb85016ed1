//! First start: the built-ins, written once per store (again after the store lost
//! everything), marked by the `seeded` counter, whose value is the generation written:
//! 1. the built-in strategies and the `simple` tag type;
//! 2. the `default` project and the built-in context fields, plus a project for every project
//!    id and a context field for every constrained field that toggles written before those
//!    were checked name (so that such toggles stay valid to edit);
//! 3. the environments `default`, `development` and `production`, and an id for every
//!    strategy of toggles written before environments (whose records are read as `default`'s
//!    configuration; rewriting them here gives the per-environment routes ids to address).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::projects::project_data;
use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::context_field::{built_in_context_fields, ContextField};
use crate::domain::environment::seeded_environments;
use crate::domain::event::EventKind;
use crate::domain::feature_strategy::new_strategy_id;
use crate::domain::project::{default_project, Project};
use crate::domain::strategy::built_in_strategies;
use crate::domain::tag::simple_tag_type;
use crate::domain::views::ContextFieldView;
use crate::store::Collection;

/// The counter record marking a seeded store.
const SEEDED: &str = "seeded";
/// The generation this version writes.
const GENERATION: u64 = 3;

/// Whether the built-ins of this version were written to the store `state` came from.
pub fn is_seeded(state: &ConfigState) -> bool {
    state
        .counters
        .get(SEEDED)
        .is_some_and(|generation| *generation >= GENERATION)
}

pub(super) async fn seed_if_needed(service: &Service) -> Result<(), ServiceError> {
    if is_seeded(&service.snapshot.state()) {
        return Ok(());
    }
    let actor = Actor("migration".into());
    service
        .write_loaded(|state, now| {
            let mut plan = Plan::new(now, ());
            // Another replica may have seeded between our load and this decision.
            if is_seeded(state) {
                return Ok(plan);
            }
            plan.put(Collection::Counters, SEEDED, &GENERATION)?;
            if !state.counters.contains_key(SEEDED) {
                seed_strategies_and_tag_types(state, &mut plan, &actor)?;
            }
            let generation = state.counters.get(SEEDED).copied().unwrap_or(0);
            if generation < 2 {
                seed_projects(state, &mut plan, &actor, now)?;
                seed_context_fields(state, &mut plan, &actor, now)?;
            }
            seed_environments(state, &mut plan, now)?;
            Ok(plan)
        })
        .await
}

/// Generation 1. Only what is missing: a store seeded before the marker existed keeps its
/// deprecations, and a deliberately deleted `simple` stays deleted while other tag types
/// exist.
fn seed_strategies_and_tag_types(
    state: &ConfigState,
    plan: &mut Plan<()>,
    actor: &Actor,
) -> Result<(), crate::domain::DomainError> {
    for strategy in built_in_strategies() {
        if !state.strategies.contains_key(&strategy.name) {
            plan.put(Collection::Strategies, &strategy.name, &strategy)?;
            plan.event(
                EventKind::StrategyCreated,
                actor,
                event_data(&strategy),
                vec![],
            );
        }
    }
    if state.tag_types.is_empty() {
        let simple = simple_tag_type();
        plan.put(Collection::TagTypes, &simple.name, &simple)?;
        plan.event(
            EventKind::TagTypeCreated,
            actor,
            json!({"name": simple.name, "description": simple.description, "icon": simple.icon}),
            vec![],
        );
    }
    Ok(())
}

/// Generation 2: `default` and every project a toggle names.
fn seed_projects(
    state: &ConfigState,
    plan: &mut Plan<()>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Result<(), crate::domain::DomainError> {
    let named: BTreeSet<&str> = state
        .features
        .values()
        .chain(state.archive.values())
        .map(|t| t.project.as_str())
        .collect();
    let default = default_project(now);
    let missing = std::iter::once(default.clone()).chain(
        named
            .into_iter()
            .filter(|id| *id != default.id)
            .map(|id| Project::adopted(id, now)),
    );
    for project in missing.filter(|p| !state.projects.contains_key(&p.id)) {
        plan.put(Collection::Projects, &project.id, &project)?;
        plan.event(
            EventKind::ProjectCreated,
            actor,
            project_data(&project),
            vec![],
        );
    }
    Ok(())
}

/// Generation 2: the built-in context fields and every field a constraint names.
fn seed_context_fields(
    state: &ConfigState,
    plan: &mut Plan<()>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Result<(), crate::domain::DomainError> {
    let built_in = built_in_context_fields(now);
    let named: BTreeSet<&str> = state
        .features
        .values()
        .chain(state.archive.values())
        .flat_map(|t| t.all_strategies())
        .flat_map(|s| &s.constraints)
        .map(|c| c.context_name.as_str())
        .filter(|name| built_in.iter().all(|f| f.name != *name))
        .collect();
    let fields = built_in
        .iter()
        .cloned()
        .chain(named.into_iter().map(|name| ContextField::new(name, now)));
    for field in fields.filter(|f| !state.context_fields.contains_key(&f.name)) {
        plan.put(Collection::ContextFields, &field.name, &field)?;
        plan.event(
            EventKind::ContextFieldCreated,
            actor,
            event_data(&ContextFieldView::new(&field)),
            vec![],
        );
    }
    Ok(())
}

/// Generation 3: the seeded environments, and ids for strategies stored without one.
fn seed_environments(
    state: &ConfigState,
    plan: &mut Plan<()>,
    now: DateTime<Utc>,
) -> Result<(), crate::domain::DomainError> {
    for environment in seeded_environments(now) {
        if !state.environments.contains_key(&environment.name) {
            plan.put(Collection::Environments, &environment.name, &environment)?;
        }
    }
    for (collection, toggles) in [
        (Collection::Features, &state.features),
        (Collection::Archive, &state.archive),
    ] {
        for toggle in toggles.values() {
            if toggle.all_strategies().all(|s| !s.id.is_empty()) {
                continue;
            }
            let mut upgraded = (**toggle).clone();
            for (_, environment) in upgraded.environments.iter_mut() {
                for strategy in environment
                    .strategies
                    .iter_mut()
                    .filter(|s| s.id.is_empty())
                {
                    strategy.id = new_strategy_id();
                }
            }
            plan.put(collection, &upgraded.name, &upgraded)?;
        }
    }
    Ok(())
}
