//! First start: the built-in strategies and the `simple` tag type, written once per store
//! (again after the store lost everything), marked by the `seeded` counter.

use serde_json::json;

use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::event::EventKind;
use crate::domain::state::ConfigState;
use crate::domain::strategy::built_in_strategies;
use crate::domain::tag::simple_tag_type;
use crate::store::Collection;

/// The counter record marking a seeded store.
const SEEDED: &str = "seeded";

/// Whether the built-ins were written to the store `state` came from.
pub fn is_seeded(state: &ConfigState) -> bool {
    state.counters.contains_key(SEEDED)
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
            plan.put(Collection::Counters, SEEDED, &1)?;
            // Only what is missing: a store seeded before the marker existed keeps its
            // deprecations, and a deliberately deleted `simple` stays deleted while other tag
            // types exist.
            for strategy in built_in_strategies() {
                if !state.strategies.contains_key(&strategy.name) {
                    plan.put(Collection::Strategies, &strategy.name, &strategy)?;
                    plan.event(EventKind::StrategyCreated, &actor, event_data(&strategy), vec![]);
                }
            }
            if state.tag_types.is_empty() {
                let simple = simple_tag_type();
                plan.put(Collection::TagTypes, &simple.name, &simple)?;
                plan.event(
                    EventKind::TagTypeCreated,
                    &actor,
                    json!({"name": simple.name, "description": simple.description, "icon": simple.icon}),
                    vec![],
                );
            }
            Ok(plan)
        })
        .await
}
