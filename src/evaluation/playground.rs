//! The playground (Unleash 7's `POST /api/admin/playground`): every toggle of some projects
//! evaluated for a context in one environment, with the explanation people debugging a
//! rollout need — each strategy's result, each of its constraints' and segments' results.
//!
//! The answer itself (`isEnabled`, `variant`) is the environment's engine's, so it is what the
//! frontend API and the SDKs answer. Each part of an explanation is a probe: the strategy
//! alone, one constraint alone, one segment alone, compiled into an engine of its own under
//! the toggle's name (so rollouts hash as they do for the toggle) and evaluated for the same
//! context.

use serde::Serialize;
use serde_json::{json, Value};
use unleash_types::client_features::{ClientFeatures, Context};
use unleash_yggdrasil::EngineState;

use super::engine::EnvironmentEngine;
use super::frontend::{FrontendPayload, Scope};
use crate::domain::config_state::ConfigState;
use crate::domain::feature_strategy::Strategy;
use crate::domain::segment::Segment;
use crate::domain::toggle::Toggle;
use crate::domain::views::{ClientSegment, ClientStrategy, SegmentForm};

/// A toggle's answer and its explanation.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlaygroundFeature {
    pub name: String,
    pub project_id: String,
    /// Whether the toggle is on for the context (strategies, dependencies and all).
    pub is_enabled: bool,
    /// Whether the toggle is switched on in the environment at all.
    pub is_enabled_in_current_environment: bool,
    /// The toggle is on in the environment and its strategies pass, but a parent toggle it
    /// depends on is not as required.
    pub has_unsatisfied_dependency: bool,
    pub variant: PlaygroundVariant,
    pub strategies: PlaygroundStrategies,
}

/// The variant the context gets.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PlaygroundVariant {
    pub name: String,
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<FrontendPayload>,
}

/// The strategies' verdict: whether any passes, and each one's.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PlaygroundStrategies {
    /// Whether the strategies let the toggle on (dependencies aside).
    pub result: bool,
    pub data: Vec<PlaygroundStrategy>,
}

/// One strategy's verdict.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlaygroundStrategy {
    pub id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A disabled strategy is shown but never counts.
    pub disabled: bool,
    #[schema(value_type = Object)]
    pub parameters: Value,
    pub result: StrategyResult,
    pub constraints: Vec<ConstraintResult>,
    pub segments: Vec<SegmentResult>,
}

/// A strategy's result.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyResult {
    pub enabled: bool,
    /// Always `complete`: every strategy is evaluated.
    pub evaluation_status: &'static str,
}

/// One constraint and whether the context meets it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ConstraintResult {
    /// The constraint as stored (`contextName`, `operator`, `values`/`value`, …).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub constraint: Value,
    pub result: bool,
}

/// One segment and whether the context meets all its constraints.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SegmentResult {
    pub id: u32,
    pub name: String,
    pub result: bool,
    pub constraints: Vec<ConstraintResult>,
}

/// Evaluates `strategies` (client form JSON values) as one toggle named `name` that is on in
/// its environment, for `context`.
fn probe(name: &str, strategies: Vec<Value>, segments: &[Value], context: &Context) -> bool {
    let document = json!({
        "version": 2,
        "features": [{"name": name, "enabled": true, "strategies": strategies}],
        "segments": segments,
    });
    let Ok(features) = serde_json::from_value::<ClientFeatures>(document) else {
        return false;
    };
    let engine = EngineState::default();
    // A probe that does not compile is off (what the engine does with the toggle too).
    let _ = engine.apply_client_features(features);
    engine.is_enabled(name, context, &None)
}

/// A `default` strategy with just `constraints` (client form).
fn constrained_default(constraints: Value) -> Value {
    json!({"name": "default", "parameters": {}, "constraints": constraints})
}

/// Whether `context` meets `constraint` (JSON, client form) alone.
fn constraint_result(name: &str, constraint: &Value, context: &Context) -> ConstraintResult {
    let result = probe(
        name,
        vec![constrained_default(json!([constraint]))],
        &[],
        context,
    );
    ConstraintResult {
        constraint: constraint.clone(),
        result,
    }
}

