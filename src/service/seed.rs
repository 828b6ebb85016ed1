//! First start: the built-in strategies and the `simple` tag type, written once per store.

use serde_json::json;

use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::event::EventKind;
use crate::domain::strategy::built_in_strategies;
use crate::domain::tag::simple_tag_type;
use crate::store::Collection;

pub(super) async fn seed_if_empty(service: &Service) -> Result<(), ServiceError> {
    if service.snapshot.state().version > 0 {
        return Ok(());
    }
    let actor = Actor("migration".into());
    service
        .write_loaded(|state, now| {
            let mut plan = Plan::new(now, ());
            // Another replica may have seeded between our load and this decision.
            if state.version > 0 {
                return Ok(plan);
            }
            for strategy in built_in_strategies() {
                plan.put(Collection::Strategies, &strategy.name, &strategy)?;
                plan.event(EventKind::StrategyCreated, &actor, event_data(&strategy), vec![]);
            }
            let simple = simple_tag_type();
            plan.put(Collection::TagTypes, &simple.name, &simple)?;
            plan.event(
                EventKind::TagTypeCreated,
                &actor,
                json!({"name": simple.name, "description": simple.description, "icon": simple.icon}),
                vec![],
            );
            Ok(plan)
        })
        .await
}
