//! The Unleash 5–7 per-project toggle use-cases (MODERN-MODEL §5): create a toggle in a
//! project, switch it on or off in one environment, and add, replace, remove and order its
//! strategies there. Each reads, of the toggle records, only the one it writes (like
//! `toggles.rs`), and its events name the environment (`data.environment`).

use serde_json::Value;

use super::environments::existing_environment;
use super::toggles::ensure_name_free;
use super::{event_data, Actor, Plan, Service, ServiceError};
use crate::domain::config_state::ConfigState;
use crate::domain::event::EventKind;
use crate::domain::feature_strategy::{
    check_unique_ids, new_strategy_id, validate_strategy, Strategy, StrategySpec,
};
use crate::domain::fields::{refuse_unsupported, ExtraFields};
use crate::domain::known::KnownNames;
use crate::domain::name::{check_name, NAME_MAX};
use crate::domain::project::DEFAULT_PROJECT;
use crate::domain::segment::{check_segments_of, SegmentLimits};
use crate::domain::text::Text;
use crate::domain::toggle::{Toggle, DEFAULT_TYPE};
use crate::domain::variant::{share_toggle_variant_weights, validate_variants, VariantSpec};
use crate::domain::views::ToggleRecord;
use crate::domain::{DomainError, ValidationErrors};
use crate::store::Collection;

/// A toggle as sent to `POST /api/admin/projects/{project}/features` (`createFeatureSchema`).
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewProjectFeature {
    #[schema(
        required = true,
        nullable = false,
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "my-feature"
    )]
    pub name: Option<String>,
    pub description: Option<String>,
    /// Not blank; `release` when not sent.
    #[serde(rename = "type")]
    #[schema(pattern = "\\S", example = "release")]
    pub kind: Option<String>,
    pub impression_data: Option<bool>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

/// A strategy's new position, as `…/strategies/set-sort-order` takes it.
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyOrder {
    pub id: String,
    pub sort_order: i64,
}

/// What a per-environment route addresses: a toggle of a project in an environment.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub project: &'a str,
    pub feature: &'a str,
    pub environment: &'a str,
}

/// The project must exist (`default` always does).
pub fn existing_project(state: &ConfigState, project: &str) -> Result<(), DomainError> {
    if project == DEFAULT_PROJECT || state.projects.contains_key(project) {
        Ok(())
    } else {
        Err(DomainError::NotFound(format!(
            "Could not find project \"{project}\""
        )))
    }
}

/// The active toggle `feature` of `project`, or a 404 (also when it is in another project).
pub fn toggle_in_project<'a>(
    state: &'a ConfigState,
    project: &str,
    feature: &str,
) -> Result<&'a Toggle, DomainError> {
    existing_project(state, project)?;
    state
        .features
        .get(feature)
        .filter(|t| t.project == project)
        .map(|t| &**t)
        .ok_or_else(|| {
            DomainError::NotFound(format!(
                "Could not find feature toggle \"{feature}\" in project \"{project}\""
            ))
        })
}

/// The toggle and environment a target names, or the 404 of the first that is missing.
fn resolve<'a>(state: &'a ConfigState, target: Target<'_>) -> Result<&'a Toggle, DomainError> {
    let toggle = toggle_in_project(state, target.project, target.feature)?;
    existing_environment(state, target.environment)?;
    Ok(toggle)
}

/// The event data of a change to `toggle` in `environment`: the toggle as it is there, plus
/// the strategy concerned when there is one.
fn record(toggle: &Toggle, environment: &str, strategy: Option<&str>) -> Value {
    let mut data = event_data(&ToggleRecord::new(toggle, environment));
    if let (Some(id), Value::Object(map)) = (strategy, &mut data) {
        map.insert("strategyId".into(), Value::String(id.into()));
    }
    data
}

