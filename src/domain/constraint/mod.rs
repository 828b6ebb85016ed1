//! Strategy constraints: a context field, an operator and the value(s) it compares with
//! (spec §2.3 plus the operators today's Unleash SDKs evaluate), and the rules that check them.
//!
//! The operator is a string end to end. Admin writes ([`ConstraintSpec::validate`]) accept only
//! the operators Flagpole knows, with operands the SDKs can read; the stored and served form
//! ([`Constraint`]) reads any operator and writes it back as the same string, so an import can
//! keep an operator from a newer Unleash verbatim (every SDK evaluates an operator it does not
//! know as false).

use serde::{Deserialize, Serialize};

mod operator;
mod schema;
#[cfg(test)]
mod tests;

pub use operator::{Operand, Operator};

use crate::domain::context_field::ContextField;
use crate::domain::error::ValidationErrors;
use crate::domain::exact_capacity;
use crate::domain::fields::{refuse_unsupported, ExtraFields};
use crate::domain::text::Text;

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
    /// The values of list operators (`IN`, `NOT_IN`, `STR_*`, `IN_CIDR`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "exact_capacity::option_vec"
    )]
    #[schema(value_type = Option<Vec<String>>)]
    pub values: Option<Vec<Text>>,
    /// The value of single-value operators (`NUM_*`, `DATE_*`, `SEMVER_*`, `REGEX`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub value: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inverted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_insensitive: Option<bool>,
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

impl ConstraintSpec {
    /// Checks the constraint on its own (the context field is checked against the
    /// configuration later, see [`Constraint::check_field`]); problems go to `errors` under
    /// `path`. Only known operators pass: an admin write is where a typo can still be fixed.
    pub fn validate(self, path: &str, errors: &mut ValidationErrors) -> Option<Constraint> {
        let before = errors.0.len();
        refuse_unsupported(&self.extra, path, &[], errors);
        let context_name = self.context_name.unwrap_or_default();
        if context_name.is_empty() {
            errors.push(format!("{path}.contextName"), "\"contextName\" is required");
        }
        let operator = self.operator.as_deref().and_then(Operator::from_name);
        let operand = operator.as_ref().and_then(Operator::operand);
        match (&operator, operand) {
            (Some(op), Some(operand)) if operand.is_list() => {
                check_values(self.values.as_deref(), path, op, operand, errors);
                // The Unleash UI sends an empty `value` with list operators.
                if self.value.as_deref().is_some_and(|v| !v.is_empty()) {
                    errors.push(
                        format!("{path}.value"),
                        format!("{op} compares with a list: send \"values\", not \"value\""),
                    );
                }
            }
            (Some(op), Some(operand)) => {
                let case_insensitive = self.case_insensitive.unwrap_or(false);
                check_value(
                    self.value.as_deref(),
                    path,
                    op,
                    operand,
                    case_insensitive,
                    errors,
                );
                if self.values.as_ref().is_some_and(|v| !v.is_empty()) {
                    errors.push(
                        format!("{path}.values"),
                        format!("{op} compares with one value: send \"value\", not \"values\""),
                    );
                }
            }
            _ => errors.push(
                format!("{path}.operator"),
                format!("\"operator\" must be one of [{}]", Operator::known_names()),
            ),
        }
        // Unleash 7 refuses an inverted `REGEX`, and an admin write follows Unleash 7.
        if operator == Some(Operator::Regex) && self.inverted == Some(true) {
            errors.push(
                format!("{path}.inverted"),
                "REGEX cannot be inverted (Unleash refuses it too): write a pattern that \
                 matches the values that should pass",
            );
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

fn check_values(
    values: Option<&[Text]>,
    path: &str,
    op: &Operator,
    operand: Operand,
    errors: &mut ValidationErrors,
) {
    match values {
        None | Some([]) => errors.push(
            format!("{path}.values"),
            format!("{op} needs \"values\" with at least 1 item"),
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
                } else if operand == Operand::Cidrs && !is_ip_block(v) {
                    errors.push(
                        format!("{path}.values[{i}]"),
                        format!(
                            "{op} needs IP addresses or CIDR blocks such as 10.0.0.0/8, \
                             192.168.1.1 or 2001:db8::/32, got \"{v}\""
                        ),
                    );
                }
            }
        }
    }
}

/// The SDKs that evaluate with Unleash's rule engine (Rust, Python) cannot read a string that
/// ends in a backslash: it escapes their closing quote, and the whole toggle evaluates false.
const TRAILING_BACKSLASH: &str =
    "values must not end with a backslash (Unleash SDKs cannot read it)";

/// An IPv4 or IPv6 address, optionally with a prefix length in range (`/0` to `/32` or
/// `/128`, in decimal without leading zeros): what the SDKs read as an address block. Zone
/// ids (`%eth0`) and IPv4's shorthand forms are refused, as std's parsers refuse them.
fn is_ip_block(value: &str) -> bool {
    let (address, prefix) = match value.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (value, None),
    };
    let Ok(address) = address.parse::<std::net::IpAddr>() else {
        return false;
    };
    let Some(prefix) = prefix else {
        return true;
    };
    let max = if address.is_ipv4() { 32 } else { 128 };
    let canonical =
        prefix.bytes().all(|b| b.is_ascii_digit()) && (prefix == "0" || !prefix.starts_with('0'));
    canonical && prefix.parse::<u8>().is_ok_and(|bits| bits <= max)
}

/// Why `pattern` is no regular expression the SDKs can compile, if it is not. Compiled as
/// unleash-yggdrasil compiles it (the Rust and Python SDKs), with `caseInsensitive`, under the
/// `regex` crate's default size limits.
fn regex_problem(pattern: &str, case_insensitive: bool) -> Option<String> {
    let error = regex::RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .build()
        .err()?;
    // A syntax error's text draws the pattern and a caret over several lines; its last line
    // says what is wrong.
    let text = error.to_string();
    let reason = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or(text.as_str());
    Some(reason.trim().to_string())
}

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

fn check_value(
    value: Option<&str>,
    path: &str,
    op: &Operator,
    operand: Operand,
    case_insensitive: bool,
    errors: &mut ValidationErrors,
) {
    let field = format!("{path}.value");
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        errors.push(field, format!("{op} needs a \"value\""));
        return;
    };
    let too_long = value.chars().count() > VALUE_MAX;
    let problem = match operand {
        Operand::Number => (!is_sdk_number(value))
            .then(|| format!("{op} needs a number such as 42, -1.5 or 2e3, got \"{value}\"")),
        Operand::Date => (!is_sdk_date(value)).then(|| {
            format!(
                "{op} needs a date and time such as 2026-01-31T12:00:00Z or \
                 2026-01-31T12:00:00.000+02:00, got \"{value}\""
            )
        }),
        Operand::Semver => semver::Version::parse(value)
            .err()
            .map(|e| format!("{op} needs a semantic version such as 1.2.3, got \"{value}\" ({e})")),
        // Compiled only when short enough to be accepted at all.
        Operand::Regex if !too_long => regex_problem(value, case_insensitive).map(|reason| {
            format!("{op} needs a regular expression that compiles, got \"{value}\" ({reason})")
        }),
        Operand::Regex | Operand::Strings | Operand::Cidrs => None,
    };
    if let Some(message) = problem {
        errors.push(field, message);
    } else if value.ends_with('\\') {
        errors.push(field, TRAILING_BACKSLASH);
    } else if too_long {
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
