//! OFREP (OpenFeature Remote Evaluation Protocol 0.3.0) answers from an Unleash evaluation.
//!
//! The mapping (docs/api.md says the same):
//! - `value`: whether the toggle is on (a boolean) — unless some variant of the toggle carries
//!   a payload (a "typed" toggle, read with `getStringValue`/`getNumberValue`/
//!   `getObjectValue`): then the chosen variant's payload, typed (`string` → string, `number`
//!   → number, `json` → the parsed value, `csv` → string), and no `value` at all when the
//!   toggle is off or its variant has no payload (OFREP's "code default": the caller's default
//!   applies);
//! - `variant`: always present: the Unleash variant's name, `disabled` when none;
//! - `reason`: `DISABLED` (the toggle is off in the environment), `SPLIT` (on, with a variant
//!   chosen by weight), `STATIC` (on through unconstrained `default` strategies only, or no
//!   strategies), else `TARGETING_MATCH` (strategies, constraints or segments decided);
//! - `metadata`: `enabled` (the boolean, always), `project`, `impressionData`, and for a
//!   payload `payloadType` and `payloadValue` (its text).

use serde::Serialize;
use serde_json::{Map, Value};
use unleash_types::client_features::Context;

use super::engine::{typed_payload, EnvironmentEngine, ToggleFacts};

/// An OFREP error code (OpenFeature's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// 400: the body is not JSON.
    ParseError,
    /// 400: not a context.
    InvalidContext,
    /// 400: a targeting key is needed (never: Unleash evaluates without one).
    TargetingKeyMissing,
    /// 404: no such flag in the caller's scope.
    FlagNotFound,
    /// Anything else (401, 403, 429, 5xx).
    General,
}

/// One flag's successful evaluation.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OfrepEvaluation {
    pub key: String,
    /// The flag's value (see the module's mapping); absent: the caller's default applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Any JSON: a boolean, a string, a number or an object.
    #[schema(value_type = Option<Value>)]
    pub value: Option<Value>,
    /// `STATIC`, `TARGETING_MATCH`, `SPLIT` or `DISABLED`.
    pub reason: &'static str,
    /// The Unleash variant's name (`disabled` when none).
    pub variant: String,
    /// `enabled`, `project`, `impressionData`, and `payloadType`/`payloadValue` for a payload.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
}

/// One flag's failure (in the bulk answer, or as a whole error body).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OfrepFailure {
    /// The flag (empty when the failure is the whole request's).
    pub key: String,
    pub error_code: ErrorCode,
    pub error_details: String,
}

/// The bulk answer: every flag the caller sees.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OfrepBulk {
    pub flags: Vec<OfrepEvaluation>,
}

/// Evaluates the toggle `facts` names for `context`, as OFREP answers it.
pub fn evaluate(
    engine: &EnvironmentEngine,
    facts: &ToggleFacts,
    context: &Context,
) -> OfrepEvaluation {
    let evaluation = engine.evaluate(&facts.name, context);
    let variant = &evaluation.variant;
    let mut metadata = Map::new();
    metadata.insert("enabled".into(), Value::Bool(evaluation.enabled));
    metadata.insert("project".into(), Value::String(facts.project.clone()));
    metadata.insert("impressionData".into(), Value::Bool(facts.impression_data));
    if let Some(payload) = variant.payload() {
        metadata.insert(
            "payloadType".into(),
            Value::String(payload.payload_type.clone()),
        );
        metadata.insert("payloadValue".into(), Value::String(payload.value.clone()));
    }
    let value = match (facts.has_payloads, variant.payload()) {
        (false, _) => Some(Value::Bool(evaluation.enabled)),
        (true, Some(payload)) if evaluation.enabled => Some(typed_payload(payload)),
        (true, _) => None,
    };
    let reason = if !facts.on_in_environment {
        "DISABLED"
    } else if evaluation.enabled && variant.enabled() {
        "SPLIT"
    } else if facts.static_rollout {
        "STATIC"
    } else {
        "TARGETING_MATCH"
    };
    OfrepEvaluation {
        key: facts.name.clone(),
        value,
        reason,
        variant: variant.name().to_string(),
        metadata,
    }
}
