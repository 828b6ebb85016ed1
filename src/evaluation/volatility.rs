//! Which answers can change with nothing but the clock or chance. An ETag made before
//! evaluating — from the configuration, the scope and the context — says "the same answer"
//! only when the answer is a function of those; for the others the ETag is taken from the
//! evaluated body instead (a re-poll then costs an evaluation, as in Unleash).

use crate::domain::config_state::ConfigState;
use crate::domain::constraint::{Constraint, Operator};
use crate::domain::feature_strategy::Strategy;
use crate::domain::text::Text;
use crate::domain::toggle::Toggle;

use super::context::EvaluationContext;

/// How one environment's answers may vary for one context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Volatility {
    /// A `DATE_AFTER`/`DATE_BEFORE` constraint applies: the engine reads the clock when the
    /// context has no `currentTime`.
    pub clock: bool,
    /// Chance decides whatever the context: `gradualRolloutRandom`, `random` stickiness.
    pub chance: bool,
    /// Chance decides when the context has neither `userId` nor `sessionId`: `default`
    /// stickiness (a rollout's, a variant's) falls back to random then.
    pub chance_without_identity: bool,
}

impl Volatility {
    /// What the enabled toggles of `environment` in `state` depend on besides the context.
    #[cfg(test)]
    pub fn of(state: &ConfigState, environment: &str) -> Self {
        state
            .features
            .values()
            .fold(Self::default(), |sum, toggle| {
                sum.with(Self::of_toggle(state, toggle, environment))
            })
    }

    /// What `toggle`, if enabled in `environment`, depends on besides the context
    /// (`state` holds the segments it names).
    pub fn of_toggle(state: &ConfigState, toggle: &Toggle, environment: &str) -> Self {
        let mut volatility = Self::default();
        let config = toggle.environment(environment);
        if !config.enabled {
            return volatility;
        }
        for strategy in config.strategies.iter().filter(|s| !s.disabled) {
            volatility.add_strategy(state, strategy);
        }
        for variant in &config.variants {
            volatility.add_stickiness(Some(variant.stickiness.as_str()));
        }
        volatility
    }

    /// Either's dependencies.
    pub fn with(self, other: Self) -> Self {
        Self {
            clock: self.clock || other.clock,
            chance: self.chance || other.chance,
            chance_without_identity: self.chance_without_identity || other.chance_without_identity,
        }
    }

    fn add_strategy(&mut self, state: &ConfigState, strategy: &Strategy) {
        match strategy.name.as_str() {
            "gradualRolloutRandom" => self.chance = true,
            "flexibleRollout" => {
                self.add_stickiness(strategy.parameters.get("stickiness").map(Text::as_str))
            }
            _ => {}
        }
        for variant in &strategy.variants {
            self.add_stickiness(variant.stickiness.as_ref().map(Text::as_str));
        }
        let segments = strategy
            .segments
            .iter()
            .filter_map(|id| state.segments.get(&id.to_string()));
        let constraints = strategy
            .constraints
            .iter()
            .chain(segments.flat_map(|s| s.constraints.iter()));
        self.clock |= constraints.into_iter().any(reads_the_clock);
    }

    fn add_stickiness(&mut self, stickiness: Option<&str>) {
        match stickiness {
            Some("random") => self.chance = true,
            None | Some("default" | "") => self.chance_without_identity = true,
            Some(_) => {}
        }
    }

    /// Whether the answer for `context` may differ from one evaluation to the next with the
    /// configuration unchanged.
    pub fn varies_for(&self, context: &EvaluationContext<'_>) -> bool {
        (self.clock && context.field("currentTime").is_none())
            || self.chance
            || (self.chance_without_identity
                && context.field("userId").is_none()
                && context.field("sessionId").is_none())
    }
}

fn reads_the_clock(constraint: &Constraint) -> bool {
    matches!(
        constraint.operator,
        Operator::DateAfter | Operator::DateBefore
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::toggle::Toggle;
    use serde_json::json;
    use std::sync::Arc;

    fn state_with(strategies: serde_json::Value) -> ConfigState {
        let toggle: Toggle = serde_json::from_value(json!({
            "name": "t", "description": "", "type": "release", "project": "default",
            "stale": false, "createdAt": "2026-01-01T00:00:00Z",
            "environments": {"default": {"enabled": true, "strategies": strategies}}
        }))
        .expect("a toggle");
        let mut state = ConfigState::default();
        state.features.insert("t".into(), Arc::new(toggle));
        state
    }

    fn context(fields: serde_json::Value) -> EvaluationContext<'static> {
        EvaluationContext::from_json_body(fields.to_string().as_bytes()).expect("a context")
    }

    #[test]
    fn the_clock_and_chance_are_found() {
        let fixed = state_with(json!([{"name": "default", "parameters": {}}]));
        let anyone = context(json!({}));
        assert!(!Volatility::of(&fixed, "default").varies_for(&anyone));
        let dated = state_with(
            json!([{"name": "default", "parameters": {}, "constraints": [
            {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2026-01-01T00:00:00Z"}]}]),
        );
        let volatility = Volatility::of(&dated, "default");
        assert!(volatility.varies_for(&anyone));
        assert!(!volatility.varies_for(&context(json!({"currentTime": "2026-06-01T00:00:00Z"}))));
        let rollout = state_with(json!([{"name": "flexibleRollout",
            "parameters": {"rollout": "50", "stickiness": "default", "groupId": "t"}}]));
        let volatility = Volatility::of(&rollout, "default");
        assert!(volatility.varies_for(&anyone));
        assert!(!volatility.varies_for(&context(json!({"userId": "u1"}))));
        let random = state_with(
            json!([{"name": "gradualRolloutRandom", "parameters": {"percentage": "50"}}]),
        );
        assert!(Volatility::of(&random, "default").varies_for(&context(json!({"userId": "u1"}))));
        // Another environment's toggles say nothing of this one.
        assert!(!Volatility::of(&random, "production").varies_for(&anyone));
    }
}
