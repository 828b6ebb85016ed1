//! Addon-configuration use-cases. A configuration is part of the snapshot, so a change takes
//! effect on every replica with the version that carries it. Creating a slack addon creates
//! its `slack` tag type when missing (API-FACTS §8.1).

use serde_json::json;

use super::tags::tag_type_data;
use super::{Actor, Plan, Service, ServiceError};
use crate::domain::addon::{slack_tag_type, AddonConfig, AddonSpec};
use crate::domain::config_state::ConfigState;
use crate::domain::event::EventKind;
use crate::domain::import::ADDON_IDS;
use crate::domain::DomainError;
use crate::store::Collection;

fn existing<'a>(state: &'a ConfigState, id: &str) -> Result<&'a AddonConfig, DomainError> {
    state
        .addons
        .get(id)
        .map(|a| &**a)
        .ok_or_else(|| DomainError::NotFound(format!("Could not find addon {id}")))
}

/// Event data without the parameters (they hold secrets).
pub(super) fn addon_data(addon: &AddonConfig) -> serde_json::Value {
    json!({"id": addon.id, "provider": addon.provider, "enabled": addon.enabled,
           "description": addon.description, "events": addon.events})
}

impl Service {
    /// Creates an addon configuration.
    pub async fn create_addon(
        &self,
        actor: &Actor,
        spec: AddonSpec,
    ) -> Result<AddonConfig, ServiceError> {
        let valid = spec.validate(None)?;
        self.write(|state, now| {
            let id = state.next_id(ADDON_IDS);
            let addon = AddonConfig::create(id, valid.clone(), now);
            let mut plan = Plan::new(now, addon.clone());
            plan.put(Collection::Counters, ADDON_IDS, &id)?;
            plan.put(Collection::Addons, &id.to_string(), &addon)?;
            if addon.provider == "slack" {
                let slack = slack_tag_type();
                if !state.tag_types.contains_key(&slack.name) {
                    plan.put(Collection::TagTypes, &slack.name, &slack)?;
                    plan.event(
                        EventKind::TagTypeCreated,
                        actor,
                        tag_type_data(&slack),
                        vec![],
                    );
                }
            }
            plan.event(
                EventKind::AddonConfigCreated,
                actor,
                addon_data(&addon),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Replaces an addon configuration (its provider stays).
    pub async fn update_addon(
        &self,
        actor: &Actor,
        id: &str,
        spec: AddonSpec,
    ) -> Result<AddonConfig, ServiceError> {
        self.write(|state, now| {
            let current = existing(state, id)?;
            let addon = current.replaced_by(spec.clone().validate(Some(current))?);
            let mut plan = Plan::new(now, addon.clone());
            plan.put(Collection::Addons, id, &addon)?;
            plan.event(
                EventKind::AddonConfigUpdated,
                actor,
                addon_data(&addon),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Deletes an addon configuration.
    pub async fn delete_addon(&self, actor: &Actor, id: &str) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let addon = existing(state, id)?;
            let mut plan = Plan::new(now, ());
            plan.delete(Collection::Addons, id);
            plan.event(
                EventKind::AddonConfigDeleted,
                actor,
                json!({"id": addon.id}),
                vec![],
            );
            Ok(plan)
        })
        .await?;
        // Its log and dead letters can no longer be reached; a failure only leaves them.
        if let Ok(number) = id.parse::<u64>() {
            if let Err(e) = self.store.deliveries().forget(number).await {
                tracing::warn!(addon = id, error = %e, "the deleted addon's deliveries stay");
            }
        }
        Ok(())
    }
}
