//! Constraints (`domain::constraint`): a constraint body through `ConstraintSpec` and its
//! validation, for every operator: numbers, dates, semantic versions, regular expressions,
//! lists and address blocks, `inverted` and `caseInsensitive`.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::gen::{constraint, operand_value, seeded, Universe};
use super::mutate::odd_value;
use super::{config, odd_text};
use crate::domain::constraint::{Constraint, ConstraintSpec, Operand, Operator};
use crate::domain::error::ValidationErrors;

/// Characters that turn a valid operand into a near miss: other digits (Arabic-Indic,
/// full-width), separators, signs, letters the grammars use, NUL.
static NEAR_MISSES: [char; 18] = [
    '0', '9', ':', '-', '+', '.', 'T', 'Z', 'e', 'z', 't', ' ', '\u{0}', '\u{663}', '\u{ff11}',
    '_', 'v', '\\',
];

/// Known troublemakers for the number grammar.
static NUMBER_EDGES: [&str; 12] = [
    "1e", ".5", "1_000", "0x10", "1e999", "-1e-999", "NaN", "inf", "+-1", " 1", "1 ", "",
];

/// Known troublemakers for the date grammar: days and seconds that do not exist, offsets out
/// of range, year zero.
static DATE_EDGES: [&str; 9] = [
    "2026-02-30T00:00:00Z",
    "2026-12-31T23:59:60Z",
    "2026-06-30T12:00:60+02:00",
    "2026-01-01T24:00:00Z",
    "2026-01-01T00:00:00+24:00",
    "2026-01-01T00:00:00.000-00:00",
    "0000-01-01T00:00:00Z",
    "2026-01-01T00:00:00.999+23:59",
    "2026-01-01T00:00:00z",
];

/// Known troublemakers for the semantic version grammar.
static SEMVER_EDGES: [&str; 7] = [
    "01.2.3",
    "1.2.3-01",
    "v1.2.3",
    "1.2.3-",
    "99999999999999999999.0.0",
    "1.2.3+",
    "1.2.3-a..b",
];

/// Known troublemakers for regular expressions: unclosed groups and classes, a dangling
/// escape, look-arounds and back-references (which the SDKs' engines lack), an unknown class.
static REGEX_EDGES: [&str; 9] = [
    "(regex",
    "[a-",
    "a\\",
    "(?=a)",
    "(a)\\1",
    "*",
    "a{2,1}",
    "\\p{Nope}",
    "(?<",
];

/// Known troublemakers for address blocks: prefixes out of range or not in plain decimal,
/// shorthand and zero-padded IPv4, a zone id, a host name.
static CIDR_EDGES: [&str; 10] = [
    "10.0.0.0/33",
    "::/129",
    "10.0.0.0/",
    "10.0.0.0/08",
    "10.0.0.0/+8",
    "01.2.3.4",
    "1.2.3",
    "fe80::1%eth0",
    "localhost",
    "10.0.0.0/8/8",
];

fn edges(operand: Operand) -> &'static [&'static str] {
    match operand {
        Operand::Strings => &["", " ", "\\"],
        Operand::Cidrs => &CIDR_EDGES,
        Operand::Number => &NUMBER_EDGES,
        Operand::Date => &DATE_EDGES,
        Operand::Semver => &SEMVER_EDGES,
        Operand::Regex => &REGEX_EDGES,
    }
}

/// What a known operator compares with (`Operator::ALL` holds only known ones).
fn operand_of(op: &Operator) -> Operand {
    op.operand().expect("a known operator")
}

/// An operand for `operand`: valid, a valid one with a character replaced or inserted, a
/// known edge case, or odd text.
fn operand_like(operand: Operand) -> BoxedStrategy<String> {
    prop_oneof![
        3 => operand_value(operand),
        3 => near_miss(operand_value(operand)),
        2 => prop::sample::select(edges(operand)).prop_map(str::to_string),
        1 => odd_text(),
    ]
    .boxed()
}

