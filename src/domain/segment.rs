//! Segments (Unleash 4.10+, open source since 5.5): named, reusable sets of constraints that
//! strategies refer to by id (MODERN-MODEL §1). The write body and its rules, the limits, the
//! admin view, and who uses a segment.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use super::config_state::ConfigState;
use super::constraint::{Constraint, ConstraintSpec};
use super::error::{DomainError, ValidationErrors};
use super::exact_capacity;
use super::feature_strategy::{check_context_field, Strategy};
use super::fields::{check_description, refuse_unsupported, ExtraFields};
use super::known::KnownNames;
use super::project::DEFAULT_PROJECT;

/// The counter of segment ids: ids are never reused, and an import moves it past the ids it
/// brings.
pub const SEGMENT_IDS: &str = "segment";

/// Longest segment name (Unleash stores it in a `varchar(255)`).
const SEGMENT_NAME_MAX: usize = 255;

/// Fields the admin view carries and tools echo back; ignored in a write body.
const READ_ONLY_SEGMENT_FIELDS: [&str; 5] = [
    "id",
    "createdAt",
    "createdBy",
    "usedInFeatures",
    "usedInProjects",
];

/// A stored segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    pub id: u32,
    /// Unique among segments.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The project whose strategies may use it; `None`: every project's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    pub constraints: Vec<Constraint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// The limits on segments (Unleash's `UNLEASH_SEGMENTS_LIMIT`,
/// `UNLEASH_STRATEGY_SEGMENTS_LIMIT`, `UNLEASH_SEGMENT_VALUES_LIMIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLimits {
    /// Segments in the whole configuration.
    pub segments: usize,
    /// Segments one strategy may use.
    pub per_strategy: usize,
    /// Values of one segment, summed over its constraints.
    pub values: usize,
}

impl Default for SegmentLimits {
    /// Unleash 7's defaults: 300, 5 and 1,000.
    fn default() -> Self {
        Self {
            segments: 300,
            per_strategy: 5,
            values: 1000,
        }
    }
}

/// A segment as sent by a client (`POST` and `PUT` alike).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentSpec {
    /// Unique among segments; any characters, 1 to 255 of them.
    #[schema(
        required = true,
        nullable = false,
        min_length = 1,
        max_length = 255,
        example = "beta users"
    )]
    pub name: Option<String>,
    /// At most 250 characters. On `PUT`, absent keeps the stored one and `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 250)]
    pub description: Option<Option<String>>,
    /// An existing project: only strategies of its toggles may use the segment. Absent,
    /// `null` or empty: a global segment (on `PUT` too, as in Unleash).
    #[schema(
        max_length = 100,
        pattern = "^([A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*)?$",
        example = "default"
    )]
    pub project: Option<String>,
    /// Its constraints, all of which must hold (ANDed with the strategy's own).
    #[schema(required = true, nullable = false)]
    pub constraints: Option<Vec<ConstraintSpec>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// Tells a field sent as `null` (`Some(None)`) from an absent one (`None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The validated content of a [`SegmentSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSegment {
    pub name: String,
    /// `None`: not sent; `Some(None)`: cleared.
    pub description: Option<Option<String>>,
    pub project: Option<String>,
    pub constraints: Vec<Constraint>,
}

impl SegmentSpec {
    /// Validates a segment: every problem with its path in one error. Context fields and the
    /// project are checked against `references` when given (the write checks them in the
    /// state it is decided on).
    pub fn validate(
        self,
        limits: &SegmentLimits,
        references: Option<&dyn KnownNames>,
    ) -> Result<ValidSegment, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &READ_ONLY_SEGMENT_FIELDS, &mut errors);
        let name = self.name.unwrap_or_default();
        if name.is_empty() {
            errors.push("name", "Segment name cannot be empty");
        } else if name.chars().count() > SEGMENT_NAME_MAX {
            errors.push(
                "name",
                format!("\"name\" must be at most {SEGMENT_NAME_MAX} characters long"),
            );
        }
        let description = self.description.map(|d| d.filter(|d| !d.is_empty()));
        check_description(description.as_ref().and_then(|d| d.as_deref()), &mut errors);
        let project = self.project.filter(|p| !p.is_empty());
        if let (Some(project), Some(state)) = (&project, references) {
            if project != DEFAULT_PROJECT && !state.has_project(project) {
                errors.push("project", format!("there is no project \"{project}\""));
            }
        }
        let constraints: Vec<Constraint> = match self.constraints {
            None => {
                errors.push("constraints", "\"constraints\" is required");
                Vec::new()
            }
            Some(specs) => specs
                .into_iter()
                .enumerate()
                .filter_map(|(i, spec)| {
                    let path = format!("constraints[{i}]");
                    let constraint = spec.validate(&path, &mut errors)?;
                    if let Some(state) = references {
                        check_context_field(&constraint, state, &path, &mut errors);
                    }
                    Some(constraint)
                })
                .collect(),
        };
        if values_of(&constraints) > limits.values {
            errors.push(
                "constraints",
                format!("Segments may not have more than {} values", limits.values),
            );
        }
        errors.into_result(ValidSegment {
            name,
            description,
            project,
            constraints,
        })
    }
}

