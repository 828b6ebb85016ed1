//! The environment registry (MODERN-MODEL §5): create, update, switch on and off, sort, and
//! delete an environment nothing uses. Unlike Unleash OSS, the number of environments is not
//! capped.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::environment::{Environment, EnvironmentSpec};
use crate::domain::event::EventKind;
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

/// The environment named `name`, or a 404.
pub fn existing_environment<'a>(
    state: &'a ConfigState,
    name: &str,
) -> Result<&'a Environment, DomainError> {
    state
        .environments
        .get(name)
        .map(|e| &**e)
        .ok_or_else(|| DomainError::NotFound(format!("Could not find environment \"{name}\"")))
}

impl Service {
    /// Creates an environment (Unleash enterprise's `POST /api/admin/environments`).
    pub async fn create_environment(
        &self,
        actor: &Actor,
        spec: EnvironmentSpec,
    ) -> Result<Environment, ServiceError> {
        self.write(|state, now| {
            let environment = spec.clone().validate(None, None, now)?;
            if state.environments.contains_key(&environment.name) {
                return Err(DomainError::AlreadyExists(format!(
                    "An environment with the name \"{}\" already exists",
                    environment.name
                )));
            }
            let mut plan = Plan::new(now, environment.clone());
            plan.put(Collection::Environments, &environment.name, &environment)?;
            plan.event(
                EventKind::EnvironmentCreated,
                actor,
                event_data(&environment),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Updates an environment's type, and its enabled state and sort order when sent.
    pub async fn update_environment(
        &self,
        actor: &Actor,
        name: &str,
        spec: EnvironmentSpec,
    ) -> Result<Environment, ServiceError> {
        self.write(|state, now| {
            let current = existing_environment(state, name)?;
            let environment = spec.clone().validate(Some(name), Some(current), now)?;
            self.environment_changed(actor, current, environment, now)
        })
        .await
    }

    /// Switches an environment on or off (the toggles' configuration in it stays).
    pub async fn set_environment_enabled(
        &self,
        actor: &Actor,
        name: &str,
        enabled: bool,
    ) -> Result<Environment, ServiceError> {
        self.write(|state, now| {
            let current = existing_environment(state, name)?;
            let environment = Environment {
                enabled,
                ..current.clone()
            };
            self.environment_changed(actor, current, environment, now)
        })
        .await
    }

    /// The plan of replacing `current` by `next`: nothing when they are equal.
    fn environment_changed(
        &self,
        actor: &Actor,
        current: &Environment,
        next: Environment,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Plan<Environment>, DomainError> {
        let mut plan = Plan::new(now, next.clone());
        if *current != next {
            plan.put(Collection::Environments, &next.name, &next)?;
            plan.event(
                EventKind::EnvironmentUpdated,
                actor,
                json!({"name": next.name, "data": next, "preData": current}),
                vec![],
            );
        }
        Ok(plan)
    }

    /// Sets the sort order of the environments named in `orders` (`{name: order}`); the
    /// others keep theirs. Every name must exist and every order be a whole number.
    pub async fn set_environment_sort_order(
        &self,
        actor: &Actor,
        orders: BTreeMap<String, Value>,
    ) -> Result<(), ServiceError> {
        let mut errors = ValidationErrors::default();
        let mut wanted = Vec::with_capacity(orders.len());
        for (name, value) in orders {
            match value.as_i64() {
                Some(order) => wanted.push((name, order)),
                None => errors.push(
                    name.clone(),
                    format!("the sort order of \"{name}\" must be a whole number"),
                ),
            }
        }
        errors.into_result(())?;
        self.write(|state, now| {
            let mut plan = Plan::new(now, ());
            for (name, order) in &wanted {
                let current = existing_environment(state, name)?;
                if current.sort_order != *order {
                    let next = Environment {
                        sort_order: *order,
                        ..current.clone()
                    };
                    plan.put(Collection::Environments, name, &next)?;
                    plan.event(
                        EventKind::EnvironmentUpdated,
                        actor,
                        json!({"name": name, "data": next, "preData": current}),
                        vec![],
                    );
                }
            }
            Ok(plan)
        })
        .await
    }

    /// Deletes an environment that is not protected and that no toggle (active or archived)
    /// has configuration in.
    pub async fn delete_environment(&self, actor: &Actor, name: &str) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let current = existing_environment(state, name)?;
            if current.protected {
                return Err(DomainError::InUse(format!(
                    "The environment \"{name}\" is protected and cannot be deleted"
                )));
            }
            let users: Vec<&str> = state
                .features
                .values()
                .chain(state.archive.values())
                .filter(|t| t.environments.contains_key(name))
                .map(|t| t.name.as_str())
                .collect();
            if !users.is_empty() {
                let shown: Vec<&str> = users.iter().take(5).copied().collect();
                return Err(DomainError::InUse(format!(
                    "The environment \"{name}\" is used by {} toggle{} ({}{}); remove their \
                     configuration in it first",
                    users.len(),
                    if users.len() == 1 { "" } else { "s" },
                    shown.join(", "),
                    if users.len() > shown.len() {
                        ", …"
                    } else {
                        ""
                    },
                )));
            }
            let tokens = state
                .api_tokens
                .values()
                .filter(|t| t.environment == name)
                .count();
            if tokens > 0 {
                return Err(DomainError::InUse(format!(
                    "The environment \"{name}\" is used by {tokens} API token{}; delete {} first",
                    if tokens == 1 { "" } else { "s" },
                    if tokens == 1 { "it" } else { "them" },
                )));
            }
            let mut plan = Plan::new(now, ());
            plan.delete(Collection::Environments, name);
            plan.event(
                EventKind::EnvironmentDeleted,
                actor,
                json!({"name": name}),
                vec![],
            );
            Ok(plan)
        })
        .await
    }
}
