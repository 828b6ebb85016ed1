//! Dependency use-cases (Unleash 7's `/api/admin/projects/:p/features/:child/dependencies`):
//! set a toggle's parent (replacing the one it had), remove one or all, and the read-outs the
//! admin UI offers (possible parents, a parent's variant names, whether any exist). The rules
//! are `domain::dependency`'s; imports are not subject to them.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::dependency::{
    check_dependency, parent_variant_names, possible_parents, Dependency, DependencySpec,
};
use crate::domain::event::EventKind;
use crate::domain::project::DEFAULT_PROJECT;
use crate::domain::toggle::Toggle;
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

/// The project a path names must exist (`default` always does).
fn ensure_project(state: &ConfigState, project: &str) -> Result<(), DomainError> {
    if project == DEFAULT_PROJECT || state.projects.contains_key(project) {
        Ok(())
    } else {
        Err(DomainError::NotFound(format!(
            "Could not find project \"{project}\""
        )))
    }
}

/// The active toggle `name` of `project` (404 for an unknown project, an unknown or archived
/// toggle, or a toggle of another project).
fn toggle_in<'a>(
    state: &'a ConfigState,
    project: &str,
    name: &str,
) -> Result<&'a Arc<Toggle>, DomainError> {
    ensure_project(state, project)?;
    state
        .features
        .get(name)
        .filter(|t| t.project == project)
        .ok_or_else(|| {
            DomainError::NotFound(format!(
                "Could not find feature toggle \"{name}\" in project \"{project}\""
            ))
        })
}

/// The data of a dependency event: the child and its project, then `extra`'s fields.
fn event_data(child: &Toggle, extra: Value) -> Value {
    let mut data = json!({"featureName": child.name, "project": child.project});
    if let (Some(data), Value::Object(extra)) = (data.as_object_mut(), extra) {
        data.extend(extra);
    }
    data
}

impl Service {
    /// Sets `child`'s parent (`POST …/features/:child/dependencies`): it replaces the parent
    /// the child had; `enabled: false` keeps no variants (Unleash 7 ignores them). The same
    /// dependency again changes nothing.
    pub async fn add_dependency(
        &self,
        actor: &Actor,
        project: &str,
        child: &str,
        mut spec: DependencySpec,
    ) -> Result<(), ServiceError> {
        if spec.enabled == Some(false) {
            spec.variants = None;
        }
        let mut errors = ValidationErrors::default();
        let Some(dependency) = spec.validate("", &mut errors) else {
            return Err(DomainError::Invalid(errors).into());
        };
        // Reads the parent and the children: no `reads_only_its_toggles`.
        self.write(|state, now| {
            let current = toggle_in(state, project, child)?;
            check_dependency(state, child, project, &dependency)?;
            let mut plan = Plan::new(now, ());
            if current.dependencies == [dependency.clone()] {
                return Ok(plan);
            }
            let toggle = Toggle {
                dependencies: vec![dependency.clone()],
                ..(**current).clone()
            };
            plan.put(Collection::Features, child, &toggle)?;
            plan.event(
                EventKind::FeatureDependencyAdded,
                actor,
                event_data(&toggle, super::event_data(&dependency)),
                toggle.tags.clone(),
            );
            Ok(plan)
        })
        .await
    }

    /// Removes `parent` from `child`'s dependencies (`DELETE …/dependencies/:parent`); a
    /// no-op when it is not one.
    pub async fn remove_dependency(
        &self,
        actor: &Actor,
        project: &str,
        child: &str,
        parent: &str,
    ) -> Result<(), ServiceError> {
        self.remove_dependencies_where(actor, project, child, Some(parent))
            .await
    }

    /// Removes all of `child`'s dependencies (`DELETE …/dependencies`); a no-op when it has
    /// none.
    pub async fn remove_all_dependencies(
        &self,
        actor: &Actor,
        project: &str,
        child: &str,
    ) -> Result<(), ServiceError> {
        self.remove_dependencies_where(actor, project, child, None)
            .await
    }

    /// Removes the dependency on `parent`, or every one (`None`). Removing reads only the
    /// child: nothing else can make it wrong.
    async fn remove_dependencies_where(
        &self,
        actor: &Actor,
        project: &str,
        child: &str,
        parent: Option<&str>,
    ) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let current = toggle_in(state, project, child)?;
            let kept: Vec<Dependency> = match parent {
                Some(parent) => current
                    .dependencies
                    .iter()
                    .filter(|d| d.feature != parent)
                    .cloned()
                    .collect(),
                None => Vec::new(),
            };
            let mut plan = Plan::new(now, ());
            plan.reads_only_its_toggles();
            if kept.len() == current.dependencies.len() {
                return Ok(plan);
            }
            let toggle = Toggle {
                dependencies: kept,
                ..(**current).clone()
            };
            plan.put(Collection::Features, child, &toggle)?;
            let (kind, extra) = match parent {
                Some(parent) => (
                    EventKind::FeatureDependencyRemoved,
                    json!({"feature": parent}),
                ),
                None => (EventKind::FeatureDependenciesRemoved, json!({})),
            };
            plan.event(kind, actor, event_data(&toggle, extra), toggle.tags.clone());
            Ok(plan)
        })
        .await
    }

    /// The toggles `child` could depend on (`GET …/features/:child/parents`).
    pub fn possible_parents(
        &self,
        project: &str,
        child: &str,
    ) -> Result<Vec<String>, ServiceError> {
        let state = self.state()?;
        let child = toggle_in(&state, project, child)?;
        Ok(possible_parents(&state, child))
    }

    /// The variant names a dependency on `parent` may name (`GET …/:parent/parent-variants`).
    pub fn parent_variants(
        &self,
        project: &str,
        parent: &str,
    ) -> Result<Vec<String>, ServiceError> {
        let state = self.state()?;
        Ok(parent_variant_names(toggle_in(&state, project, parent)?))
    }

    /// Whether any toggle, active or archived, has a dependency (`GET …/:p/dependencies`):
    /// instance-wide, as in Unleash 7, though the project must exist.
    pub fn dependencies_exist(&self, project: &str) -> Result<bool, ServiceError> {
        let state = self.state()?;
        ensure_project(&state, project)?;
        Ok(state
            .features
            .values()
            .chain(state.archive.values())
            .any(|t| !t.dependencies.is_empty()))
    }
}