/// Validates a strategy body against `state` (its segments and context fields must exist,
/// its segments be few enough and usable by the toggle's project); problems are reported at
/// paths relative to the body (`parameters.rollout`).
fn validated_strategy(
    spec: &StrategySpec,
    toggle: &Toggle,
    state: &ConfigState,
    limits: &SegmentLimits,
) -> Result<Strategy, DomainError> {
    let mut errors = ValidationErrors::default();
    let mut strategy = validate_strategy(
        spec.clone(),
        "",
        Some(state as &dyn KnownNames),
        &mut errors,
    );
    check_segments_of(&strategy, "", &toggle.project, state, limits, &mut errors);
    strategy.settle_variant_group(&toggle.name);
    if errors.0.is_empty() {
        return Ok(strategy);
    }
    for problem in &mut errors.0 {
        problem.path = problem.path.trim_start_matches('.').to_string();
    }
    Err(DomainError::Invalid(errors))
}

/// Where a body's `sortOrder` (read-only for `validate_strategy`) puts a strategy in a list
/// of `len`, if it sends one.
fn requested_position(spec: &StrategySpec, len: usize) -> Option<usize> {
    let order = spec.extra.get("sortOrder")?.as_i64()?;
    Some(usize::try_from(order.max(0)).unwrap_or(usize::MAX).min(len))
}

/// The strategy Unleash adds when a toggle is switched on in an environment without an
/// enabled strategy: a gradual rollout to everyone, grouped by the toggle's name.
fn default_strategy(toggle: &str) -> Strategy {
    let mut strategy = Strategy::named("flexibleRollout");
    strategy.id = new_strategy_id();
    strategy
        .parameters
        .insert(Text::from("groupId"), Text::from(toggle));
    strategy
        .parameters
        .insert(Text::from("rollout"), Text::from("100"));
    strategy
        .parameters
        .insert(Text::from("stickiness"), Text::from("default"));
    strategy
}