/// `valid` with one character replaced or inserted.
fn near_miss(valid: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (
        valid,
        any::<prop::sample::Index>(),
        prop::sample::select(&NEAR_MISSES[..]),
        any::<bool>(),
    )
        .prop_map(|(v, at, c, insert)| {
            let mut chars: Vec<char> = v.chars().collect();
            if chars.is_empty() {
                return c.to_string();
            }
            let i = at.index(chars.len());
            if insert {
                chars.insert(i, c);
            } else {
                chars[i] = c;
            }
            chars.into_iter().collect()
        })
}

/// An operand of any family, or a long run of digits.
fn operand() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => operand_like(Operand::Strings),
        2 => operand_like(Operand::Number),
        2 => operand_like(Operand::Date),
        2 => operand_like(Operand::Semver),
        2 => operand_like(Operand::Regex),
        2 => operand_like(Operand::Cidrs),
        1 => "[0-9]{90,120}",
    ]
}

/// A field of a constraint body: absent, right-ish, or a value of any type.
fn field<S: Strategy<Value = Value> + 'static>(right: S) -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        1 => Just(None),
        6 => right.prop_map(Some),
        1 => odd_value().prop_map(Some),
    ]
    .boxed()
}

/// A constraint body as clients send them, right or wrong in every field; mostly with
/// operands of the family its operator compares with.
fn body() -> impl Strategy<Value = Value> {
    let operator = prop_oneof![
        6 => prop::sample::select(Operator::ALL.to_vec()).prop_map(Some),
        2 => Just(None),
    ];
    (operator, any::<bool>(), odd_text())
        .prop_flat_map(|(op, lowercase, odd)| {
            let name = match &op {
                Some(op) if lowercase => op.as_str().to_lowercase(),
                Some(op) => op.as_str().to_string(),
                None => odd,
            };
            let operand = match &op {
                Some(op) => prop_oneof![4 => operand_like(operand_of(op)), 1 => operand()].boxed(),
                None => operand().boxed(),
            };
            (
                field(prop_oneof!["[a-zA-Z]{1,10}", odd_text()].prop_map(Value::String)),
                field(Just(Value::String(name))),
                field(prop::collection::vec(operand.clone(), 0..4).prop_map(|v| v.into())),
                field(operand.prop_map(Value::String)),
                field(any::<bool>().prop_map(Value::Bool)),
                field(any::<bool>().prop_map(Value::Bool)),
                prop::option::of(("[a-z]{1,8}", odd_value())),
            )
        })
        .prop_map(
            |(context_name, operator, values, value, inverted, case_insensitive, extra)| {
                let mut body = Map::new();
                for (key, v) in [
                    ("contextName", context_name),
                    ("operator", operator),
                    ("values", values),
                    ("value", value),
                    ("inverted", inverted),
                    ("caseInsensitive", case_insensitive),
                ] {
                    if let Some(v) = v {
                        body.insert(key.to_string(), v);
                    }
                }
                if let Some((key, v)) = extra {
                    body.insert(key, v);
                }
                Value::Object(body)
            },
        )
}

/// Validates `body` as a constraint: `Ok(None)` when it is not one (type mismatch or
/// problems), after checking that problems and acceptance agree.
fn validate(body: Value) -> Result<Option<Constraint>, TestCaseError> {
    let Ok(spec) = serde_json::from_value::<ConstraintSpec>(body) else {
        return Ok(None);
    };
    let mut errors = ValidationErrors::default();
    let constraint = spec.validate("c", &mut errors);
    prop_assert_eq!(
        constraint.is_some(),
        errors.0.is_empty(),
        "acceptance and problems disagree: {:?}",
        errors
    );
    for problem in &errors.0 {
        prop_assert!(problem.path.starts_with('c') && !problem.message.is_empty());
    }
    Ok(constraint)
}