fn explain_segment(
    name: &str,
    id: u32,
    segment: Option<&Segment>,
    context: &Context,
) -> SegmentResult {
    let Some(segment) = segment else {
        return SegmentResult {
            id,
            name: String::new(),
            result: false,
            constraints: Vec::new(),
        };
    };
    let constraints = serde_json::to_value(&segment.constraints).unwrap_or(Value::Null);
    let each: Vec<ConstraintResult> = constraints
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| constraint_result(name, c, context))
                .collect()
        })
        .unwrap_or_default();
    SegmentResult {
        id,
        name: segment.name.clone(),
        result: each.iter().all(|c| c.result),
        constraints: each,
    }
}

fn explain_strategy(
    toggle: &Toggle,
    strategy: &Strategy,
    state: &ConfigState,
    segments: &[Value],
    context: &Context,
) -> PlaygroundStrategy {
    let client = serde_json::to_value(ClientStrategy::new(strategy, SegmentForm::ByReference))
        .unwrap_or(Value::Null);
    let constraints: Vec<ConstraintResult> = client["constraints"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| constraint_result(&toggle.name, c, context))
                .collect()
        })
        .unwrap_or_default();
    let segment_results: Vec<SegmentResult> = strategy
        .segments
        .iter()
        .map(|id| {
            explain_segment(
                &toggle.name,
                *id,
                state.segments.get(&id.to_string()).map(|s| &**s),
                context,
            )
        })
        .collect();
    let enabled =
        !strategy.disabled && probe(&toggle.name, vec![client.clone()], segments, context);
    PlaygroundStrategy {
        id: strategy.id.to_string(),
        name: strategy.name.to_string(),
        title: strategy.title.as_ref().map(|t| t.to_string()),
        disabled: strategy.disabled,
        parameters: client["parameters"].clone(),
        result: StrategyResult {
            enabled,
            evaluation_status: "complete",
        },
        constraints,
        segments: segment_results,
    }
}

/// Every toggle `scope` sees in `engine`'s environment, evaluated and explained for `context`.
pub fn explain(
    state: &ConfigState,
    engine: &EnvironmentEngine,
    scope: &Scope<'_>,
    context: &Context,
) -> Vec<PlaygroundFeature> {
    let segments: Vec<Value> = state
        .segments
        .values()
        .filter_map(|s| serde_json::to_value(ClientSegment::new(s)).ok())
        .collect();
    engine
        .toggles()
        .iter()
        .filter(|facts| scope.sees(&facts.project))
        .filter_map(|facts| {
            let toggle = state.features.get(&*facts.name)?;
            let config = toggle.environment(scope.environment);
            let evaluation = engine.evaluate(&facts.name, context);
            let data: Vec<PlaygroundStrategy> = config
                .strategies
                .iter()
                .map(|s| explain_strategy(toggle, s, state, &segments, context))
                .collect();
            let enabled_strategies: Vec<Value> = config
                .strategies
                .iter()
                .filter(|s| !s.disabled)
                .filter_map(|s| {
                    serde_json::to_value(ClientStrategy::new(s, SegmentForm::ByReference)).ok()
                })
                .collect();
            let strategies_pass = probe(&toggle.name, enabled_strategies, &segments, context);
            let variant = evaluation.variant;
            Some(PlaygroundFeature {
                name: facts.name.to_string(),
                project_id: facts.project.to_string(),
                is_enabled: evaluation.enabled,
                is_enabled_in_current_environment: config.enabled,
                has_unsatisfied_dependency: config.enabled
                    && strategies_pass
                    && !evaluation.enabled
                    && !toggle.dependencies.is_empty(),
                variant: PlaygroundVariant {
                    name: variant.name().to_string(),
                    enabled: variant.enabled(),
                    payload: variant.payload().map(|p| FrontendPayload {
                        kind: p.payload_type.clone(),
                        value: p.value.clone(),
                    }),
                },
                strategies: PlaygroundStrategies {
                    result: strategies_pass,
                    data,
                },
            })
        })
        .collect()
}