/// The values of `constraints`, summed (what the values limit counts).
fn values_of(constraints: &[Constraint]) -> usize {
    constraints
        .iter()
        .map(|c| c.values.as_ref().map_or(0, Vec::len))
        .sum()
}

impl Segment {
    /// A new segment from validated input.
    pub fn create(id: u32, valid: ValidSegment, actor: &str, now: DateTime<Utc>) -> Self {
        Self {
            id,
            name: valid.name,
            description: valid.description.flatten(),
            project: valid.project,
            constraints: valid.constraints,
            created_by: Some(actor.to_string()),
            created_at: now,
        }
    }

    /// PUT semantics (Unleash's): name, project and constraints are replaced; an absent
    /// description keeps the stored one.
    pub fn replaced_by(&self, valid: ValidSegment) -> Self {
        Self {
            id: self.id,
            name: valid.name,
            description: valid
                .description
                .unwrap_or_else(|| self.description.clone()),
            project: valid.project,
            constraints: valid.constraints,
            created_by: self.created_by.clone(),
            created_at: self.created_at,
        }
    }
}

/// A segment in admin responses (Unleash's `adminSegmentSchema`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminSegment<'a> {
    pub id: u32,
    pub name: &'a str,
    pub description: Option<&'a str>,
    /// `null`: a global segment.
    pub project: Option<&'a str>,
    pub constraints: &'a [Constraint],
    /// Active toggles with a strategy using it, in any environment.
    pub used_in_features: usize,
    /// Projects of those toggles.
    pub used_in_projects: usize,
    pub created_by: Option<&'a str>,
    pub created_at: DateTime<Utc>,
}

/// Which toggles and projects use each segment: the counts of the admin view.
#[derive(Debug, Default)]
pub struct SegmentUsage(HashMap<u32, (BTreeSet<String>, BTreeSet<String>)>);

impl SegmentUsage {
    /// Reads every active toggle's strategies once.
    pub fn of(state: &ConfigState) -> Self {
        let mut usage: HashMap<u32, (BTreeSet<String>, BTreeSet<String>)> = HashMap::new();
        for toggle in state.features.values() {
            for id in toggle.all_strategies().flat_map(|s| &s.segments) {
                let (toggles, projects) = usage.entry(*id).or_default();
                toggles.insert(toggle.name.to_string());
                projects.insert(toggle.project.to_string());
            }
        }
        Self(usage)
    }

    /// The admin view of `segment`.
    pub fn view<'a>(&self, segment: &'a Segment) -> AdminSegment<'a> {
        let (toggles, projects) = self
            .0
            .get(&segment.id)
            .map_or((0, 0), |(t, p)| (t.len(), p.len()));
        AdminSegment {
            id: segment.id,
            name: &segment.name,
            description: segment.description.as_deref(),
            project: segment.project.as_deref(),
            constraints: &segment.constraints,
            used_in_features: toggles,
            used_in_projects: projects,
            created_by: segment.created_by.as_deref(),
            created_at: segment.created_at,
        }
    }
}

/// A strategy that uses a segment (Unleash's `segmentStrategiesSchema` item).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentStrategy {
    /// The strategy's id.
    pub id: String,
    pub project_id: String,
    pub feature_name: String,
    pub strategy_name: String,
    pub environment: String,
}

/// The strategies of active toggles, in every environment, that use segment `id` (by toggle
/// name, then environment, then position).
pub fn strategies_using(state: &ConfigState, id: u32) -> Vec<SegmentStrategy> {
    let mut out = Vec::new();
    for toggle in state.features.values() {
        for (environment, config) in toggle.environments.iter() {
            for strategy in config
                .strategies
                .iter()
                .filter(|s| s.segments.contains(&id))
            {
                out.push(SegmentStrategy {
                    id: strategy.id.to_string(),
                    project_id: toggle.project.to_string(),
                    feature_name: toggle.name.to_string(),
                    strategy_name: strategy.name.to_string(),
                    environment: environment.to_string(),
                });
            }
        }
    }
    out
}

/// The segments the strategy with id `strategy_id` uses, in any toggle (active or archived)
/// and environment; none when no strategy has that id.
pub fn segments_of_strategy<'a>(state: &'a ConfigState, strategy_id: &str) -> Vec<&'a Segment> {
    let ids: BTreeSet<u32> = state
        .features
        .values()
        .chain(state.archive.values())
        .flat_map(|t| t.all_strategies())
        .filter(|s| s.id == strategy_id)
        .flat_map(|s| s.segments.iter().copied())
        .collect();
    ids.into_iter()
        .filter_map(|id| state.segments.get(&id.to_string()).map(|s| &**s))
        .collect()
}

