//! Strategy constraints: a context field, an operator and the value(s) it compares with
//! (spec §2.3 plus the operators today's Unleash SDKs evaluate), and the rules that check them.

use serde::{Deserialize, Serialize};

use super::context_field::ContextField;
use super::error::ValidationErrors;
use super::exact_capacity;
use super::fields::{refuse_unsupported, ExtraFields};
use super::text::Text;

/// Longest value a constraint may compare with (API-FACTS §11.2).
const VALUE_MAX: usize = 100;

/// A rule on a context field that must hold for its strategy to apply. Stored and served
/// exactly as written: optional fields stay absent when they were not sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Constraint {
    #[schema(value_type = String)]
    pub context_name: Text,
    pub operator: Operator,
    /// The values of list operators (`IN`, `NOT_IN`, `STR_*`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "exact_capacity::option_vec"
    )]
    #[schema(value_type = Option<Vec<String>>)]
    pub values: Option<Vec<Text>>,
    /// The value of single-value operators (`NUM_*`, `DATE_*`, `SEMVER_*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub value: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inverted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_insensitive: Option<bool>,
}

/// Constraint operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Operator {
    In,
    NotIn,
    StrContains,
    StrStartsWith,
    StrEndsWith,
    NumEq,
    NumGt,
    NumGte,
    NumLt,
    NumLte,
    DateAfter,
    DateBefore,
    SemverEq,
    SemverGt,
    SemverLt,
}

/// What an operator compares with, which decides `values` versus `value` and their format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// A list of strings in `values`.
    Strings,
    /// A number in `value`.
    Number,
    /// An RFC 3339 timestamp in `value`.
    Date,
    /// A semantic version in `value`.
    Semver,
}

impl Operator {
    /// Every operator, in the order error messages list them.
    pub const ALL: [Operator; 15] = [
        Operator::In,
        Operator::NotIn,
        Operator::StrContains,
        Operator::StrStartsWith,
        Operator::StrEndsWith,
        Operator::NumEq,
        Operator::NumGt,
        Operator::NumGte,
        Operator::NumLt,
        Operator::NumLte,
        Operator::DateAfter,
        Operator::DateBefore,
        Operator::SemverEq,
        Operator::SemverGt,
        Operator::SemverLt,
    ];

    /// The operator's wire name, e.g. `NUM_GTE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "IN",
            Operator::NotIn => "NOT_IN",
            Operator::StrContains => "STR_CONTAINS",
            Operator::StrStartsWith => "STR_STARTS_WITH",
            Operator::StrEndsWith => "STR_ENDS_WITH",
            Operator::NumEq => "NUM_EQ",
            Operator::NumGt => "NUM_GT",
            Operator::NumGte => "NUM_GTE",
            Operator::NumLt => "NUM_LT",
            Operator::NumLte => "NUM_LTE",
            Operator::DateAfter => "DATE_AFTER",
            Operator::DateBefore => "DATE_BEFORE",
            Operator::SemverEq => "SEMVER_EQ",
            Operator::SemverGt => "SEMVER_GT",
            Operator::SemverLt => "SEMVER_LT",
        }
    }

    /// The operator with this wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// What the operator compares with.
    pub fn operand(self) -> Operand {
        match self {
            Operator::In
            | Operator::NotIn
            | Operator::StrContains
            | Operator::StrStartsWith
            | Operator::StrEndsWith => Operand::Strings,
            Operator::NumEq
            | Operator::NumGt
            | Operator::NumGte
            | Operator::NumLt
            | Operator::NumLte => Operand::Number,
            Operator::DateAfter | Operator::DateBefore => Operand::Date,
            Operator::SemverEq | Operator::SemverGt | Operator::SemverLt => Operand::Semver,
        }
    }

    /// Whether a context field's legal values bound what the operator compares with: they do
    /// for membership and single-value operators; a substring (`STR_*`) need not be one.
    fn bounded_by_legal_values(self) -> bool {
        !matches!(
            self,
            Operator::StrContains | Operator::StrStartsWith | Operator::StrEndsWith
        )
    }
}

