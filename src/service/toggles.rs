//! Toggle use-cases: create, replace, switch, mark stale, set the toggle variants, archive,
//! revive, tag and untag.
//! Most read, of the toggle records, only those of the toggle they write, and declare it
//! (`Plan::reads_only_its_toggles`), so that their write need not be decided again when other
//! replicas write other toggles meanwhile. The exceptions read other toggles for the
//! dependency rules: a write setting a parent or moving a toggle with children to another
//! project, and archiving (a toggle with children stays).

use std::sync::Arc;

use serde_json::json;

use super::tags::{ensure_tag_type, put_new_tag};
use super::{toggle_event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::dependency::{
    check_written_dependencies, children_of, needs_dependency_check, HAS_CHILDREN,
};
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::event::EventKind;
use crate::domain::segment::check_strategy_segments;
use crate::domain::tag::{Tag, TagRef, TagSpec};
use crate::domain::toggle::{validate_toggle_name, Toggle, ToggleSpec, ValidToggle};
use crate::domain::variant::{validate_variants, VariantSpec};
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

fn active<'a>(state: &'a ConfigState, name: &str) -> Result<&'a Arc<Toggle>, DomainError> {
    state
        .features
        .get(name)
        .ok_or_else(|| DomainError::NotFound(format!("Could not find feature toggle \"{name}\"")))
}

/// Rejects a name held by an active or archived toggle (spec §1: names are never reused).
pub fn ensure_name_free(state: &ConfigState, name: &str) -> Result<(), DomainError> {
    if state.features.contains_key(name) {
        return Err(DomainError::ToggleNameTaken(format!(
            "A toggle with the name \"{name}\" already exists"
        )));
    }
    if state.archive.contains_key(name) {
        return Err(DomainError::ToggleNameTaken(format!(
            "An archived toggle with the name \"{name}\" already exists; revive it instead"
        )));
    }
    Ok(())
}

impl Service {
    /// The document checked on its own; its references (project, context fields) are checked
    /// in the write, against the state it is decided on, so that a project another replica
    /// just created is never refused from an older snapshot. A document refused anyway lists
    /// the reference problems this replica sees, too, so that one 400 names everything.
    fn validated(&self, spec: ToggleSpec) -> Result<ValidToggle, ServiceError> {
        match spec.clone().validate(None) {
            Ok(valid) => Ok(valid),
            Err(own) => Err(spec
                .validate(Some(&*self.state()?))
                .err()
                .unwrap_or(own)
                .into()),
        }
    }

    /// Checks that `name` could be used for a new toggle.
    pub fn validate_toggle_name(&self, name: &str) -> Result<(), ServiceError> {
        validate_toggle_name(name)?;
        ensure_name_free(&*self.state()?, name)?;
        Ok(())
    }

    /// Creates a toggle (spec §3 "POST create").
    pub async fn create_toggle(
        &self,
        actor: &Actor,
        spec: ToggleSpec,
    ) -> Result<Toggle, ServiceError> {
        // Order of checks: name format, then uniqueness, then the rest of the document.
        let name = spec
            .name
            .clone()
            .ok_or_else(|| ValidationErrors::single("name", "\"name\" is required"))?;
        validate_toggle_name(&name)?;
        let valid = self.validated(spec)?;
        self.write(|state, now| {
            ensure_name_free(state, &valid.name)?;
            ValidationErrors::all([
                valid.check_references(state),
                check_strategy_segments(
                    &valid.strategies,
                    "",
                    &valid.project,
                    state,
                    self.segment_limits(),
                ),
            ])?;
            let toggle = Toggle::create(valid.clone(), now);
            // A parent is another toggle's record: only a toggle without one reads just its own.
            let checked = needs_dependency_check(None, &toggle);
            if checked {
                check_written_dependencies(state, None, &toggle)?;
            }
            let mut plan = Plan::new(now, toggle.clone());
            plan.put(Collection::Features, &toggle.name, &toggle)?;
            plan.event(
                EventKind::FeatureCreated,
                actor,
                toggle_event_data(&toggle),
                vec![],
            );
            if !checked {
                plan.reads_only_its_toggles();
            }
            Ok(plan)
        })
        .await
    }

