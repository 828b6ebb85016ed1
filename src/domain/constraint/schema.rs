//! The JSON Schema of a constraint as admin writes send it (the OpenAPI document's).

use super::{ConstraintSpec, Operand, Operator, VALUE_MAX};

/// An IPv4 address with an optional prefix length (0 to 32), in the form std's `Ipv4Addr`
/// reads (no leading zeros).
const IPV4_BLOCK_PATTERN: &str = "((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(/(3[0-2]|[12]?[0-9]))?";
/// The characters of an IPv6 address (with a colon) and an optional prefix length (0 to
/// 128): the precise grammar is long, and the server checks it.
const IPV6_BLOCK_PATTERN: &str = "[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(/(12[0-8]|1[01][0-9]|[1-9]?[0-9]))?";

/// What [`ConstraintSpec::validate`] checks, as a JSON Schema: one shape per kind of operand
/// (list operators take `values`, the others one `value` in their format). Stricter than the
/// check in two corners a pattern cannot follow: a date's day must exist in every year (no
/// 29 February) and a number's exponent has at most two digits (so it stays finite). Looser in
/// two: a regular expression must compile, and an IPv6 address must be one.
pub(super) fn constraint_spec_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use serde_json::{json, Value};
    let names = |operand: Operand| -> Vec<&'static str> {
        Operator::ALL
            .iter()
            .filter(|o| o.operand() == Some(operand))
            .map(Operator::as_str)
            .collect()
    };
    // One branch: the fields every constraint has, with the operator, `values` and `value` of
    // one kind of operand.
    let branch = |operand: Operand, values: Value, value: Value| {
        let needs = if operand.is_list() { "values" } else { "value" };
        let inverted = if operand == Operand::Regex {
            json!({"type": ["boolean", "null"], "enum": [false, null],
                "description": "`REGEX` cannot be inverted (Unleash refuses it)"})
        } else {
            json!({"type": ["boolean", "null"]})
        };
        json!({
            "type": "object",
            "required": ["contextName", "operator", needs],
            "properties": {
                "contextName": {"type": "string", "minLength": 1, "example": "userId",
                    "description": "An existing context field (the built-in ones always exist)"},
                "operator": {"type": "string", "enum": names(operand)},
                "values": values,
                "value": value,
                "inverted": inverted,
                "caseInsensitive": {"type": ["boolean", "null"],
                    "description": "Honoured by the `STR_*` operators and `REGEX`"},
            },
            "additionalProperties": false,
        })
    };
    let no_value = json!({"type": ["string", "null"], "maxLength": 0,
        "description": "Empty or absent: list operators compare with `values`"});
    let no_values = json!({"type": ["array", "null"], "maxItems": 0, "items": {"type": "string"},
        "description": "Empty or absent: this operator compares with `value`"});
    // At most VALUE_MAX characters, no trailing backslash (see `TRAILING_BACKSLASH`).
    let single = |pattern: &str, example: &str, description: &str| {
        json!({"type": "string", "minLength": 1, "maxLength": VALUE_MAX, "pattern": pattern,
            "example": example, "description": description})
    };
    crate::domain::schema::one_of(
        "A constraint: an existing context field, an operator, and `values` (list operators) \
         or `value` (the others) in the operator's format",
        vec![
            branch(
                Operand::Strings,
                json!({"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1,
                    "maxLength": VALUE_MAX, "pattern": "[^\\\\]$"}}),
                no_value.clone(),
            ),
            branch(
                Operand::Cidrs,
                json!({"type": "array", "minItems": 1, "example": ["10.0.0.0/8", "2001:db8::/32"],
                    "items": {"type": "string", "minLength": 1, "maxLength": VALUE_MAX,
                        "pattern": format!("^({IPV4_BLOCK_PATTERN}|{IPV6_BLOCK_PATTERN})$"),
                        "description": "An IPv4 or IPv6 address, optionally with a prefix \
                            length (a CIDR block such as 10.0.0.0/8)"}}),
                no_value,
            ),
            branch(
                Operand::Number,
                no_values.clone(),
                single(
                    "^[+-]?[0-9]+(\\.[0-9]*)?([eE][+-]?[0-9]{1,2})?$",
                    "42",
                    "A number such as 42, -1.5 or 2e3",
                ),
            ),
            branch(
                Operand::Date,
                no_values.clone(),
                single(
                    "^[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{3})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$",
                    "2026-01-31T12:00:00Z",
                    "A date and time: `YYYY-MM-DDTHH:MM:SS`, optionally `.sss`, then `Z` or `±HH:MM`",
                ),
            ),
            branch(
                Operand::Semver,
                no_values.clone(),
                single(
                    "^(0|[1-9][0-9]{0,17})\\.(0|[1-9][0-9]{0,17})\\.(0|[1-9][0-9]{0,17})(-(0|[1-9][0-9]{0,17}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\\.(0|[1-9][0-9]{0,17}|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\\+[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?$",
                    "1.2.3",
                    "A semantic version such as 1.2.3",
                ),
            ),
            branch(
                Operand::Regex,
                no_values,
                single(
                    "[^\\\\]$",
                    "^[^@]+@example\\.com$",
                    "A regular expression that compiles (the syntax of Rust's `regex` crate, \
                     which the SDKs' RE2-family engines share)",
                ),
            ),
        ],
    )
}

impl utoipa::PartialSchema for ConstraintSpec {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        constraint_spec_schema()
    }
}

impl utoipa::ToSchema for ConstraintSpec {}
