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

use super::engine::{typed_payload, EnvironmentEngine, Evaluation, ToggleFacts};
use super::frontend::Scope;

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

/// Evaluates the toggle `facts` names for `context`, as OFREP answers it: the typed form of
/// `flag_json` (the documented schema, and what the tests compare it with).
pub fn evaluate(
    engine: &EnvironmentEngine,
    facts: &ToggleFacts,
    context: &Context,
) -> OfrepEvaluation {
    let evaluation = engine.evaluate(&facts.name, context);
    let variant = &evaluation.variant;
    let mut metadata = Map::new();
    metadata.insert("enabled".into(), Value::Bool(evaluation.enabled));
    metadata.insert("project".into(), Value::String(facts.project.to_string()));
    metadata.insert("impressionData".into(), Value::Bool(facts.impression_data));
    if let Some(payload) = variant.payload() {
        metadata.insert(
            "payloadType".into(),
            Value::String(payload.payload_type.clone()),
        );
        metadata.insert("payloadValue".into(), Value::String(payload.value.clone()));
    }
    OfrepEvaluation {
        key: facts.name.to_string(),
        value: value(facts, &evaluation),
        reason: reason(facts, &evaluation),
        variant: variant.name().to_string(),
        metadata,
    }
}

/// The flag's `value` (see the module's mapping).
fn value(facts: &ToggleFacts, evaluation: &Evaluation<'_>) -> Option<Value> {
    match (facts.has_payloads, evaluation.variant.payload()) {
        (false, _) => Some(Value::Bool(evaluation.enabled)),
        (true, Some(payload)) if evaluation.enabled => Some(typed_payload(payload)),
        (true, _) => None,
    }
}