/// The rules a strategy list of a toggle of `toggle_project` must follow on an admin write:
/// at most `limits.per_strategy` segments per strategy, and only global segments or those of
/// the toggle's project (Unleash's `validateProjectCanAccessSegments`). Paths are
/// `{prefix}strategies[i].segments[j]`. Ids of no segment are the reference check's
/// (`there is no segment with id …`), not this one's.
pub fn check_strategy_segments(
    strategies: &[Strategy],
    prefix: &str,
    toggle_project: &str,
    state: &ConfigState,
    limits: &SegmentLimits,
) -> Result<(), DomainError> {
    let mut errors = ValidationErrors::default();
    for (i, strategy) in strategies.iter().enumerate() {
        check_segments_of(
            strategy,
            &format!("{prefix}strategies[{i}]"),
            toggle_project,
            state,
            limits,
            &mut errors,
        );
    }
    errors.into_result(())
}

/// [`check_strategy_segments`] for one strategy at `path` (e.g. `""` for a strategy body of
/// its own, whose problems are then at `segments` and `segments[j]`).
pub fn check_segments_of(
    strategy: &Strategy,
    path: &str,
    toggle_project: &str,
    state: &ConfigState,
    limits: &SegmentLimits,
    errors: &mut ValidationErrors,
) {
    let at = |field: &str| match path {
        "" => field.to_string(),
        path => format!("{path}.{field}"),
    };
    if strategy.segments.len() > limits.per_strategy {
        errors.push(
            at("segments"),
            format!(
                "Strategies may not have more than {} segments",
                limits.per_strategy
            ),
        );
    }
    for (j, id) in strategy.segments.iter().enumerate() {
        let Some(segment) = state.segments.get(&id.to_string()) else {
            continue;
        };
        if let Some(project) = segment.project.as_deref().filter(|p| *p != toggle_project) {
            errors.push(
                at(&format!("segments[{j}]")),
                format!(
                    "The segment \"{}\" with id {id} does not belong to project \
                     \"{toggle_project}\" (it belongs to \"{project}\")",
                    segment.name
                ),
            );
        }
    }
}

/// Names of the segments with a constraint on context field `field` for which `breaks` holds.
pub fn segments_where(
    state: &ConfigState,
    field: &str,
    breaks: impl Fn(&Constraint) -> bool,
) -> Vec<String> {
    state
        .segments
        .values()
        .filter(|s| {
            s.constraints
                .iter()
                .any(|c| c.context_name == field && breaks(c))
        })
        .map(|s| s.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::known::NothingKnown;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> SegmentSpec {
        serde_json::from_value(v).expect("spec parses")
    }

    fn paths(err: DomainError) -> Vec<String> {
        let DomainError::Invalid(errors) = err else {
            panic!("not a validation error: {err}")
        };
        errors.0.into_iter().map(|e| e.path).collect()
    }

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let err = spec(json!({"name": "", "icon": "x", "constraints": [
            {"contextName": "userId", "operator": "IN", "values": []},
            {"contextName": "nope", "operator": "IN", "values": ["a"]}], "id": 3}))
        .validate(&SegmentLimits::default(), Some(&NothingKnown))
        .unwrap_err();
        assert_eq!(
            paths(err),
            [
                "icon",
                "name",
                "constraints[0].values",
                "constraints[1].contextName"
            ]
        );
        let err = spec(json!({"name": "a"}))
            .validate(&SegmentLimits::default(), None)
            .unwrap_err();
        assert_eq!(paths(err), ["constraints"]);
    }

    #[test]
    fn values_are_counted_over_all_constraints() {
        let limits = SegmentLimits {
            values: 3,
            ..SegmentLimits::default()
        };
        let body = |n: usize| {
            let values: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            spec(json!({"name": "s", "constraints": [
                {"contextName": "userId", "operator": "IN", "values": ["x"]},
                {"contextName": "userId", "operator": "IN", "values": values}]}))
        };
        assert!(body(2).validate(&limits, None).is_ok());
        let err = body(3).validate(&limits, None).unwrap_err();
        assert_eq!(err.to_string(), "Segments may not have more than 3 values");
    }

    #[test]
    fn description_absent_keeps_null_clears() {
        let now = Utc::now();
        let limits = SegmentLimits::default();
        let valid = |v| spec(v).validate(&limits, None).expect("valid");
        let segment = Segment::create(
            1,
            valid(json!({"name": "s", "description": "d", "project": "", "constraints": []})),
            "me",
            now,
        );
        assert_eq!(segment.project, None);
        let kept = segment.replaced_by(valid(json!({"name": "t", "constraints": []})));
        assert_eq!(kept.description.as_deref(), Some("d"));
        let cleared = segment.replaced_by(valid(
            json!({"name": "t", "description": null, "constraints": []}),
        ));
        assert_eq!(cleared.description, None);
    }
}
