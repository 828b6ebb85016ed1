//! Constraints compiled from the client form, evaluated as unleash-yggdrasil evaluates the
//! rule text it writes for them (`strategy_upgrade.rs` then `strategy_parsing.rs`): an
//! ordinal constraint's value decides by its shape whether it compares dates, versions or
//! numbers, a missing field fails every test but `NOT_IN`, inversion applies last.

use std::net::IpAddr;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use ipnetwork::IpNetwork;
use regex::{Regex, RegexBuilder};
use semver::Version;
use unleash_types::client_features::{Constraint, Context, Operator};

use super::context::Field;
use super::text;
use super::TextSet;

/// An ordinal comparison (`<`, `<=`, `==`, `>=`, `>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ordinal {
    Lt,
    Lte,
    Eq,
    Gte,
    Gt,
}

impl Ordinal {
    fn holds(self, order: std::cmp::Ordering) -> bool {
        match self {
            Self::Lt => order.is_lt(),
            Self::Lte => order.is_le(),
            Self::Eq => order.is_eq(),
            Self::Gte => order.is_ge(),
            Self::Gt => order.is_gt(),
        }
    }
}

/// `STR_STARTS_WITH`, `STR_ENDS_WITH` or `STR_CONTAINS`.
#[derive(Debug, Clone, Copy)]
enum Fragment {
    StartsWith,
    EndsWith,
    Contains,
}

/// What a constraint tests of its field's value.
#[derive(Debug)]
enum Test {
    /// `IN` / `NOT_IN` with no values: the answer whatever the context holds.
    EmptyList {
        not_in: bool,
    },
    In(TextSet),
    NotIn(TextSet),
    Fragment {
        kind: Fragment,
        ignore_case: bool,
        /// Lower-cased when `ignore_case`.
        values: Vec<Box<str>>,
    },
    /// `None`: a pattern that does not compile (never matches).
    Regex(Option<Regex>),
    Number(Ordinal, f64),
    Date(Ordinal, DateTime<Utc>),
    Version(Ordinal, Version),
    Cidr(Vec<IpNetwork>),
}

/// One compiled constraint.
#[derive(Debug)]
pub enum CompiledConstraint {
    /// A constraint that is always false, inverted or not (a `SEMVER_*` value starting with
    /// `v`: yggdrasil writes the literal `false` for it).
    Never,
    Test {
        field: Field,
        inverted: bool,
        test: Box<TestBox>,
    },
}

/// A boxed test (keeps `CompiledConstraint` small: the common ones are lists).
#[derive(Debug)]
pub struct TestBox(Test);

impl CompiledConstraint {
    /// Compiles `constraint`; `None` for a shape compiled differently by yggdrasil or not at
    /// all (the toggle is then left to yggdrasil).
    pub fn compile(constraint: &Constraint) -> Option<Self> {
        if !text::plain_name(&constraint.context_name) {
            return None;
        }
        let field = Field::in_rule(&constraint.context_name);
        let values = || constraint.values.as_deref().unwrap_or_default();
        let ci = constraint.case_insensitive;
        let test = match &constraint.operator {
            Operator::In | Operator::NotIn => {
                let not_in = constraint.operator == Operator::NotIn;
                if values().is_empty() {
                    Test::EmptyList { not_in }
                } else {
                    let set = quoted_set(values())?;
                    if not_in {
                        Test::NotIn(set)
                    } else {
                        Test::In(set)
                    }
                }
            }
            Operator::StrStartsWith | Operator::StrEndsWith | Operator::StrContains => {
                let kind = match constraint.operator {
                    Operator::StrStartsWith => Fragment::StartsWith,
                    Operator::StrEndsWith => Fragment::EndsWith,
                    _ => Fragment::Contains,
                };
                // An empty list does not parse in yggdrasil's grammar.
                if values().is_empty() || !values().iter().all(|v| text::quoted_round_trips(v)) {
                    return None;
                }
                let values = values()
                    .iter()
                    .map(|v| if ci { v.to_lowercase() } else { v.clone() }.into())
                    .collect();
                Test::Fragment {
                    kind,
                    ignore_case: ci,
                    values,
                }
            }
            Operator::RegexMatch => {
                let pattern = constraint.value.as_deref().unwrap_or_default();
                if !text::quoted_round_trips(pattern) {
                    return None;
                }
                Test::Regex(RegexBuilder::new(pattern).case_insensitive(ci).build().ok())
            }
            Operator::InCidr => {
                if values().is_empty() || !values().iter().all(|v| text::quoted_round_trips(v)) {
                    return None;
                }
                Test::Cidr(
                    values()
                        .iter()
                        .filter_map(|v| IpNetwork::from_str(v).ok())
                        .collect(),
                )
            }
            Operator::NumEq
            | Operator::NumGt
            | Operator::NumGte
            | Operator::NumLt
            | Operator::NumLte
            | Operator::DateAfter
            | Operator::DateBefore
            | Operator::SemverEq
            | Operator::SemverLt
            | Operator::SemverGt
            | Operator::SemverLte
            | Operator::SemverGte => {
                let value = constraint.value.as_deref()?;
                let is_semver = matches!(
                    constraint.operator,
                    Operator::SemverEq
                        | Operator::SemverLt
                        | Operator::SemverGt
                        | Operator::SemverLte
                        | Operator::SemverGte
                );
                if is_semver && value.starts_with('v') {
                    return Some(Self::Never);
                }
                ordinal_test(ordinal_of(&constraint.operator)?, value)?
            }
            Operator::Unknown(_) => return None,
        };
        Some(Self::Test {
            field,
            inverted: constraint.inverted,
            test: Box::new(TestBox(test)),
        })
    }