    /// Replaces an active toggle's definition (PUT); the body's name, if any, must match.
    pub async fn update_toggle(
        &self,
        actor: &Actor,
        name: &str,
        mut spec: ToggleSpec,
    ) -> Result<Toggle, ServiceError> {
        match spec.name.as_deref() {
            Some(body_name) if body_name != name => {
                return Err(ValidationErrors::single(
                    "name",
                    format!("\"name\" in the body (\"{body_name}\") must match the toggle in the path (\"{name}\")"),
                )
                .into())
            }
            _ => spec.name = Some(name.to_string()),
        }
        let valid = self.validated(spec)?;
        self.write(|state, now| {
            let current = active(state, name)?;
            ValidationErrors::all([
                valid.check_references(state),
                check_strategy_segments(
                    &valid.strategies,
                    "",
                    &valid.project,
                    state,
                    self.segment_limits(),
                ),
            ])?;
            let toggle = current.replaced_by(valid.clone());
            // New dependencies read the parent, a change of project the children.
            let checked = needs_dependency_check(Some(current), &toggle);
            if checked {
                check_written_dependencies(state, Some(current), &toggle)?;
            }
            let mut plan = Plan::new(now, toggle.clone());
            plan.put(Collection::Features, name, &toggle)?;
            plan.event(
                EventKind::FeatureUpdated,
                actor,
                toggle_event_data(&toggle),
                toggle.tags.clone(),
            );
            if !checked {
                plan.reads_only_its_toggles();
            }
            Ok(plan)
        })
        .await
    }

    /// Switches a toggle on or off; a no-op when it already is.
    pub async fn set_enabled(
        &self,
        actor: &Actor,
        name: &str,
        enabled: bool,
    ) -> Result<Toggle, ServiceError> {
        self.change_flag(actor, name, |t| {
            (t.default_environment().enabled != enabled).then(|| {
                let mut toggle = t.clone();
                toggle.environment_mut(DEFAULT_ENVIRONMENT).enabled = enabled;
                (toggle, EventKind::FeatureUpdated)
            })
        })
        .await
    }

    /// Marks a toggle stale or active again; a no-op when it already is.
    pub async fn set_stale(
        &self,
        actor: &Actor,
        name: &str,
        stale: bool,
    ) -> Result<Toggle, ServiceError> {
        let kind = if stale {
            EventKind::FeatureStaleOn
        } else {
            EventKind::FeatureStaleOff
        };
        self.change_flag(actor, name, |t| {
            (t.stale != stale).then(|| (Toggle { stale, ..t.clone() }, kind))
        })
        .await
    }

    /// Replaces the toggle variants (the `default` environment's, those the 3.x toggle `PUT`
    /// carries), validated as that `PUT` validates them (problems at `variants[i].…`); the
    /// event is the `PUT`'s `feature-updated`. A no-op when they are the same.
    pub async fn set_toggle_variants(
        &self,
        actor: &Actor,
        name: &str,
        specs: Vec<VariantSpec>,
    ) -> Result<Toggle, ServiceError> {
        let mut errors = ValidationErrors::default();
        let variants = validate_variants(specs, &mut errors);
        errors.into_result(())?;
        self.change_flag(actor, name, |t| {
            (t.default_environment().variants != variants).then(|| {
                let mut next = t.clone();
                next.environment_mut(DEFAULT_ENVIRONMENT).variants = variants.clone();
                (next, EventKind::FeatureUpdated)
            })
        })
        .await
    }

    /// Applies `change` to an active toggle; `None` from it means nothing to do.
    async fn change_flag(
        &self,
        actor: &Actor,
        name: &str,
        change: impl Fn(&Toggle) -> Option<(Toggle, EventKind)>,
    ) -> Result<Toggle, ServiceError> {
        self.write(|state, now| {
            let current = active(state, name)?;
            let mut plan = Plan::new(now, (**current).clone());
            if let Some((toggle, kind)) = change(current) {
                plan.put(Collection::Features, name, &toggle)?;
                plan.event(kind, actor, toggle_event_data(&toggle), toggle.tags.clone());
                plan.output = toggle;
            }
            plan.reads_only_its_toggles();
            Ok(plan)
        })
        .await
    }

