//! JSON Schemas written out by hand, for the input documents whose rules tie fields together
//! (an operator and its operand, a provider and its parameters), which derive attributes cannot
//! say.

use utoipa::openapi::schema::{OneOfBuilder, Schema};
use utoipa::openapi::RefOr;

/// The schema `value` spells. `value` is a literal of this crate, so a failure is a bug that
/// the unit tests below and the OpenAPI tests catch; it yields an empty (open) schema rather
/// than a panic at start-up.
pub fn from_json(value: serde_json::Value) -> RefOr<Schema> {
    serde_json::from_value(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "a hand-written JSON schema does not parse");
        RefOr::T(Schema::default())
    })
}

/// Exactly one of `branches` (each an object schema for [`from_json`]; utoipa's object schema
/// has no `oneOf` of its own, so the choice is the outer schema).
pub fn one_of(description: &str, branches: Vec<serde_json::Value>) -> RefOr<Schema> {
    let builder = OneOfBuilder::new().description(Some(description));
    let choice = branches
        .into_iter()
        .fold(builder, |builder, branch| builder.item(from_json(branch)))
        .build();
    RefOr::T(Schema::OneOf(choice))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// utoipa reads these schemas through untagged enums: what it serialises must be what was
    /// written, or a keyword was lost on the way.
    #[test]
    fn schemas_survive_the_round_trip() {
        let value = json!({
            "type": "object",
            "required": ["a"],
            "properties": {
                "a": {"type": "string", "enum": ["x", "y"], "pattern": "^x", "maxLength": 3},
                "b": {"type": ["array", "null"], "maxItems": 0, "items": {"type": "string"}},
            },
            "additionalProperties": false,
        });
        let schema = from_json(value.clone());
        assert_eq!(serde_json::to_value(&schema).expect("serialises"), value);
        let choice = one_of("d", vec![value.clone()]);
        assert_eq!(
            serde_json::to_value(&choice).expect("serialises"),
            json!({"oneOf": [value], "description": "d"})
        );
    }
}