    /// Whether `context` meets the constraint.
    pub fn holds(&self, context: &Context) -> bool {
        match self {
            Self::Never => false,
            Self::Test {
                field,
                inverted,
                test,
            } => test.0.holds(field, context) != *inverted,
        }
    }
}

impl Test {
    fn holds(&self, field: &Field, context: &Context) -> bool {
        let value = field.read(context);
        let Some(value) = value.as_deref() else {
            return matches!(self, Self::NotIn(_) | Self::EmptyList { not_in: true });
        };
        match self {
            Self::EmptyList { not_in } => *not_in,
            Self::In(set) => set.contains(value),
            Self::NotIn(set) => !set.contains(value),
            Self::Fragment {
                kind,
                ignore_case,
                values,
            } => {
                // Lower-casing the value costs an allocation, only for `caseInsensitive`.
                let lowered;
                let value = if *ignore_case {
                    lowered = value.to_lowercase();
                    lowered.as_str()
                } else {
                    value
                };
                values.iter().any(|item| match kind {
                    Fragment::StartsWith => value.starts_with(&**item),
                    Fragment::EndsWith => value.ends_with(&**item),
                    Fragment::Contains => value.contains(&**item),
                })
            }
            Self::Regex(regex) => regex.as_ref().is_some_and(|r| r.is_match(value)),
            Self::Number(ordinal, number) => value.parse::<f64>().is_ok_and(|v| match ordinal {
                Ordinal::Eq => (v - number).abs() < f64::EPSILON,
                Ordinal::Lt => v < *number,
                Ordinal::Lte => v <= *number,
                Ordinal::Gte => v >= *number,
                Ordinal::Gt => v > *number,
            }),
            Self::Date(ordinal, date) => value
                .parse::<DateTime<Utc>>()
                .is_ok_and(|v| ordinal.holds(v.cmp(date))),
            Self::Version(ordinal, version) => value
                .parse::<Version>()
                .is_ok_and(|v| ordinal.holds(v.cmp_precedence(version))),
            Self::Cidr(networks) => value
                .parse::<IpAddr>()
                .is_ok_and(|ip| networks.iter().any(|n| n.contains(ip))),
        }
    }
}

/// The set of `values`, each of which must survive yggdrasil's quoting unchanged.
fn quoted_set(values: &[String]) -> Option<TextSet> {
    values
        .iter()
        .map(|v| text::quoted_round_trips(v).then(|| v.as_str().into()))
        .collect()
}

fn ordinal_of(operator: &Operator) -> Option<Ordinal> {
    Some(match operator {
        Operator::NumEq | Operator::SemverEq => Ordinal::Eq,
        Operator::NumGt | Operator::SemverGt | Operator::DateAfter => Ordinal::Gt,
        Operator::NumGte | Operator::SemverGte => Ordinal::Gte,
        Operator::NumLt | Operator::SemverLt | Operator::DateBefore => Ordinal::Lt,
        Operator::NumLte | Operator::SemverLte => Ordinal::Lte,
        _ => return None,
    })
}

/// The test an ordinal constraint's value makes: yggdrasil's grammar tries a date, then a
/// version, then a number, whatever the operator said; a value that is none of them whole
/// does not compile there (`None`: left to yggdrasil).
fn ordinal_test(ordinal: Ordinal, value: &str) -> Option<Test> {
    if text::is_grammar_date(value) {
        return Some(Test::Date(ordinal, value.parse::<DateTime<Utc>>().ok()?));
    }
    if text::is_grammar_semver(value) {
        return Some(Test::Version(ordinal, Version::parse(value).ok()?));
    }
    if text::is_grammar_number(value) {
        return Some(Test::Number(ordinal, value.parse::<f64>().ok()?));
    }
    None
}
