use super::schema::constraint_spec_schema;
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
        let name = op.as_str();
        let body = match op.operand().expect("a known operator") {
            Operand::Strings => {
                json!({"contextName": "userId", "operator": name, "values": ["a"]})
            }
            Operand::Cidrs => {
                json!({"contextName": "ip", "operator": name, "values": ["10.0.0.0/8", "::1"], "inverted": true})
            }
            Operand::Number => {
                json!({"contextName": "n", "operator": name, "value": "1.5", "inverted": true})
            }
            Operand::Date => {
                json!({"contextName": "currentTime", "operator": name, "value": "2026-01-01T00:00:00Z"})
            }
            Operand::Semver => {
                json!({"contextName": "v", "operator": name, "value": "1.2.3-rc.1", "caseInsensitive": false})
            }
            Operand::Regex => {
                json!({"contextName": "email", "operator": name, "value": "^[^@]+@example\\.com$", "caseInsensitive": true, "inverted": false})
            }
        };
        let constraint = check(body.clone()).expect("valid");
        assert_eq!(constraint.operator, *op);
        assert_eq!(serde_json::to_value(&constraint).expect("json"), body);
    }
}

/// What imports store: any operator, served back as the same plain string (never
/// `{"Unknown": …}`), and `values: []` kept.
#[test]
fn any_operator_round_trips_through_the_stored_form() {
    for body in [
        json!({"contextName": "userId", "operator": "NOT_A_VALID_OPERATOR", "values": ["a"]}),
        json!({"contextName": "userId", "operator": "in", "values": []}),
        json!({"contextName": "userId", "operator": "", "value": "x", "inverted": true}),
        json!({"contextName": "userId", "operator": "IN", "values": []}),
    ] {
        let text = body.to_string();
        let constraint: Constraint = serde_json::from_str(&text).expect("any operator reads");
        assert_eq!(serde_json::to_string(&constraint).expect("json"), text);
    }
    let unknown: Constraint = serde_json::from_value(
        json!({"contextName": "userId", "operator": "STR_MATCHES", "values": ["a"]}),
    )
    .expect("reads");
    assert_eq!(unknown.operator, Operator::Unknown("STR_MATCHES".into()));
    assert!(!unknown.operator.is_known() && unknown.operator.operand().is_none());
    // A known name is never kept as unknown: it compares equal to its variant.
    assert_eq!(Operator::named("SEMVER_GTE"), Operator::SemverGte);
    // Today's stored bytes read back as they were written.
    let stored =
        r#"{"contextName":"appVersion","operator":"SEMVER_LT","value":"1.2.3","inverted":false}"#;
    let constraint: Constraint = serde_json::from_str(stored).expect("reads");
    assert_eq!(constraint.operator, Operator::SemverLt);
    assert_eq!(serde_json::to_string(&constraint).expect("json"), stored);
    // Not a string: refused with what was expected.
    let error = serde_json::from_value::<Constraint>(
        json!({"contextName": "userId", "operator": 3, "values": ["a"]}),
    )
    .expect_err("a number is no operator");
    assert!(error.to_string().contains("an operator name"), "{error}");
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
        check(json!({"contextName": "x", "operator": "IN", "values": ["a"], "value": ""})).is_ok()
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
        ["c.value", "c.values"]
    );
    assert_eq!(
        paths(json!({"contextName": "x", "operator": "LIKE", "values": ["a"]})),
        ["c.operator"]
    );
    assert_eq!(
        paths(json!({"operator": "IN", "values": ["a"], "segments": [1]})),
        ["c.segments", "c.contextName"]
    );
    // The empty `values` list the Unleash UI sends with single-value operators is fine.
    assert!(
        check(json!({"contextName": "x", "operator": "NUM_EQ", "value": "1", "values": []}))
            .is_ok()
    );
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

/// The message of the only problem of `body`, which must be at `path`.
fn problem_at(body: Value, path: &str) -> String {
    let problems = check(body.clone()).expect_err("invalid");
    assert_eq!(problems.len(), 1, "{body}: {problems:?}");
    assert_eq!(problems[0].0, path, "{body}: {problems:?}");
    problems[0].1.clone()
}

#[test]
fn unknown_operators_are_refused_with_the_list_of_known_ones() {
    for name in ["NOT_A_VALID_OPERATOR", "regex", "SEMVER_GE", ""] {
        let message = problem_at(
            json!({"contextName": "x", "operator": name, "values": ["a"]}),
            "c.operator",
        );
        for known in [
            "IN",
            "SEMVER_LT",
            "SEMVER_GTE",
            "SEMVER_LTE",
            "REGEX",
            "IN_CIDR",
        ] {
            assert!(message.contains(known), "{message}");
        }
    }
    problem_at(json!({"contextName": "x", "values": ["a"]}), "c.operator");
}

