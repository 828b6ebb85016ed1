//! Tag and tag-type use-cases. Deleting a tag or a tag type also removes it from every
//! toggle that carries it, in the same commit.

use serde_json::json;

use super::{Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::event::EventKind;
use crate::domain::tag::{Tag, TagRef, TagSpec, TagType, TagTypeSpec};
use crate::domain::toggle::Toggle;
use crate::domain::DomainError;
use crate::store::Collection;

/// The event data of tag-type events (API-FACTS §3.2).
pub(super) fn tag_type_data(t: &TagType) -> serde_json::Value {
    json!({"name": t.name, "description": t.description, "icon": t.icon})
}

/// Removes every tag matching `doomed` from active and archived toggles.
fn untag_everywhere<T>(
    state: &ConfigState,
    plan: &mut Plan<T>,
    doomed: impl Fn(&TagRef) -> bool,
) -> Result<(), DomainError> {
    for (collection, toggles) in [
        (Collection::Features, &state.features),
        (Collection::Archive, &state.archive),
    ] {
        for (name, toggle) in toggles {
            if toggle.tags.iter().any(&doomed) {
                let mut updated: Toggle = (**toggle).clone();
                updated.tags.retain(|t| !doomed(t));
                plan.put(collection, name, &updated)?;
            }
        }
    }
    Ok(())
}

/// Fails unless the tag type of `tag_ref` exists.
pub(super) fn ensure_tag_type(state: &ConfigState, tag_ref: &TagRef) -> Result<(), DomainError> {
    if state.tag_types.contains_key(tag_ref.kind.as_str()) {
        Ok(())
    } else {
        Err(DomainError::NotFound(format!(
            "Could not find tag type \"{}\"",
            tag_ref.kind
        )))
    }
}

/// Allocates the next tag id and writes the new tag, with its `tag-created` event carrying
/// `event_data`, into `plan`.
pub(super) fn put_new_tag<T>(
    state: &ConfigState,
    plan: &mut Plan<T>,
    actor: &Actor,
    tag_ref: &TagRef,
    event_data: serde_json::Value,
) -> Result<Tag, DomainError> {
    let tag = Tag {
        id: state.next_id("tag"),
        kind: tag_ref.kind.to_string(),
        value: tag_ref.value.to_string(),
    };
    plan.put(Collection::Counters, "tag", &tag.id)?;
    plan.put(Collection::Tags, &tag_ref.key(), &tag)?;
    plan.event(EventKind::TagCreated, actor, event_data, vec![]);
    Ok(tag)
}

impl Service {
    /// Creates a tag of an existing type.
    pub async fn create_tag(&self, actor: &Actor, spec: TagSpec) -> Result<Tag, ServiceError> {
        let tag_ref = spec.validate()?;
        self.write(|state, now| {
            ensure_tag_type(state, &tag_ref)?;
            if state.tag(&tag_ref).is_some() {
                return Err(DomainError::AlreadyExists(format!(
                    "The tag {} already exists",
                    tag_ref.key()
                )));
            }
            let mut plan = Plan::new(now, ());
            let tag = put_new_tag(state, &mut plan, actor, &tag_ref, json!(tag_ref))?;
            Ok(plan.with_output(tag))
        })
        .await
    }

    /// Deletes a tag and removes it from every toggle.
    pub async fn delete_tag(&self, actor: &Actor, tag_ref: TagRef) -> Result<(), ServiceError> {
        self.write(|state, now| {
            if state.tag(&tag_ref).is_none() {
                return Err(DomainError::NotFound(format!(
                    "Could not find the tag {}",
                    tag_ref.key()
                )));
            }
            let mut plan = Plan::new(now, ());
            untag_everywhere(state, &mut plan, |t| t == &tag_ref)?;
            plan.delete(Collection::Tags, &tag_ref.key());
            plan.event(EventKind::TagDeleted, actor, json!(tag_ref), vec![]);
            Ok(plan)
        })
        .await
    }

    /// Creates a tag type.
    pub async fn create_tag_type(
        &self,
        actor: &Actor,
        spec: TagTypeSpec,
    ) -> Result<TagType, ServiceError> {
        let tag_type = spec.validate(None)?;
        self.write(|state, now| {
            if state.tag_types.contains_key(&tag_type.name) {
                return Err(DomainError::AlreadyExists(format!(
                    "There already exists a tag-type with the name {}",
                    tag_type.name
                )));
            }
            let mut plan = Plan::new(now, tag_type.clone());
            plan.put(Collection::TagTypes, &tag_type.name, &tag_type)?;
            plan.event(
                EventKind::TagTypeCreated,
                actor,
                tag_type_data(&tag_type),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Changes a tag type's description and icon.
    pub async fn update_tag_type(
        &self,
        actor: &Actor,
        name: &str,
        spec: TagTypeSpec,
    ) -> Result<TagType, ServiceError> {
        let tag_type = spec.validate(Some(name))?;
        self.write(|state, now| {
            if !state.tag_types.contains_key(name) {
                return Err(DomainError::NotFound(format!(
                    "Could not find tag type \"{name}\""
                )));
            }
            let mut plan = Plan::new(now, tag_type.clone());
            plan.put(Collection::TagTypes, name, &tag_type)?;
            plan.event(
                EventKind::TagTypeUpdated,
                actor,
                tag_type_data(&tag_type),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Deletes a tag type with all its tags, removing them from every toggle.
    pub async fn delete_tag_type(&self, actor: &Actor, name: &str) -> Result<(), ServiceError> {
        self.write(|state, now| {
            if !state.tag_types.contains_key(name) {
                return Err(DomainError::NotFound(format!(
                    "Could not find tag type \"{name}\""
                )));
            }
            if let Some(id) = state.addon_reading_tag_type(name) {
                return Err(DomainError::InUse(format!(
                    "Tag type \"{name}\" is read by addon {id}; delete the addon first"
                )));
            }
            let mut plan = Plan::new(now, ());
            untag_everywhere(state, &mut plan, |t| t.kind == name)?;
            for (key, tag) in &state.tags {
                if tag.kind == name {
                    plan.delete(Collection::Tags, key);
                }
            }
            plan.delete(Collection::TagTypes, name);
            plan.event(
                EventKind::TagTypeDeleted,
                actor,
                json!({"name": name}),
                vec![],
            );
            Ok(plan)
        })
        .await
    }
}
