//! Project use-cases. `default` always exists; a project with active toggles cannot be
//! deleted, and the archived toggles of a deleted project move to `default`.

use serde_json::json;

use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::event::EventKind;
use crate::domain::name::{check_name, NAME_MAX};
use crate::domain::project::DEFAULT_PROJECT;
use crate::domain::project::{Project, ProjectSpec};
use crate::domain::toggle::Toggle;
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

fn existing<'a>(state: &'a ConfigState, id: &str) -> Result<&'a Project, DomainError> {
    state
        .projects
        .get(id)
        .map(|p| &**p)
        .ok_or_else(|| DomainError::NotFound(format!("Could not find project \"{id}\"")))
}

/// Refuses an id that is taken.
pub fn ensure_project_id_free(state: &ConfigState, id: &str) -> Result<(), DomainError> {
    if state.projects.contains_key(id) {
        return Err(DomainError::AlreadyExists(format!(
            "A project with the id \"{id}\" already exists"
        )));
    }
    Ok(())
}

/// The event data of project events (API-FACTS §3.2).
pub(super) fn project_data(project: &Project) -> serde_json::Value {
    json!({"id": project.id, "name": project.name, "description": project.description})
}

impl Service {
    /// Checks that `id` could name a new project (the reference's `validate` route).
    pub fn validate_project_id(&self, id: &str) -> Result<(), ServiceError> {
        check_name("id", id, 2, NAME_MAX).map_err(|m| ValidationErrors::single("id", m))?;
        ensure_project_id_free(&*self.state()?, id)?;
        Ok(())
    }

    /// Creates a project.
    pub async fn create_project(
        &self,
        actor: &Actor,
        spec: ProjectSpec,
    ) -> Result<Project, ServiceError> {
        let valid = spec.validate(None)?;
        self.write(|state, now| {
            ensure_project_id_free(state, &valid.id)?;
            let project = Project::create(valid.clone(), now);
            let mut plan = Plan::new(now, project.clone());
            plan.put(Collection::Projects, &project.id, &project)?;
            plan.event(
                EventKind::ProjectCreated,
                actor,
                project_data(&project),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Replaces a project's name and description.
    pub async fn update_project(
        &self,
        actor: &Actor,
        id: &str,
        spec: ProjectSpec,
    ) -> Result<Project, ServiceError> {
        let valid = spec.validate(Some(id))?;
        self.write(|state, now| {
            let project = existing(state, id)?.replaced_by(valid.clone());
            let mut plan = Plan::new(now, project.clone());
            plan.put(Collection::Projects, id, &project)?;
            plan.event(
                EventKind::ProjectUpdated,
                actor,
                project_data(&project),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Deletes a project without active toggles; its archived toggles move to `default`.
    pub async fn delete_project(&self, actor: &Actor, id: &str) -> Result<(), ServiceError> {
        self.write(|state, now| {
            existing(state, id)?;
            if id == DEFAULT_PROJECT {
                return Err(DomainError::InUse(
                    "The default project cannot be deleted".into(),
                ));
            }
            let active = state.features.values().filter(|t| t.project == id).count();
            if active > 0 {
                return Err(DomainError::InUse(format!(
                    "Project \"{id}\" still has {active} active toggle{}; archive them or move \
                     them to another project first",
                    if active == 1 { "" } else { "s" }
                )));
            }
            let mut plan = Plan::new(now, ());
            let moved = move_archived_to_default(state, id, &mut plan, actor)?;
            plan.delete(Collection::Projects, id);
            plan.event(
                EventKind::ProjectDeleted,
                actor,
                json!({"id": id, "archivedTogglesMovedToDefault": moved}),
                vec![],
            );
            Ok(plan)
        })
        .await
    }
}

/// Moves the archived toggles of project `id` to `default`, so that they can still be
/// revived, each with a `feature-updated` event (its history shows the move); returns their
/// names.
fn move_archived_to_default(
    state: &ConfigState,
    id: &str,
    plan: &mut Plan<()>,
    actor: &Actor,
) -> Result<Vec<String>, DomainError> {
    let mut moved = Vec::new();
    for toggle in state.archive.values().filter(|t| t.project == id) {
        let toggle = Toggle {
            project: DEFAULT_PROJECT.into(),
            ..(**toggle).clone()
        };
        plan.put(Collection::Archive, &toggle.name, &toggle)?;
        plan.event(
            EventKind::FeatureUpdated,
            actor,
            event_data(&toggle),
            toggle.tags.clone(),
        );
        moved.push(toggle.name.into());
    }
    Ok(moved)
}