#[test]
fn regex_needs_one_pattern_that_compiles_and_no_inversion() {
    for pattern in ["^a", "(?i)^beta-[0-9]+$", "\\d{3}", "\\p{Greek}+", "a|b"] {
        check(json!({"contextName": "x", "operator": "REGEX", "value": pattern}))
            .unwrap_or_else(|e| panic!("{pattern}: {e:?}"));
    }
    // The Unleash UI's empty `values` beside `value` is fine, as with other single values.
    assert!(check(
        json!({"contextName": "x", "operator": "REGEX", "value": "a", "values": [], "inverted": false})
    )
    .is_ok());
    for pattern in ["(regex", "[a-", "a{2,1}", "(?<name", "x\\"] {
        let message = problem_at(
            json!({"contextName": "x", "operator": "REGEX", "value": pattern}),
            "c.value",
        );
        assert!(
            message.starts_with("REGEX needs a regular expression that compiles"),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }
    assert!(problem_at(
        json!({"contextName": "x", "operator": "REGEX", "value": "(regex"}),
        "c.value"
    )
    .contains("unclosed group"));
    problem_at(json!({"contextName": "x", "operator": "REGEX"}), "c.value");
    problem_at(
        json!({"contextName": "x", "operator": "REGEX", "value": "a".repeat(VALUE_MAX + 1)}),
        "c.value",
    );
    let message = problem_at(
        json!({"contextName": "x", "operator": "REGEX", "value": "^a", "inverted": true}),
        "c.inverted",
    );
    assert!(message.contains("cannot be inverted"), "{message}");
    // Both problems at once.
    assert_eq!(
        check(json!({"contextName": "x", "operator": "REGEX", "value": "(", "inverted": true}))
            .expect_err("invalid")
            .into_iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        ["c.value", "c.inverted"]
    );
}

#[test]
fn semver_gte_and_lte_take_one_semantic_version() {
    for name in ["SEMVER_GTE", "SEMVER_LTE"] {
        let constraint =
            check(json!({"contextName": "v", "operator": name, "value": "2.0.0-beta.1"}))
                .expect("valid");
        assert_eq!(constraint.operator.operand(), Some(Operand::Semver));
        for bad in ["1.2", "v1.2.3", "01.2.3"] {
            let message = problem_at(
                json!({"contextName": "v", "operator": name, "value": bad}),
                "c.value",
            );
            assert!(
                message.starts_with(&format!("{name} needs a semantic version")),
                "{message}"
            );
        }
        problem_at(
            json!({"contextName": "v", "operator": name, "values": ["1.2.3"], "value": "1.2.3"}),
            "c.values",
        );
    }
}

#[test]
fn in_cidr_takes_addresses_and_blocks() {
    let valid = [
        "10.0.0.0/8",
        "192.168.1.1",
        "0.0.0.0/0",
        "255.255.255.255/32",
        "2001:db8::/32",
        "::1",
        "::/0",
        "::ffff:10.0.0.1/128",
        "fe80::1/64",
    ];
    let constraint =
        check(json!({"contextName": "ip", "operator": "IN_CIDR", "values": valid})).expect("valid");
    assert_eq!(constraint.values.map(|v| v.len()), Some(valid.len()));
    for bad in [
        "10.0.0.0/33",
        "::/129",
        "10.0.0.0/",
        "10.0.0.0/08",
        "10.0.0.0/+8",
        "10.0.0.0/8/8",
        "01.2.3.4",
        "1.2.3",
        "256.0.0.0",
        "fe80::1%eth0",
        " 10.0.0.1",
        "localhost",
    ] {
        let message = problem_at(
            json!({"contextName": "ip", "operator": "IN_CIDR", "values": ["10.0.0.1", bad]}),
            "c.values[1]",
        );
        assert!(message.contains(&format!("got \"{bad}\"")), "{message}");
    }
    problem_at(
        json!({"contextName": "ip", "operator": "IN_CIDR", "values": []}),
        "c.values",
    );
    problem_at(
        json!({"contextName": "ip", "operator": "IN_CIDR", "values": ["10.0.0.1"], "value": "10.0.0.1"}),
        "c.value",
    );
}

/// The schema admin writes are documented with knows every operator validation accepts,
/// each in the branch of its operand.
#[test]
fn the_schema_lists_every_known_operator_once() {
    let schema = serde_json::to_value(constraint_spec_schema()).expect("json");
    let branches = schema["oneOf"].as_array().expect("branches");
    let mut listed: Vec<&str> = branches
        .iter()
        .flat_map(|b| {
            b["properties"]["operator"]["enum"]
                .as_array()
                .expect("enum")
        })
        .filter_map(Value::as_str)
        .collect();
    listed.sort_unstable();
    let mut known: Vec<&str> = Operator::ALL.iter().map(Operator::as_str).collect();
    known.sort_unstable();
    assert_eq!(listed, known);
    let regex = branches
        .iter()
        .find(|b| b["properties"]["operator"]["enum"] == json!(["REGEX"]))
        .expect("a REGEX branch");
    assert_eq!(
        regex["properties"]["inverted"]["enum"],
        json!([false, null])
    );
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
        errors_for(json!({"contextName": "region", "operator": "IN", "values": ["eu", "apac"]})),
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
