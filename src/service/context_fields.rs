//! Context-field use-cases. Built-in fields cannot be deleted; a field that active toggles'
//! or segments' constraints use can be neither deleted nor given legal values those
//! constraints break.

use serde_json::json;

use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::constraint::Constraint;
use crate::domain::context_field::{ContextField, ContextFieldSpec};
use crate::domain::event::EventKind;
use crate::domain::name::{check_name, NAME_MAX};
use crate::domain::segment::segments_where;
use crate::domain::views::ContextFieldView;
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

/// How many toggle names a refusal lists before it counts the rest.
const NAMES_SHOWN: usize = 10;

fn existing<'a>(state: &'a ConfigState, name: &str) -> Result<&'a ContextField, DomainError> {
    state
        .context_fields
        .get(name)
        .map(|f| &**f)
        .ok_or_else(|| DomainError::NotFound(format!("Could not find context field \"{name}\"")))
}

/// Refuses a name that is taken.
fn ensure_name_free(state: &ConfigState, name: &str) -> Result<(), DomainError> {
    if state.context_fields.contains_key(name) {
        return Err(DomainError::AlreadyExists(format!(
            "A context field with the name \"{name}\" already exists"
        )));
    }
    Ok(())
}

/// The names of the active toggles with a constraint on `field` for which `breaks` holds.
fn toggles_where(
    state: &ConfigState,
    field: &str,
    breaks: impl Fn(&Constraint) -> bool,
) -> Vec<String> {
    state
        .features
        .values()
        .filter(|t| {
            t.all_strategies()
                .flat_map(|s| &s.constraints)
                .any(|c| c.context_name == field && breaks(c))
        })
        .map(|t| t.name.to_string())
        .collect()
}

/// "a, b and 3 more".
fn listing(names: &[String]) -> String {
    let shown = names[..names.len().min(NAMES_SHOWN)].join(", ");
    match names.len().saturating_sub(NAMES_SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

impl Service {
    /// Checks that `name` could name a new field (the reference's `validate` route).
    pub fn validate_context_field_name(&self, name: &str) -> Result<(), ServiceError> {
        check_name("name", name, 2, NAME_MAX).map_err(|m| ValidationErrors::single("name", m))?;
        ensure_name_free(&*self.state()?, name)?;
        Ok(())
    }

    /// Creates a context field.
    pub async fn create_context_field(
        &self,
        actor: &Actor,
        spec: ContextFieldSpec,
    ) -> Result<ContextField, ServiceError> {
        let valid = spec.validate(None)?;
        self.write(|state, now| {
            ensure_name_free(state, &valid.name)?;
            let field = ContextField::create(valid.clone(), now);
            let mut plan = Plan::new(now, field.clone());
            plan.put(Collection::ContextFields, &field.name, &field)?;
            plan.event(
                EventKind::ContextFieldCreated,
                actor,
                event_data(&ContextFieldView::new(&field)),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Replaces a field's description, legal values, stickiness and sort order.
    pub async fn update_context_field(
        &self,
        actor: &Actor,
        name: &str,
        spec: ContextFieldSpec,
    ) -> Result<ContextField, ServiceError> {
        let valid = spec.validate(Some(name))?;
        self.write(|state, now| {
            let field = existing(state, name)?.replaced_by(valid.clone());
            let broken = toggles_where(state, name, |c| {
                let mut errors = ValidationErrors::default();
                c.check_field(Some(&field), "", &mut errors);
                !errors.0.is_empty()
            });
            if !broken.is_empty() {
                return Err(DomainError::InUse(format!(
                    "The legal values of \"{name}\" would exclude values that constraints of \
                     these toggles use: {}",
                    listing(&broken)
                )));
            }
            let broken = segments_where(state, name, |c| {
                let mut errors = ValidationErrors::default();
                c.check_field(Some(&field), "", &mut errors);
                !errors.0.is_empty()
            });
            if !broken.is_empty() {
                return Err(DomainError::InUse(format!(
                    "The legal values of \"{name}\" would exclude values that constraints of \
                     these segments use: {}",
                    listing(&broken)
                )));
            }
            let mut plan = Plan::new(now, field.clone());
            plan.put(Collection::ContextFields, name, &field)?;
            plan.event(
                EventKind::ContextFieldUpdated,
                actor,
                event_data(&ContextFieldView::new(&field)),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Deletes a field that is neither built in nor used by an active toggle's constraints.
    pub async fn delete_context_field(
        &self,
        actor: &Actor,
        name: &str,
    ) -> Result<(), ServiceError> {
        self.write(|state, now| {
            if existing(state, name)?.built_in {
                return Err(DomainError::InUse(format!(
                    "\"{name}\" is a built-in context field and cannot be deleted"
                )));
            }
            let users = toggles_where(state, name, |_| true);
            if !users.is_empty() {
                return Err(DomainError::InUse(format!(
                    "Context field \"{name}\" is used by constraints of {} toggle{}: {}",
                    users.len(),
                    if users.len() == 1 { "" } else { "s" },
                    listing(&users)
                )));
            }
            let segments = segments_where(state, name, |_| true);
            if !segments.is_empty() {
                return Err(DomainError::InUse(format!(
                    "Context field \"{name}\" is used by constraints of {} segment{}: {}",
                    segments.len(),
                    if segments.len() == 1 { "" } else { "s" },
                    listing(&segments)
                )));
            }
            let mut plan = Plan::new(now, ());
            plan.delete(Collection::ContextFields, name);
            plan.event(
                EventKind::ContextFieldDeleted,
                actor,
                json!({"name": name}),
                vec![],
            );
            Ok(plan)
        })
        .await
    }
}