    /// Archives an active toggle: it leaves every active listing and is switched off. A toggle
    /// others depend on stays (403, as in Unleash 7); an archived toggle keeps no parents.
    pub async fn archive_toggle(&self, actor: &Actor, name: &str) -> Result<Toggle, ServiceError> {
        // The decision reads the other toggles (for children), so it declares no
        // `reads_only_its_toggles`: a dependency added meanwhile on another replica makes it
        // decide again instead of archiving a parent.
        self.write(|state, now| {
            let current = active(state, name)?;
            if children_of(state, name).next().is_some() {
                return Err(DomainError::Forbidden(HAS_CHILDREN.to_string()));
            }
            let toggle = Toggle {
                archived_at: Some(now),
                dependencies: Vec::new(),
                ..(**current).clone()
            }
            .switched_off();
            let mut plan = Plan::new(now, toggle.clone());
            plan.delete(Collection::Features, name);
            plan.put(Collection::Archive, name, &toggle)?;
            if !current.dependencies.is_empty() {
                plan.event(
                    EventKind::FeatureDependenciesRemoved,
                    actor,
                    json!({"featureName": name, "project": current.project}),
                    toggle.tags.clone(),
                );
            }
            plan.event(
                EventKind::FeatureArchived,
                actor,
                json!({"name": name}),
                toggle.tags.clone(),
            );
            Ok(plan)
        })
        .await
    }

    /// Brings an archived toggle back, switched off.
    pub async fn revive_toggle(&self, actor: &Actor, name: &str) -> Result<Toggle, ServiceError> {
        self.write(|state, now| {
            let archived = state.archive.get(name).ok_or_else(|| {
                DomainError::NotFound(format!("Could not find archived feature toggle \"{name}\""))
            })?;
            archived
                .check_references(state)
                .map_err(|e| DomainError::InUse(format!("\"{name}\" cannot be revived: {e}")))?;
            let toggle = Toggle {
                archived_at: None,
                ..(**archived).clone()
            }
            .switched_off();
            let mut plan = Plan::new(now, toggle.clone());
            plan.delete(Collection::Archive, name);
            plan.put(Collection::Features, name, &toggle)?;
            plan.event(
                EventKind::FeatureRevived,
                actor,
                json!({"name": name}),
                toggle.tags.clone(),
            );
            plan.reads_only_its_toggles();
            Ok(plan)
        })
        .await
    }

    /// Tags an active toggle, creating the tag when the (type, value) pair is new.
    pub async fn add_toggle_tag(
        &self,
        actor: &Actor,
        name: &str,
        spec: TagSpec,
    ) -> Result<Tag, ServiceError> {
        let tag_ref = spec.validate()?;
        self.write(|state, now| {
            let current = active(state, name)?;
            ensure_tag_type(state, &tag_ref)?;
            if current.tags.contains(&tag_ref) {
                return Err(DomainError::AlreadyExists(format!(
                    "{name} already has the tag {}",
                    tag_ref.key()
                )));
            }
            let mut plan = Plan::new(now, ());
            let tag = match state.tag(&tag_ref) {
                Some(tag) => (**tag).clone(),
                // API-FACTS §3.2: an auto-created tag's event data is `{"tag": …}`.
                None => put_new_tag(state, &mut plan, actor, &tag_ref, json!({"tag": tag_ref}))?,
            };
            let mut toggle = (**current).clone();
            toggle.tags.push(tag_ref.clone());
            plan.put(Collection::Features, name, &toggle)?;
            plan.event(
                EventKind::FeatureTagged,
                actor,
                json!({"featureName": name, "tag": tag_ref}),
                toggle.tags.clone(),
            );
            plan.reads_only_its_toggles();
            Ok(plan.with_output(tag))
        })
        .await
    }

    /// Removes a tag from an active toggle (the tag itself stays).
    pub async fn remove_toggle_tag(
        &self,
        actor: &Actor,
        name: &str,
        tag_ref: TagRef,
    ) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let current = active(state, name)?;
            if !current.tags.contains(&tag_ref) {
                return Err(DomainError::NotFound(format!(
                    "{name} does not have the tag {}",
                    tag_ref.key()
                )));
            }
            let mut toggle = (**current).clone();
            toggle.tags.retain(|t| t != &tag_ref);
            let mut plan = Plan::new(now, ());
            plan.put(Collection::Features, name, &toggle)?;
            plan.event(
                EventKind::FeatureUntagged,
                actor,
                json!({"featureName": name, "tag": tag_ref}),
                toggle.tags.clone(),
            );
            plan.reads_only_its_toggles();
            Ok(plan)
        })
        .await
    }
}
