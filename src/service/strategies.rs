//! Strategy-definition use-cases. Built-in definitions can be deprecated (all but `default`)
//! but never edited or deleted; a definition active toggles use cannot be deleted.

use serde_json::json;

use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::event::EventKind;
use crate::domain::strategy::{StrategyDefinition, StrategyDefinitionSpec};
use crate::domain::DomainError;
use crate::store::Collection;

fn existing<'a>(state: &'a ConfigState, name: &str) -> Result<&'a StrategyDefinition, DomainError> {
    state
        .strategies
        .get(name)
        .map(|s| &**s)
        .ok_or_else(|| DomainError::NotFound(format!("Could not find strategy \"{name}\"")))
}

fn editable<'a>(state: &'a ConfigState, name: &str) -> Result<&'a StrategyDefinition, DomainError> {
    let strategy = existing(state, name)?;
    if strategy.built_in {
        return Err(DomainError::Forbidden(format!(
            "The built-in strategy \"{name}\" cannot be changed or deleted"
        )));
    }
    Ok(strategy)
}

impl Service {
    /// Adds a strategy definition.
    pub async fn create_strategy(
        &self,
        actor: &Actor,
        spec: StrategyDefinitionSpec,
    ) -> Result<StrategyDefinition, ServiceError> {
        let strategy = spec.validate(None)?;
        self.write(|state, now| {
            if state.strategies.contains_key(&strategy.name) {
                return Err(DomainError::AlreadyExists(format!(
                    "Strategy with name {} already exist!",
                    strategy.name
                )));
            }
            let mut plan = Plan::new(now, strategy.clone());
            plan.put(Collection::Strategies, &strategy.name, &strategy)?;
            plan.event(
                EventKind::StrategyCreated,
                actor,
                event_data(&strategy),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Replaces a definition's description and parameters; keeps its deprecation.
    pub async fn update_strategy(
        &self,
        actor: &Actor,
        name: &str,
        spec: StrategyDefinitionSpec,
    ) -> Result<StrategyDefinition, ServiceError> {
        let valid = spec.validate(Some(name))?;
        self.write(|state, now| {
            let current = editable(state, name)?;
            let strategy = StrategyDefinition {
                deprecated: current.deprecated,
                ..valid.clone()
            };
            let mut plan = Plan::new(now, strategy.clone());
            plan.put(Collection::Strategies, name, &strategy)?;
            plan.event(
                EventKind::StrategyUpdated,
                actor,
                event_data(&strategy),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Deletes a definition.
    pub async fn delete_strategy(&self, actor: &Actor, name: &str) -> Result<(), ServiceError> {
        self.write(|state, now| {
            editable(state, name)?;
            // A definition active toggles use stays: exports of the store must import whole.
            let users: Vec<&str> = state
                .features
                .values()
                .filter(|t| t.all_strategies().any(|s| s.name == name))
                .map(|t| t.name.as_str())
                .collect();
            if !users.is_empty() {
                let shown = users
                    .iter()
                    .take(10)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ");
                let more = users.len().saturating_sub(10);
                return Err(DomainError::InUse(format!(
                    "Strategy \"{name}\" is used by {} active toggle{}: {shown}{}",
                    users.len(),
                    if users.len() == 1 { "" } else { "s" },
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )));
            }
            let mut plan = Plan::new(now, ());
            plan.delete(Collection::Strategies, name);
            plan.event(
                EventKind::StrategyDeleted,
                actor,
                json!({"name": name}),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Marks a definition deprecated (or active again); a no-op when it already is.
    pub async fn set_strategy_deprecated(
        &self,
        actor: &Actor,
        name: &str,
        deprecated: bool,
    ) -> Result<StrategyDefinition, ServiceError> {
        self.write(|state, now| {
            let current = existing(state, name)?;
            if deprecated && name == "default" {
                return Err(DomainError::Forbidden(
                    "The \"default\" strategy cannot be deprecated".into(),
                ));
            }
            let mut plan = Plan::new(now, current.clone());
            if current.deprecated != deprecated {
                let strategy = StrategyDefinition {
                    deprecated,
                    ..current.clone()
                };
                let kind = if deprecated {
                    EventKind::StrategyDeprecated
                } else {
                    EventKind::StrategyReactivated
                };
                plan.put(Collection::Strategies, name, &strategy)?;
                plan.event(kind, actor, json!({"name": name}), vec![]);
                plan.output = strategy;
            }
            Ok(plan)
        })
        .await
    }
}