impl Service {
    /// Creates a toggle in `project`, unconfigured (off, no strategies) in every environment.
    pub async fn create_project_toggle(
        &self,
        actor: &Actor,
        project: &str,
        spec: NewProjectFeature,
    ) -> Result<Toggle, ServiceError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(
            &spec.extra,
            "",
            &["project", "createdAt", "stale", "archived"],
            &mut errors,
        );
        let name = spec.name.clone().unwrap_or_default();
        if spec.name.is_none() {
            errors.push("name", "\"name\" is required");
        } else if let Err(m) = check_name("name", &name, 2, NAME_MAX) {
            errors.push("name", m);
        }
        let kind = spec.kind.clone().unwrap_or_else(|| DEFAULT_TYPE.into());
        if kind.trim().is_empty() {
            errors.push("type", "\"type\" is not allowed to be empty");
        }
        // A body naming a project must name the path's.
        if let Some(body) = spec.extra.get("project").and_then(Value::as_str) {
            if body != project {
                errors.push(
                    "project",
                    format!("\"project\" in the body (\"{body}\") must be the project in the path (\"{project}\")"),
                );
            }
        }
        errors.into_result(())?;
        self.write(|state, now| {
            existing_project(state, project)?;
            if ensure_name_free(state, &name).is_err() {
                return Err(DomainError::AlreadyExists(format!(
                    "A toggle with the name \"{name}\" already exists (active or archived)"
                )));
            }
            let toggle = Toggle {
                name: name.as_str().into(),
                description: spec.description.as_deref().unwrap_or_default().into(),
                kind: kind.as_str().into(),
                project: project.into(),
                stale: false,
                impression_data: spec.impression_data,
                dependencies: Vec::new(),
                environments: Default::default(),
                created_at: now,
                last_seen_at: None,
                tags: Vec::new(),
                archived_at: None,
            };
            let mut plan = Plan::new(now, toggle.clone());
            plan.put(Collection::Features, &toggle.name, &toggle)?;
            plan.event(
                EventKind::FeatureCreated,
                actor,
                record(
                    &toggle,
                    crate::domain::environment::DEFAULT_ENVIRONMENT,
                    None,
                ),
                vec![],
            );
            plan.reads_only_its_toggles();
            Ok(plan)
        })
        .await
    }

    /// Switches a toggle on or off in one environment; switching on where no strategy is
    /// enabled adds the default strategy first (as Unleash does). A no-op when it already is.
    pub async fn set_toggle_environment_enabled(
        &self,
        actor: &Actor,
        target: Target<'_>,
        enabled: bool,
    ) -> Result<Toggle, ServiceError> {
        self.write(|state, now| {
            let current = resolve(state, target)?;
            let env = target.environment;
            let mut plan = Plan::new(now, current.clone());
            if current.environment(env).enabled == enabled {
                plan.reads_only_its_toggles();
                return Ok(plan);
            }
            let mut toggle = current.clone();
            let config = toggle.environment_mut(env);
            config.enabled = enabled;
            let mut added = None;
            if enabled && config.strategies.iter().all(|s| s.disabled) {
                let strategy = default_strategy(target.feature);
                added = Some(strategy.id.clone());
                config.strategies.push(strategy);
            }
            plan.put(Collection::Features, &toggle.name, &toggle)?;
            if let Some(id) = added {
                plan.event(
                    EventKind::FeatureStrategyAdd,
                    actor,
                    record(&toggle, env, Some(&id)),
                    toggle.tags.clone(),
                );
            }
            let kind = if enabled {
                EventKind::FeatureEnvironmentEnabled
            } else {
                EventKind::FeatureEnvironmentDisabled
            };
            plan.event(kind, actor, record(&toggle, env, None), toggle.tags.clone());
            plan.reads_only_its_toggles();
            Ok(plan.with_output(toggle))
        })
        .await
    }

    /// Adds a strategy to a toggle in one environment; returns the toggle and the new id.
    pub async fn add_toggle_strategy(
        &self,
        actor: &Actor,
        target: Target<'_>,
        spec: StrategySpec,
    ) -> Result<(Toggle, Text), ServiceError> {
        self.write(|state, now| {
            let current = resolve(state, target)?;
            let mut strategy = validated_strategy(&spec, current, state, self.segment_limits())?;
            let mut toggle = current.clone();
            let config = toggle.environment_mut(target.environment);
            if strategy.id.is_empty() {
                strategy.id = new_strategy_id();
            }
            let id = strategy.id.clone();
            let position = requested_position(&spec, config.strategies.len())
                .unwrap_or(config.strategies.len());
            config.strategies.insert(position, strategy);
            let mut errors = ValidationErrors::default();
            check_unique_ids(&config.strategies, "", &mut errors);
            if !errors.0.is_empty() {
                return Err(ValidationErrors::single(
                    "id",
                    format!("the strategy id \"{id}\" is taken in this environment"),
                ));
            }
            let mut plan = Plan::new(now, ());
            plan.put(Collection::Features, &toggle.name, &toggle)?;
            plan.event(
                EventKind::FeatureStrategyAdd,
                actor,
                record(&toggle, target.environment, Some(&id)),
                toggle.tags.clone(),
            );
            plan.reads_only_its_toggles();
            Ok(plan.with_output((toggle, id)))
        })
        .await
    }

    /// Replaces a strategy of a toggle in one environment (it keeps its id and position).
    pub async fn update_toggle_strategy(
        &self,
        actor: &Actor,
        target: Target<'_>,
        id: &str,
        spec: StrategySpec,
    ) -> Result<Toggle, ServiceError> {
        self.write(|state, now| {
            let current = resolve(state, target)?;
            let index = strategy_index(current, target, id)?;
            let mut strategy = validated_strategy(&spec, current, state, self.segment_limits())?;
            if !strategy.id.is_empty() && strategy.id != id {
                return Err(ValidationErrors::single(
                    "id",
                    format!(
                        "\"id\" in the body (\"{}\") must be the strategy in the path (\"{id}\")",
                        strategy.id
                    ),
                ));
            }
            strategy.id = id.into();
            let mut toggle = current.clone();
            let config = toggle.environment_mut(target.environment);
            let mut plan = Plan::new(now, ());
            if config.strategies[index] != strategy {
                config.strategies[index] = strategy;
                plan.put(Collection::Features, &toggle.name, &toggle)?;
                plan.event(
                    EventKind::FeatureStrategyUpdate,
                    actor,
                    record(&toggle, target.environment, Some(id)),
                    toggle.tags.clone(),
                );
            }
            plan.reads_only_its_toggles();
            Ok(plan.with_output(toggle))
        })
        .await
    }

    /// Replaces a toggle's variants in one environment (Unleash 7's
    /// `PUT …/environments/:env/variants`), validated as the 3.x toggle `PUT` validates them
    /// (problems at `variants[i].…`) and their weights shared out to 1,000 as Unleash 7 saves
    /// them (sorted by name); a no-op when they are the same.
    pub async fn set_toggle_environment_variants(
        &self,
        actor: &Actor,
        target: Target<'_>,
        specs: Vec<VariantSpec>,
    ) -> Result<Toggle, ServiceError> {
        let mut errors = ValidationErrors::default();
        let mut variants = validate_variants(specs, &mut errors);
        if errors.0.is_empty() {
            share_toggle_variant_weights(&mut variants, "variants", &mut errors);
        }
        errors.into_result(())?;
        self.write(|state, now| {
            let current = resolve(state, target)?;
            let mut plan = Plan::new(now, current.clone());
            if current.environment(target.environment).variants != variants {
                let mut toggle = current.clone();
                toggle.environment_mut(target.environment).variants = variants.clone();
                plan.put(Collection::Features, &toggle.name, &toggle)?;
                plan.event(
                    EventKind::FeatureEnvironmentVariantsUpdated,
                    actor,
                    record(&toggle, target.environment, None),
                    toggle.tags.clone(),
                );
                plan.output = toggle;
            }
            plan.reads_only_its_toggles();
            Ok(plan)
        })
        .await
    }

    /// Removes a strategy of a toggle in one environment.
    pub async fn delete_toggle_strategy(
        &self,
        actor: &Actor,
        target: Target<'_>,
        id: &str,
    ) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let current = resolve(state, target)?;
            let index = strategy_index(current, target, id)?;
            let mut toggle = current.clone();
            toggle
                .environment_mut(target.environment)
                .strategies
                .remove(index);
            let mut plan = Plan::new(now, ());
            plan.put(Collection::Features, &toggle.name, &toggle)?;
            plan.event(
                EventKind::FeatureStrategyRemove,
                actor,
                record(&toggle, target.environment, Some(id)),
                toggle.tags.clone(),
            );
            plan.reads_only_its_toggles();
            Ok(plan)
        })
        .await
    }

    /// Reorders a toggle's strategies in one environment: the listed ones by their new
    /// `sortOrder`, the others keep their place relative to them (a stable sort by the new
    /// order, the current position standing in for strategies not listed).
    pub async fn set_toggle_strategy_order(
        &self,
        actor: &Actor,
        target: Target<'_>,
        orders: Vec<StrategyOrder>,
    ) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let current = resolve(state, target)?;
            let strategies = &current.environment(target.environment).strategies;
            let mut errors = ValidationErrors::default();
            for (i, order) in orders.iter().enumerate() {
                if !strategies.iter().any(|s| s.id == order.id) {
                    errors.push(
                        format!("[{i}].id"),
                        format!(
                            "there is no strategy \"{}\" on \"{}\" in \"{}\"",
                            order.id, target.feature, target.environment
                        ),
                    );
                }
            }
            errors.into_result(())?;
            let mut keyed: Vec<(i64, Strategy)> = strategies
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let key = orders
                        .iter()
                        .rev()
                        .find(|o| o.id == s.id)
                        .map_or(i64::try_from(i).unwrap_or(i64::MAX), |o| o.sort_order);
                    (key, s.clone())
                })
                .collect();
            keyed.sort_by_key(|(key, _)| *key);
            let reordered: Vec<Strategy> = keyed.into_iter().map(|(_, s)| s).collect();
            let mut plan = Plan::new(now, ());
            if &reordered != strategies {
                let mut toggle = current.clone();
                toggle.environment_mut(target.environment).strategies = reordered;
                plan.put(Collection::Features, &toggle.name, &toggle)?;
                plan.event(
                    EventKind::StrategyOrderChanged,
                    actor,
                    record(&toggle, target.environment, None),
                    toggle.tags.clone(),
                );
            }
            plan.reads_only_its_toggles();
            Ok(plan)
        })
        .await
    }
}

/// The position of strategy `id` in the target's list, or a 404.
fn strategy_index(toggle: &Toggle, target: Target<'_>, id: &str) -> Result<usize, DomainError> {
    toggle
        .environment(target.environment)
        .strategies
        .iter()
        .position(|s| s.id == id)
        .ok_or_else(|| {
            DomainError::NotFound(format!(
                "Could not find strategy \"{id}\" on \"{}\" in \"{}\"",
                target.feature, target.environment
            ))
        })
}