/// The flag's `reason` (see the module's mapping).
fn reason(facts: &ToggleFacts, evaluation: &Evaluation<'_>) -> &'static str {
    if !facts.on_in_environment {
        "DISABLED"
    } else if evaluation.enabled && evaluation.variant.enabled() {
        "SPLIT"
    } else if facts.static_rollout {
        "STATIC"
    } else {
        "TARGETING_MATCH"
    }
}

/// One flag's answer as JSON: what `evaluate` serialises to.
pub fn flag_json(engine: &EnvironmentEngine, facts: &ToggleFacts, context: &Context) -> Vec<u8> {
    let mut out = Vec::with_capacity(192);
    write_evaluation(&mut out, facts, &engine.evaluate(&facts.name, context));
    out
}

/// The bulk answer's JSON for every flag `scope` sees: what `OfrepBulk` serialises to, written
/// from each toggle's pre-escaped name, so that no map is built per flag.
pub fn bulk_json(engine: &EnvironmentEngine, scope: &Scope<'_>, context: &Context) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + engine.toggles().len() * 160);
    out.extend_from_slice(br#"{"flags":["#);
    let mut first = true;
    for (at, facts) in engine.toggles().iter().enumerate() {
        if !scope.sees(&facts.project) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_evaluation(&mut out, facts, &engine.evaluate_at(at, context));
    }
    out.extend_from_slice(b"]}");
    out
}

/// Writes one flag's answer, its fields in `OfrepEvaluation`'s order.
fn write_evaluation(out: &mut Vec<u8>, facts: &ToggleFacts, evaluation: &Evaluation<'_>) {
    let variant = &evaluation.variant;
    out.extend_from_slice(br#"{"key":"#);
    out.extend_from_slice(facts.name_json());
    match (facts.has_payloads, variant.payload()) {
        (false, _) => {
            out.extend_from_slice(br#","value":"#);
            out.extend_from_slice(json_bool(evaluation.enabled));
        }
        (true, Some(payload)) if evaluation.enabled => {
            out.extend_from_slice(br#","value":"#);
            // Serialising plain data into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, &typed_payload(payload));
        }
        (true, _) => {}
    }
    out.extend_from_slice(br#","reason":""#);
    out.extend_from_slice(reason(facts, evaluation).as_bytes());
    out.extend_from_slice(br#"","variant":"#);
    let _ = serde_json::to_writer(&mut *out, variant.name());
    out.extend_from_slice(br#","metadata":{"enabled":"#);
    out.extend_from_slice(json_bool(evaluation.enabled));
    out.extend_from_slice(br#","project":"#);
    let _ = serde_json::to_writer(&mut *out, &*facts.project);
    out.extend_from_slice(br#","impressionData":"#);
    out.extend_from_slice(json_bool(facts.impression_data));
    if let Some(payload) = variant.payload() {
        out.extend_from_slice(br#","payloadType":"#);
        let _ = serde_json::to_writer(&mut *out, payload.payload_type.as_str());
        out.extend_from_slice(br#","payloadValue":"#);
        let _ = serde_json::to_writer(&mut *out, payload.value.as_str());
    }
    out.extend_from_slice(b"}}");
}

/// `true` or `false`.
fn json_bool(value: bool) -> &'static [u8] {
    if value {
        b"true"
    } else {
        b"false"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::engine_tests::engine_of;
    use serde_json::json;

    #[test]
    fn the_written_answers_are_the_typed_answers_serialised() {
        let on = |strategies: Value, variants: Value| json!({"default": {"enabled": true, "strategies": strategies, "variants": variants}});
        let everyone = json!([{"name": "default"}]);
        let variant = |name: &str, payload: Value| {
            json!({"name": name, "weight": 500, "weightType": "variable",
                   "stickiness": "default", "payload": payload})
        };
        let engine = engine_of(json!([
            {"name": "plain", "project": "a", "environments": on(everyone.clone(), json!([]))},
            {"name": "quote\"back\\slash ü\u{1}", "project": "p\"q", "impressionData": true,
             "environments": on(everyone.clone(), json!([]))},
            {"name": "off", "project": "a",
             "environments": {"default": {"enabled": false, "strategies": everyone.clone()}}},
            {"name": "json", "project": "b", "environments": on(everyone.clone(), json!([
                variant("blue\"", json!({"type": "json", "value": "{\"c\":[1,\"b\"]}"})),
                variant("green", json!({"type": "json", "value": "not json"}))]))},
            {"name": "number", "project": "b", "environments": on(everyone.clone(), json!([
                variant("one", json!({"type": "number", "value": "1.5"})),
                variant("two", json!({"type": "number", "value": " 2 "}))]))},
            {"name": "text", "project": "b", "environments": on(json!([
                {"name": "flexibleRollout", "parameters":
                    {"rollout": "50", "stickiness": "default", "groupId": "t"}}]), json!([
                variant("x", json!({"type": "string", "value": "é\n"})),
                {"name": "none", "weight": 500, "weightType": "variable", "stickiness": "default"}]))},
            {"name": "rollout", "project": "b", "environments": on(json!([
                {"name": "flexibleRollout", "parameters":
                    {"rollout": "50", "stickiness": "default", "groupId": "r"}}]), json!([]))},
        ]));
        let projects = ["a".to_string(), "p\"q".to_string()];
        for user in ["u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"] {
            let context = Context {
                user_id: Some(user.into()),
                ..Context::default()
            };
            for projects in [None, Some(&projects[..]), Some(&[][..])] {
                let scope = Scope {
                    environment: "default",
                    projects,
                };
                let typed = OfrepBulk {
                    flags: engine
                        .toggles()
                        .iter()
                        .filter(|facts| scope.sees(&facts.project))
                        .map(|facts| evaluate(&engine, facts, &context))
                        .collect(),
                };
                assert_eq!(
                    String::from_utf8_lossy(&bulk_json(&engine, &scope, &context)),
                    String::from_utf8_lossy(&serde_json::to_vec(&typed).expect("json")),
                    "{user}, {projects:?}"
                );
            }
            for facts in engine.toggles() {
                let typed = serde_json::to_vec(&evaluate(&engine, facts, &context)).expect("json");
                assert_eq!(
                    String::from_utf8_lossy(&flag_json(&engine, facts, &context)),
                    String::from_utf8_lossy(&typed),
                    "{user}, {}",
                    facts.name
                );
            }
        }
    }
}
