//! Segment use-cases (MODERN-MODEL §1): create within the limit, replace, delete when no
//! active toggle's strategy uses it. Ids come from the `segment` sequence, so a deleted
//! segment's id is never given again (a strategy that still named it would otherwise change
//! meaning).

use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::event::EventKind;
use crate::domain::segment::{strategies_using, Segment, SegmentSpec, ValidSegment, SEGMENT_IDS};
use crate::domain::toggle::Toggle;
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

/// How many toggle names a refusal lists before it counts the rest.
const NAMES_SHOWN: usize = 10;

/// The segment with id `id`.
pub fn existing_segment(state: &ConfigState, id: u32) -> Result<&Segment, DomainError> {
    state
        .segments
        .get(&id.to_string())
        .map(|s| &**s)
        .ok_or_else(|| DomainError::NotFound(format!("Could not find segment with id {id}")))
}

/// Refuses a name another segment (not `except`) has.
fn ensure_name_free(
    state: &ConfigState,
    name: &str,
    except: Option<u32>,
) -> Result<(), DomainError> {
    if state
        .segments
        .values()
        .any(|s| s.name == name && Some(s.id) != except)
    {
        return Err(DomainError::AlreadyExists(
            "Segment name already exists".into(),
        ));
    }
    Ok(())
}

/// A project-bound segment may only be used by strategies of that project's toggles (Unleash's
/// `validateSegmentProject`).
fn ensure_project_fits(
    state: &ConfigState,
    id: u32,
    project: Option<&str>,
) -> Result<(), DomainError> {
    let Some(project) = project else {
        return Ok(());
    };
    let mut used: Vec<String> = strategies_using(state, id)
        .into_iter()
        .map(|s| s.project_id)
        .collect();
    used.sort();
    used.dedup();
    if used.iter().any(|p| p != project) {
        return Err(ValidationErrors::single(
            "project",
            format!(
                "Invalid project. Segment is being used by strategies in other projects: {}",
                used.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Removes segment `id` from the strategies of the archived toggles that use it (Unleash
/// drops a deleted segment's strategy links in every toggle), so that a revived toggle names
/// no missing segment. Returns the changed toggles.
fn archived_without(state: &ConfigState, id: u32) -> Vec<Toggle> {
    state
        .archive
        .values()
        .filter(|t| t.all_strategies().any(|s| s.segments.contains(&id)))
        .map(|t| {
            let mut toggle = (**t).clone();
            for (_, config) in toggle.environments.iter_mut() {
                for strategy in &mut config.strategies {
                    strategy.segments.retain(|s| *s != id);
                }
            }
            toggle
        })
        .collect()
}

impl Service {
    /// The body checked on its own, before the write (which checks the references).
    fn valid_segment(&self, spec: SegmentSpec) -> Result<ValidSegment, ServiceError> {
        match spec.clone().validate(self.segment_limits(), None) {
            Ok(valid) => Ok(valid),
            // One 400 names the reference problems this replica sees, too.
            Err(own) => Err(spec
                .validate(self.segment_limits(), Some(&*self.state()?))
                .err()
                .unwrap_or(own)
                .into()),
        }
    }

    /// Checks that `name` could name a new segment (`POST /api/admin/segments/validate`).
    pub fn validate_segment_name(&self, name: &str) -> Result<(), ServiceError> {
        if name.is_empty() {
            return Err(ValidationErrors::single("name", "Segment name cannot be empty").into());
        }
        ensure_name_free(&*self.state()?, name, None)?;
        Ok(())
    }

    /// Creates a segment, within the segments limit.
    pub async fn create_segment(
        &self,
        actor: &Actor,
        spec: SegmentSpec,
    ) -> Result<Segment, ServiceError> {
        let limit = self.segment_limits().segments;
        if self.state()?.segments.len() >= limit {
            return Err(limit_reached(limit).into());
        }
        self.valid_segment(spec.clone())?;
        self.write(|state, now| {
            if state.segments.len() >= limit {
                return Err(limit_reached(limit));
            }
            let valid = spec.clone().validate(self.segment_limits(), Some(state))?;
            ensure_name_free(state, &valid.name, None)?;
            let next = state.next_id(SEGMENT_IDS);
            let id = u32::try_from(next)
                .map_err(|_| DomainError::InUse("The segment ids are used up".into()))?;
            let segment = Segment::create(id, valid, &actor.0, now);
            let mut plan = Plan::new(now, segment.clone());
            plan.put(Collection::Counters, SEGMENT_IDS, &next)?;
            plan.put(Collection::Segments, &id.to_string(), &segment)?;
            plan.event(
                EventKind::SegmentCreated,
                actor,
                event_data(&segment),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Replaces a segment's name, description, project and constraints.
    pub async fn update_segment(
        &self,
        actor: &Actor,
        id: u32,
        spec: SegmentSpec,
    ) -> Result<Segment, ServiceError> {
        self.valid_segment(spec.clone())?;
        self.write(|state, now| {
            let current = existing_segment(state, id)?;
            let valid = spec.clone().validate(self.segment_limits(), Some(state))?;
            ensure_name_free(state, &valid.name, Some(id))?;
            ensure_project_fits(state, id, valid.project.as_deref())?;
            let segment = current.replaced_by(valid);
            let mut plan = Plan::new(now, segment.clone());
            plan.put(Collection::Segments, &id.to_string(), &segment)?;
            plan.event(
                EventKind::SegmentUpdated,
                actor,
                event_data(&segment),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Deletes a segment no active toggle's strategy uses (archived toggles lose it); an
    /// unknown id is already deleted (Unleash answers 204 too).
    pub async fn delete_segment(&self, actor: &Actor, id: u32) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let mut plan = Plan::new(now, ());
            let Some(segment) = state.segments.get(&id.to_string()) else {
                return Ok(plan);
            };
            let mut users: Vec<String> = strategies_using(state, id)
                .into_iter()
                .map(|s| s.feature_name)
                .collect();
            users.dedup();
            if !users.is_empty() {
                return Err(DomainError::InUse(format!(
                    "Segment \"{}\" is used by strategies of {} toggle{}: {}",
                    segment.name,
                    users.len(),
                    if users.len() == 1 { "" } else { "s" },
                    listing(&users)
                )));
            }
            for toggle in archived_without(state, id) {
                plan.put(Collection::Archive, &toggle.name, &toggle)?;
            }
            plan.delete(Collection::Segments, &id.to_string());
            plan.event(
                EventKind::SegmentDeleted,
                actor,
                event_data(&**segment),
                vec![],
            );
            Ok(plan)
        })
        .await
    }
}

/// Unleash's `ExceedsLimitError` for segments.
fn limit_reached(limit: usize) -> DomainError {
    ValidationErrors::single(
        "",
        format!("Failed to create segment. You can't create more than the established limit of {limit}."),
    )
}

/// "a, b and 3 more".
fn listing(names: &[String]) -> String {
    let shown = names[..names.len().min(NAMES_SHOWN)].join(", ");
    match names.len().saturating_sub(NAMES_SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}