/// What the SDKs need of an accepted constraint's operand.
fn assert_usable(c: &Constraint) -> Result<(), TestCaseError> {
    let value = c.value.as_deref().unwrap_or("");
    let operand = c.operator.operand();
    prop_assert!(operand.is_some(), "an unknown operator accepted: {:?}", c);
    let operand = operand_of(&c.operator);
    if operand.is_list() {
        let values = c.values.as_deref().unwrap_or(&[]);
        prop_assert!(!values.is_empty());
        for v in values {
            let n = v.chars().count();
            prop_assert!((1..=100).contains(&n) && !v.ends_with('\\'), "{:?}", v);
        }
    }
    match operand {
        Operand::Strings => {}
        Operand::Cidrs => {
            for v in c.values.iter().flatten() {
                prop_assert!(is_address_block(v), "{:?}", v);
            }
        }
        Operand::Number => {
            prop_assert!(
                value.parse::<f64>().is_ok_and(f64::is_finite),
                "{:?}",
                value
            );
        }
        Operand::Date => {
            // A real instant without a leap second: Node's `Date` and Python's `datetime`
            // cannot read `:60`.
            let t = chrono::DateTime::parse_from_rfc3339(value);
            prop_assert!(
                t.is_ok_and(|t| chrono::Timelike::nanosecond(&t) < 1_000_000_000),
                "{:?}",
                value
            );
        }
        Operand::Semver => prop_assert!(semver::Version::parse(value).is_ok(), "{:?}", value),
        Operand::Regex => {
            let case_insensitive = c.case_insensitive.unwrap_or(false);
            prop_assert!(
                regex::RegexBuilder::new(value)
                    .case_insensitive(case_insensitive)
                    .build()
                    .is_ok(),
                "{:?}",
                value
            );
            prop_assert!(c.inverted != Some(true), "an inverted REGEX: {:?}", c);
        }
    }
    if !operand.is_list() {
        prop_assert!(value.chars().count() <= 100 && !value.ends_with('\\'));
    }
    Ok(())
}

/// An address with an optional prefix length in range, as the SDKs' parsers read it, written
/// here apart from the validation it checks: address, then `/` and decimal digits.
fn is_address_block(value: &str) -> bool {
    let mut parts = value.splitn(2, '/');
    let Some(Ok(address)) = parts.next().map(str::parse::<std::net::IpAddr>) else {
        return false;
    };
    match parts.next() {
        None => true,
        Some(prefix) => {
            let max = if address.is_ipv4() { 32 } else { 128 };
            prefix.len() <= 3
                && prefix.bytes().all(|b| b.is_ascii_digit())
                && prefix.parse::<u8>().is_ok_and(|bits| bits <= max)
        }
    }
}

proptest! {
    #![proptest_config(config(2048))]

    /// Any constraint body is accepted or refused with its problems; an accepted one is
    /// usable by the SDKs and served back exactly as it was sent.
    #[test]
    fn a_constraint_body_is_accepted_as_sent_or_refused(body in body()) {
        let Some(c) = validate(body.clone())? else {
            return Ok(());
        };
        assert_usable(&c)?;
        // Served back: the fields sent, nulls aside (an absent optional field stays absent).
        let served = serde_json::to_value(&c).expect("serialisable");
        let mut sent = body.as_object().cloned().unwrap_or_default();
        sent.retain(|k, v| {
            !v.is_null()
                && ["contextName", "operator", "values", "value", "inverted", "caseInsensitive"]
                    .contains(&k.as_str())
        });
        prop_assert_eq!(&served, &Value::Object(sent));
        // And what is served is accepted again, unchanged.
        prop_assert_eq!(validate(served)?, Some(c));
    }

    /// A well-formed constraint whose operands are valid, near misses or edge cases of its
    /// operator's grammar is accepted only when every SDK can read its operands.
    #[test]
    fn an_operand_is_accepted_only_if_the_sdks_can_read_it(
        (op, operands) in prop::sample::select(Operator::ALL.to_vec()).prop_flat_map(|op| {
            let operands = prop::collection::vec(operand_like(operand_of(&op)), 1..3);
            (Just(op), operands)
        }),
    ) {
        let body = if operand_of(&op).is_list() {
            json!({"contextName": "x", "operator": op.as_str(), "values": operands})
        } else {
            json!({"contextName": "x", "operator": op.as_str(), "value": operands[0]})
        };
        if let Some(c) = validate(body)? {
            assert_usable(&c)?;
        }
    }

    /// Every valid constraint, on any operator, is accepted and served back unchanged.
    #[test]
    fn a_valid_constraint_round_trips(c in constraint(Universe::of(&seeded()).fields)) {
        let served = serde_json::to_value(&c).expect("serialisable");
        prop_assert_eq!(validate(served)?, Some(c));
    }
}