/// A constraint as sent by a client.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConstraintSpec {
    pub context_name: Option<String>,
    pub operator: Option<String>,
    pub values: Option<Vec<Text>>,
    pub value: Option<String>,
    pub inverted: Option<bool>,
    pub case_insensitive: Option<bool>,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

/// What [`ConstraintSpec::validate`] checks, as a JSON Schema: one shape per kind of operand
/// (list operators take `values`, the others one `value` in their format). Stricter than the
/// check in two corners a pattern cannot follow: a date's day must exist in every year (no
/// 29 February) and a number's exponent has at most two digits (so it stays finite).
fn constraint_spec_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use serde_json::{json, Value};
    let names = |operand: Operand| -> Vec<&'static str> {
        Operator::ALL
            .iter()
            .filter(|o| o.operand() == operand)
            .map(|o| o.as_str())
            .collect()
    };
    // One branch: the fields every constraint has, with the operator, `values` and `value` of
    // one kind of operand.
    let branch = |operand: Operand, values: Value, value: Value| {
        let needs = if operand == Operand::Strings {
            "values"
        } else {
            "value"
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
                "inverted": {"type": ["boolean", "null"]},
                "caseInsensitive": {"type": ["boolean", "null"],
                    "description": "Honoured by the `STR_*` operators"},
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
                no_values,
                single(
                    "^(0|[1-9][0-9]{0,17})\\.(0|[1-9][0-9]{0,17})\\.(0|[1-9][0-9]{0,17})(-(0|[1-9][0-9]{0,17}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\\.(0|[1-9][0-9]{0,17}|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\\+[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?$",
                    "1.2.3",
                    "A semantic version such as 1.2.3",
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

impl ConstraintSpec {
    /// Checks the constraint on its own (the context field is checked against the
    /// configuration later, see [`Constraint::check_field`]); problems go to `errors` under
    /// `path`.
    pub fn validate(self, path: &str, errors: &mut ValidationErrors) -> Option<Constraint> {
        let before = errors.0.len();
        refuse_unsupported(&self.extra, path, &[], errors);
        let context_name = self.context_name.unwrap_or_default();
        if context_name.is_empty() {
            errors.push(format!("{path}.contextName"), "\"contextName\" is required");
        }
        let operator = match self.operator.as_deref() {
            Some(name) => Operator::from_name(name),
            None => None,
        };
        match operator {
            None => {
                let known: Vec<_> = Operator::ALL.iter().map(|o| o.as_str()).collect();
                errors.push(
                    format!("{path}.operator"),
                    format!("\"operator\" must be one of [{}]", known.join(", ")),
                );
            }
            Some(op) if op.operand() == Operand::Strings => {
                check_values(self.values.as_deref(), path, op, errors);
                // The Unleash UI sends an empty `value` with list operators.
                if self.value.as_deref().is_some_and(|v| !v.is_empty()) {
                    errors.push(
                        format!("{path}.value"),
                        format!(
                            "{} compares with a list: send \"values\", not \"value\"",
                            op.as_str()
                        ),
                    );
                }
            }
            Some(op) => {
                check_value(self.value.as_deref(), path, op, errors);
                if self.values.as_ref().is_some_and(|v| !v.is_empty()) {
                    errors.push(
                        format!("{path}.values"),
                        format!(
                            "{} compares with one value: send \"value\", not \"values\"",
                            op.as_str()
                        ),
                    );
                }
            }
        }
        let operator = operator?;
        (errors.0.len() == before).then_some(Constraint {
            context_name: context_name.into(),
            operator,
            values: self.values,
            value: self.value.map(Text::from),
            inverted: self.inverted,
            case_insensitive: self.case_insensitive,
        })
    }
}

fn check_values(values: Option<&[Text]>, path: &str, op: Operator, errors: &mut ValidationErrors) {
    match values {
        None | Some([]) => errors.push(
            format!("{path}.values"),
            format!("{} needs \"values\" with at least 1 item", op.as_str()),
        ),
        Some(values) => {
            for (i, v) in values.iter().enumerate() {
                if v.is_empty() || v.chars().count() > VALUE_MAX {
                    errors.push(
                        format!("{path}.values[{i}]"),
                        format!("\"values\" items must be 1 to {VALUE_MAX} characters long"),
                    );
                } else if v.ends_with('\\') {
                    errors.push(format!("{path}.values[{i}]"), TRAILING_BACKSLASH);
                }
            }
        }
    }
}

/// The SDKs that evaluate with Unleash's rule engine (Rust, Python) cannot read a string that
/// ends in a backslash: it escapes their closing quote, and the whole toggle evaluates false.
const TRAILING_BACKSLASH: &str =
    "values must not end with a backslash (Unleash SDKs cannot read it)";

/// A number as the SDKs' rule grammar reads it: `[+-]digits[.digits][e[+-]digits]`, finite.
fn is_sdk_number(value: &str) -> bool {
    fn unsigned(s: &str) -> &str {
        s.strip_prefix(['+', '-']).unwrap_or(s)
    }
    fn digits(s: &str) -> (usize, &str) {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        (n, &s[n..])
    }
    let (whole, mut rest) = digits(unsigned(value));
    if whole == 0 {
        return false;
    }
    if let Some(fraction) = rest.strip_prefix('.') {
        rest = digits(fraction).1;
    }
    if let Some(exponent) = rest.strip_prefix(['e', 'E']) {
        let (n, tail) = digits(unsigned(exponent));
        if n == 0 {
            return false;
        }
        rest = tail;
    }
    rest.is_empty() && value.parse::<f64>().is_ok_and(f64::is_finite)
}

/// A date as the SDKs' rule grammar reads it — `YYYY-MM-DDTHH:MM:SS`, optionally `.sss`
/// (exactly three digits), then `Z` or `±HH:MM` — and a real instant (no leap second).
fn is_sdk_date(value: &str) -> bool {
    let shape: Vec<u8> = value
        .bytes()
        .map(|b| if b.is_ascii_digit() { b'9' } else { b })
        .collect();
    let (main, zone) = match shape.len() {
        20 | 24 => shape.split_at(shape.len() - 1),
        25 | 29 => shape.split_at(shape.len() - 6),
        _ => return false,
    };
    let main_ok = main == b"9999-99-99T99:99:99" || main == b"9999-99-99T99:99:99.999";
    let zone_ok = zone == b"Z" || zone == b"+99:99" || zone == b"-99:99";
    main_ok
        && zone_ok
        // chrono reads second 60 as a leap second; Node's `Date` reads it as no date at all.
        && chrono::DateTime::parse_from_rfc3339(value)
            .is_ok_and(|t| chrono::Timelike::nanosecond(&t) < 1_000_000_000)
}

fn check_value(value: Option<&str>, path: &str, op: Operator, errors: &mut ValidationErrors) {
    let field = format!("{path}.value");
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        errors.push(field, format!("{} needs a \"value\"", op.as_str()));
        return;
    };
    let problem = match op.operand() {
        Operand::Number => (!is_sdk_number(value)).then(|| {
            format!(
                "{} needs a number such as 42, -1.5 or 2e3, got \"{value}\"",
                op.as_str()
            )
        }),
        Operand::Date => (!is_sdk_date(value)).then(|| {
            format!(
                "{} needs a date and time such as 2026-01-31T12:00:00Z or \
                 2026-01-31T12:00:00.000+02:00, got \"{value}\"",
                op.as_str()
            )
        }),
        Operand::Semver => semver::Version::parse(value).err().map(|e| {
            format!(
                "{} needs a semantic version such as 1.2.3, got \"{value}\" ({e})",
                op.as_str()
            )
        }),
        Operand::Strings => None,
    };
    if let Some(message) = problem {
        errors.push(field, message);
    } else if value.ends_with('\\') {
        errors.push(field, TRAILING_BACKSLASH);
    } else if value.chars().count() > VALUE_MAX {
        errors.push(
            field,
            format!("\"value\" must be at most {VALUE_MAX} characters long"),
        );
    }
}

impl Constraint {
    /// Checks the constraint against its context field (`None`: no such field): the field
    /// must exist, and the values must be among its legal values when it has them.
    pub fn check_field(
        &self,
        field: Option<&ContextField>,
        path: &str,
        errors: &mut ValidationErrors,
    ) {
        let Some(field) = field else {
            errors.push(
                format!("{path}.contextName"),
                format!(
                    "there is no context field \"{}\"; create it first (POST /api/admin/context)",
                    self.context_name
                ),
            );
            return;
        };
        if field.legal_values.is_empty() || !self.operator.bounded_by_legal_values() {
            return;
        }
        // Exact: the SDKs compare `IN`/`NOT_IN` and the single values case-sensitively, even
        // with `caseInsensitive` (which only `STR_*` honour).
        let legal = |v: &str| field.legal_values.iter().any(|l| l == v);
        for (i, v) in self.values.iter().flatten().enumerate() {
            if !legal(v) {
                errors.push(format!("{path}.values[{i}]"), not_legal(v, field));
            }
        }
        // The empty `value` the Unleash UI sends with list operators compares with nothing.
        if let Some(v) = self.value.as_deref().filter(|v| !v.is_empty() && !legal(v)) {
            errors.push(format!("{path}.value"), not_legal(v, field));
        }
    }
}

fn not_legal(value: &str, field: &ContextField) -> String {
    format!(
        "\"{value}\" is not a legal value of the context field \"{}\" (legal: {})",
        field.name,
        field.legal_values.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn check(v: Value) -> Result<Constraint, Vec<(String, String)>> {
        let spec: ConstraintSpec = serde_json::from_value(v).expect("spec parses");
        let mut errors = ValidationErrors::default();
        match spec.validate("c", &mut errors) {
            Some(c) if errors.0.is_empty() => Ok(c),
            _ => Err(errors.0.into_iter().map(|e| (e.path, e.message)).collect()),
        }
    }

    #[test]
    fn every_operator_round_trips_as_written() {
        for op in Operator::ALL {
            let body = match op.operand() {
                Operand::Strings => {
                    json!({"contextName": "userId", "operator": op.as_str(), "values": ["a"]})
                }
                Operand::Number => {
                    json!({"contextName": "n", "operator": op.as_str(), "value": "1.5", "inverted": true})
                }
                Operand::Date => {
                    json!({"contextName": "currentTime", "operator": op.as_str(), "value": "2026-01-01T00:00:00Z"})
                }
                Operand::Semver => {
                    json!({"contextName": "v", "operator": op.as_str(), "value": "1.2.3-rc.1", "caseInsensitive": false})
                }
            };
            let constraint = check(body.clone()).expect("valid");
            assert_eq!(serde_json::to_value(&constraint).expect("json"), body);
        }
    }

    #[test]
    fn operands_are_checked_per_operator() {
        let paths = |v| {
            check(v)
                .expect_err("invalid")
                .into_iter()
                .map(|e| e.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "NUM_GT", "value": "ten"})),
            ["c.value"]
        );
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "DATE_AFTER", "value": "2026-01-01"})),
            ["c.value"]
        );
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "SEMVER_EQ", "value": "1.2"})),
            ["c.value"]
        );
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "IN", "values": []})),
            ["c.values"]
        );
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "STR_ENDS_WITH", "values": ["a\\"]})),
            ["c.values[0]"]
        );
        // The empty `value` the Unleash UI sends with list operators is fine.
        assert!(
            check(json!({"contextName": "x", "operator": "IN", "values": ["a"], "value": ""}))
                .is_ok()
        );
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "IN", "values": ["a"], "value": "a"})),
            ["c.value"]
        );
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "NUM_EQ", "value": "1", "values": ["1"]})),
            ["c.values"]
        );
        assert_eq!(
            paths(json!({"contextName": "x", "operator": "REGEX", "values": ["a"]})),
            ["c.operator"]
        );
        assert_eq!(
            paths(json!({"operator": "IN", "values": ["a"], "segments": [1]})),
            ["c.segments", "c.contextName"]
        );
        // The empty `values` list the Unleash UI sends with single-value operators is fine.
        assert!(check(
            json!({"contextName": "x", "operator": "NUM_EQ", "value": "1", "values": []})
        )
        .is_ok());
    }

    #[test]
    fn numbers_and_dates_follow_the_sdk_grammar() {
        for ok in ["42", "-1.5", "+3", "2e3", "1.5E-2", "7.", "0"] {
            assert!(is_sdk_number(ok), "{ok}");
        }
        for bad in [
            ".5", "1e", "e3", "1.2.3", "NaN", "inf", " 1", "1_000", "0x10", "1e999", "",
        ] {
            assert!(!is_sdk_number(bad), "{bad}");
        }
        for ok in [
            "2026-01-31T12:00:00Z",
            "2026-01-31T12:00:00.123Z",
            "2026-01-31T12:00:00+02:00",
            "2026-01-31T12:00:00.000-05:30",
        ] {
            assert!(is_sdk_date(ok), "{ok}");
        }
        for bad in [
            "2026-01-31",
            "2026-01-31T12:00:00",
            "2026-01-31T12:00:00.123456Z",
            "2026-01-31t12:00:00z",
            "2026-01-31 12:00:00Z",
            "2026-13-31T12:00:00Z",
            "2026-01-31T12:00:00.1Z",
            "2026-01-31T12:00:00+0200",
            // Found by fuzzing: a leap second, which Node's `Date` cannot read.
            "2026-12-31T23:59:60Z",
            "2026-06-30T12:00:60.000+02:00",
        ] {
            assert!(!is_sdk_date(bad), "{bad}");
        }
    }

    #[test]
    fn legal_values_bound_membership_and_single_values() {
        let field = ContextField {
            legal_values: vec!["eu".into(), "us".into()],
            ..ContextField::new("region", chrono::Utc::now())
        };
        let errors_for = |v: Value| {
            let constraint = check(v).expect("valid");
            let mut errors = ValidationErrors::default();
            constraint.check_field(Some(&field), "c", &mut errors);
            errors.0.into_iter().map(|e| e.path).collect::<Vec<_>>()
        };
        assert_eq!(
            errors_for(
                json!({"contextName": "region", "operator": "IN", "values": ["eu", "apac"]})
            ),
            ["c.values[1]"]
        );
        assert_eq!(
            errors_for(
                json!({"contextName": "region", "operator": "NOT_IN", "values": ["EU"], "caseInsensitive": true})
            ),
            ["c.values[0]"]
        );
        assert!(errors_for(
            json!({"contextName": "region", "operator": "STR_STARTS_WITH", "values": ["e"]})
        )
        .is_empty());
        // Found by the fuzzer: the UI's empty `value` beside `values` is not a value to check.
        assert!(errors_for(
            json!({"contextName": "region", "operator": "IN", "values": ["eu"], "value": ""})
        )
        .is_empty());
        let mut errors = ValidationErrors::default();
        check(json!({"contextName": "nope", "operator": "IN", "values": ["a"]}))
            .expect("valid")
            .check_field(None, "c", &mut errors);
        assert_eq!(errors.0[0].path, "c.contextName");
    }
}
