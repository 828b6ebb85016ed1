//! The cases: a toggle's constraints, an evaluation context and the answer the operator
//! definitions give (see `mod.rs`).

use serde_json::{json, Value};

/// One toggle, one context, one answer.
pub(super) struct Case {
    /// Also the toggle's name, after [`toggle_name`]'s prefix.
    pub(super) name: &'static str,
    /// The constraints of the toggle's only strategy (`default`).
    pub(super) constraints: Vec<Value>,
    /// The evaluation context in the Unleash JSON form (`userId`, `environment`,
    /// `currentTime`, `properties`), which all three SDKs take.
    pub(super) context: Value,
    pub(super) expected: bool,
}

impl Case {
    pub(super) fn toggle(&self) -> String {
        toggle_name(self.name)
    }
}

fn toggle_name(case: &str) -> String {
    format!("op.{case}")
}

/// A case with one constraint.
fn case(name: &'static str, constraint: Value, context: Value, expected: bool) -> Case {
    all_of(name, vec![constraint], context, expected)
}

/// A case whose strategy has several constraints, all of which must hold.
fn all_of(name: &'static str, constraints: Vec<Value>, context: Value, expected: bool) -> Case {
    Case {
        name,
        constraints,
        context,
        expected,
    }
}

/// A constraint of a list operator (`IN`, `NOT_IN`, `STR_*`, `IN_CIDR`).
fn list(field: &str, operator: &str, values: &[&str]) -> Value {
    json!({"contextName": field, "operator": operator, "values": values})
}

/// A constraint of a single-value operator (`NUM_*`, `DATE_*`, `SEMVER_*`, `REGEX`).
fn single(field: &str, operator: &str, value: &str) -> Value {
    json!({"contextName": field, "operator": operator, "value": value})
}

fn inverted(mut constraint: Value) -> Value {
    constraint["inverted"] = json!(true);
    constraint
}

fn case_insensitive(mut constraint: Value) -> Value {
    constraint["caseInsensitive"] = json!(true);
    constraint
}

/// A context of custom properties only.
fn props(pairs: &[(&str, &str)]) -> Value {
    let properties: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    json!({ "properties": properties })
}

fn user(id: &str) -> Value {
    json!({ "userId": id })
}

/// A context with an explicit current time (RFC 3339).
fn at(time: &str) -> Value {
    json!({ "currentTime": time })
}

fn empty() -> Value {
    json!({})
}

/// The table. Each expected answer follows from the operator's definition alone.
pub(super) fn cases() -> Vec<Case> {
    vec![
        // IN: the context value is one of the values. IN and NOT_IN are case-sensitive
        // whatever `caseInsensitive` says: the Unleash reference documents them as "case
        // sensitive" and gives the option to the STR_* operators only ("For backwards
        // compatibility reasons, IN and NOT_IN are always case-sensitive").
        case(
            "in.listed",
            list("userId", "IN", &["u-1", "u-2"]),
            user("u-2"),
            true,
        ),
        case(
            "in.unlisted",
            list("userId", "IN", &["u-1", "u-2"]),
            user("u-3"),
            false,
        ),
        case(
            "in.field-missing",
            list("plan", "IN", &["pro"]),
            empty(),
            false,
        ),
        case(
            "in.case-differs",
            list("plan", "IN", &["pro"]),
            props(&[("plan", "PRO")]),
            false,
        ),
        case(
            "in.case-insensitive-same-case",
            case_insensitive(list("plan", "IN", &["pro"])),
            props(&[("plan", "pro")]),
            true,
        ),
        case(
            "in.case-insensitive-still-sensitive",
            case_insensitive(list("plan", "IN", &["pro"])),
            props(&[("plan", "PRO")]),
            false,
        ),
        case(
            "in.inverted",
            inverted(list("userId", "IN", &["u-1"])),
            user("u-1"),
            false,
        ),
        case(
            "in.inverted-unlisted",
            inverted(list("userId", "IN", &["u-1"])),
            user("u-2"),
            true,
        ),
        case(
            "in.environment",
            list("environment", "IN", &["production", "staging"]),
            json!({"environment": "production"}),
            true,
        ),
        case(
            "in.environment-other",
            list("environment", "IN", &["production", "staging"]),
            json!({"environment": "development"}),
            false,
        ),
        // NOT_IN: the context value is none of the values, which holds when it is missing.
        case(
            "not-in.unlisted",
            list("plan", "NOT_IN", &["free", "trial"]),
            props(&[("plan", "pro")]),
            true,
        ),
        case(
            "not-in.listed",
            list("plan", "NOT_IN", &["free", "trial"]),
            props(&[("plan", "trial")]),
            false,
        ),
        case(
            "not-in.field-missing",
            list("plan", "NOT_IN", &["free"]),
            empty(),
            true,
        ),
        case(
            "not-in.user-missing",
            list("userId", "NOT_IN", &["u-1"]),
            empty(),
            true,
        ),
        case(
            "not-in.case-differs",
            list("plan", "NOT_IN", &["free"]),
            props(&[("plan", "FREE")]),
            true,
        ),
        case(
            "not-in.case-insensitive-still-sensitive",
            case_insensitive(list("plan", "NOT_IN", &["free"])),
            props(&[("plan", "FREE")]),
            true,
        ),
        case(
            "not-in.inverted",
            inverted(list("plan", "NOT_IN", &["free"])),
            props(&[("plan", "free")]),
            true,
        ),
        // STR_CONTAINS: the context value contains one of the values.
        case(
            "str-contains.match",
            list("email", "STR_CONTAINS", &["@example."]),
            props(&[("email", "ann@example.com")]),
            true,
        ),
        case(
            "str-contains.no-match",
            list("email", "STR_CONTAINS", &["@example."]),
            props(&[("email", "bob@test.org")]),
            false,
        ),
        case(
            "str-contains.any-value",
            list("email", "STR_CONTAINS", &["@foo.", "@test."]),
            props(&[("email", "bob@test.org")]),
            true,
        ),
        case(
            "str-contains.case-differs",
            list("email", "STR_CONTAINS", &["EXAMPLE"]),
            props(&[("email", "ann@example.com")]),
            false,
        ),
        case(
            "str-contains.case-insensitive",
            case_insensitive(list("email", "STR_CONTAINS", &["EXAMPLE"])),
            props(&[("email", "ann@example.com")]),
            true,
        ),
        case(
            "str-contains.inverted",
            inverted(list("email", "STR_CONTAINS", &["@example."])),
            props(&[("email", "ann@example.com")]),
            false,
        ),
        case(
            "str-contains.field-missing",
            list("email", "STR_CONTAINS", &["@"]),
            empty(),
            false,
        ),
        // STR_STARTS_WITH: the context value starts with one of the values.
        case(
            "str-starts-with.match",
            list("userId", "STR_STARTS_WITH", &["admin-", "ops-"]),
            user("ops-7"),
            true,
        ),
        case(
            "str-starts-with.no-match",
            list("userId", "STR_STARTS_WITH", &["admin-", "ops-"]),
            user("user-admin-"),
            false,
        ),
        case(
            "str-starts-with.case-differs",
            list("userId", "STR_STARTS_WITH", &["ADMIN-"]),
            user("admin-1"),
            false,
        ),
        case(
            "str-starts-with.case-insensitive",
            case_insensitive(list("userId", "STR_STARTS_WITH", &["ADMIN-"])),
            user("admin-1"),
            true,
        ),
        case(
            "str-starts-with.inverted",
            inverted(list("userId", "STR_STARTS_WITH", &["admin-"])),
            user("user-1"),
            true,
        ),
        // STR_ENDS_WITH: the context value ends with one of the values.
        case(
            "str-ends-with.match",
            list("email", "STR_ENDS_WITH", &[".com", ".net"]),
            props(&[("email", "ann@example.net")]),
            true,
        ),
        case(
            "str-ends-with.no-match",
            list("email", "STR_ENDS_WITH", &[".com", ".net"]),
            props(&[("email", "ann@example.org")]),
            false,
        ),
        case(
            "str-ends-with.case-differs",
            list("email", "STR_ENDS_WITH", &[".COM"]),
            props(&[("email", "ann@example.com")]),
            false,
        ),
        case(
            "str-ends-with.case-insensitive",
            case_insensitive(list("email", "STR_ENDS_WITH", &[".COM"])),
            props(&[("email", "ann@example.com")]),
            true,
        ),
        // NUM_*: the context value compared as a number with the constraint's value.
        case(
            "num-eq.equal",
            single("age", "NUM_EQ", "30"),
            props(&[("age", "30")]),
            true,
        ),
        case(
            "num-eq.equal-as-number",
            single("age", "NUM_EQ", "30"),
            props(&[("age", "30.0")]),
            true,
        ),
        case(
            "num-eq.different",
            single("age", "NUM_EQ", "30"),
            props(&[("age", "31")]),
            false,
        ),
        case(
            "num-eq.inverted",
            inverted(single("age", "NUM_EQ", "30")),
            props(&[("age", "30")]),
            false,
        ),
        case(
            "num-gt.greater",
            single("age", "NUM_GT", "18"),
            props(&[("age", "19")]),
            true,
        ),
        case(
            "num-gt.equal",
            single("age", "NUM_GT", "18"),
            props(&[("age", "18")]),
            false,
        ),
        case(
            "num-gt.numeric-not-lexical",
            single("age", "NUM_GT", "9"),
            props(&[("age", "10")]),
            true,
        ),
        case(
            "num-gt.negative",
            single("age", "NUM_GT", "-1"),
            props(&[("age", "0")]),
            true,
        ),
        case(
            "num-gt.field-missing",
            single("age", "NUM_GT", "18"),
            empty(),
            false,
        ),
        // A context value that does not convert to a number makes the constraint false.
        case(
            "num-gt.not-a-number",
            single("age", "NUM_GT", "18"),
            props(&[("age", "old")]),
            false,
        ),
        case(
            "num-gt.inverted",
            inverted(single("age", "NUM_GT", "18")),
            props(&[("age", "19")]),
            false,
        ),
        case(
            "num-gt.inverted-smaller",
            inverted(single("age", "NUM_GT", "18")),
            props(&[("age", "10")]),
            true,
        ),
        case(
            "num-gte.equal",
            single("age", "NUM_GTE", "18"),
            props(&[("age", "18")]),
            true,
        ),
        case(
            "num-gte.smaller",
            single("age", "NUM_GTE", "18"),
            props(&[("age", "17")]),
            false,
        ),
        case(
            "num-lt.smaller",
            single("age", "NUM_LT", "18"),
            props(&[("age", "17")]),
            true,
        ),
        case(
            "num-lt.equal",
            single("age", "NUM_LT", "18"),
            props(&[("age", "18")]),
            false,
        ),
        case(
            "num-lt.fraction",
            single("age", "NUM_LT", "2.5"),
            props(&[("age", "2.25")]),
            true,
        ),
        case(
            "num-lte.equal",
            single("age", "NUM_LTE", "18"),
            props(&[("age", "18")]),
            true,
        ),
        case(
            "num-lte.greater",
            single("age", "NUM_LTE", "18"),
            props(&[("age", "19")]),
            false,
        ),
        // DATE_*: the context's currentTime compared with the constraint's instant.
        case(
            "date-after.later",
            single("currentTime", "DATE_AFTER", "2026-01-01T00:00:00Z"),
            at("2026-06-01T12:00:00Z"),
            true,
        ),
        case(
            "date-after.earlier",
            single("currentTime", "DATE_AFTER", "2026-01-01T00:00:00Z"),
            at("2025-12-31T23:59:59Z"),
            false,
        ),
        case(
            "date-after.same-instant",
            single("currentTime", "DATE_AFTER", "2026-01-01T00:00:00Z"),
            at("2026-01-01T00:00:00Z"),
            false,
        ),
        case(
            "date-after.offset",
            // 2026-01-01T00:00:00+02:00 is 2025-12-31T22:00:00Z.
            single("currentTime", "DATE_AFTER", "2026-01-01T00:00:00+02:00"),
            at("2025-12-31T23:00:00Z"),
            true,
        ),
        case(
            "date-after.inverted",
            inverted(single("currentTime", "DATE_AFTER", "2026-01-01T00:00:00Z")),
            at("2026-06-01T12:00:00Z"),
            false,
        ),
        case(
            "date-before.earlier",
            single("currentTime", "DATE_BEFORE", "2026-01-01T00:00:00Z"),
            at("2025-06-01T00:00:00Z"),
            true,
        ),
        case(
            "date-before.later",
            single("currentTime", "DATE_BEFORE", "2026-01-01T00:00:00Z"),
            at("2026-01-01T00:00:01Z"),
            false,
        ),
        case(
            "date-before.inverted",
            inverted(single("currentTime", "DATE_BEFORE", "2026-01-01T00:00:00Z")),
            at("2026-06-01T12:00:00Z"),
            true,
        ),
        // SEMVER_*: semver precedence (numeric parts, pre-releases below their release,
        // pre-release identifiers compared numerically or lexically, build metadata ignored).
        case(
            "semver-eq.equal",
            single("appVersion", "SEMVER_EQ", "1.2.3"),
            props(&[("appVersion", "1.2.3")]),
            true,
        ),
        case(
            "semver-eq.different",
            single("appVersion", "SEMVER_EQ", "1.2.3"),
            props(&[("appVersion", "1.2.4")]),
            false,
        ),
        case(
            "semver-eq.build-metadata",
            single("appVersion", "SEMVER_EQ", "1.2.3"),
            props(&[("appVersion", "1.2.3+build.7")]),
            true,
        ),
        case(
            "semver-eq.pre-release",
            single("appVersion", "SEMVER_EQ", "1.2.3"),
            props(&[("appVersion", "1.2.3-rc.1")]),
            false,
        ),
        case(
            "semver-gt.greater",
            single("appVersion", "SEMVER_GT", "1.2.3"),
            props(&[("appVersion", "1.10.0")]),
            true,
        ),
        case(
            "semver-gt.equal",
            single("appVersion", "SEMVER_GT", "1.2.3"),
            props(&[("appVersion", "1.2.3")]),
            false,
        ),
        case(
            "semver-gt.release-over-pre-release",
            single("appVersion", "SEMVER_GT", "2.0.0-rc.1"),
            props(&[("appVersion", "2.0.0")]),
            true,
        ),
        case(
            "semver-gt.numeric-pre-release",
            single("appVersion", "SEMVER_GT", "2.0.0-rc.2"),
            props(&[("appVersion", "2.0.0-rc.10")]),
            true,
        ),
        case(
            "semver-gt.alpha-below-beta",
            single("appVersion", "SEMVER_GT", "2.0.0-beta"),
            props(&[("appVersion", "2.0.0-alpha.5")]),
            false,
        ),
        case(
            "semver-gt.not-a-version",
            single("appVersion", "SEMVER_GT", "1.2.3"),
            props(&[("appVersion", "latest")]),
            false,
        ),
        case(
            "semver-gt.inverted",
            inverted(single("appVersion", "SEMVER_GT", "1.2.3")),
            props(&[("appVersion", "1.3.0")]),
            false,
        ),
        case(
            "semver-lt.smaller",
            single("appVersion", "SEMVER_LT", "2.0.0"),
            props(&[("appVersion", "1.9.9")]),
            true,
        ),
        case(
            "semver-lt.equal",
            single("appVersion", "SEMVER_LT", "2.0.0"),
            props(&[("appVersion", "2.0.0")]),
            false,
        ),
        case(
            "semver-lt.pre-release",
            single("appVersion", "SEMVER_LT", "2.0.0"),
            props(&[("appVersion", "2.0.0-beta.1")]),
            true,
        ),
        case(
            "semver-lt.inverted",
            inverted(single("appVersion", "SEMVER_LT", "2.0.0")),
            props(&[("appVersion", "1.0.0")]),
            false,
        ),
        case(
            "semver-lt.inverted-greater",
            inverted(single("appVersion", "SEMVER_LT", "2.0.0")),
            props(&[("appVersion", "3.0.0")]),
            true,
        ),
        // SEMVER_GTE and SEMVER_LTE: the same precedence, equality included.
        case(
            "semver-gte.equal",
            single("appVersion", "SEMVER_GTE", "1.2.3"),
            props(&[("appVersion", "1.2.3")]),
            true,
        ),
        case(
            "semver-gte.greater",
            single("appVersion", "SEMVER_GTE", "1.2.3"),
            props(&[("appVersion", "1.10.0")]),
            true,
        ),
        case(
            "semver-gte.smaller",
            single("appVersion", "SEMVER_GTE", "1.2.3"),
            props(&[("appVersion", "1.2.2")]),
            false,
        ),
        case(
            "semver-gte.pre-release",
            single("appVersion", "SEMVER_GTE", "1.2.3"),
            props(&[("appVersion", "1.2.3-rc.1")]),
            false,
        ),
        case(
            "semver-lte.equal",
            single("appVersion", "SEMVER_LTE", "2.0.0"),
            props(&[("appVersion", "2.0.0")]),
            true,
        ),
        case(
            "semver-lte.greater",
            single("appVersion", "SEMVER_LTE", "2.0.0"),
            props(&[("appVersion", "2.0.1")]),
            false,
        ),
        case(
            "semver-lte.pre-release",
            single("appVersion", "SEMVER_LTE", "2.0.0"),
            props(&[("appVersion", "2.0.0-beta.1")]),
            true,
        ),
        case(
            "semver-lte.inverted-greater",
            inverted(single("appVersion", "SEMVER_LTE", "2.0.0")),
            props(&[("appVersion", "3.0.0")]),
            true,
        ),
        // REGEX: the pattern matches somewhere in the context value (anchors say where);
        // case-sensitive unless `caseInsensitive`.
        case(
            "regex.matches",
            single("email", "REGEX", "^[^@]+@example\\.com$"),
            props(&[("email", "ann@example.com")]),
            true,
        ),
        case(
            "regex.does-not-match",
            single("email", "REGEX", "^[^@]+@example\\.com$"),
            props(&[("email", "ann@example.org")]),
            false,
        ),
        case(
            "regex.unanchored",
            single("userId", "REGEX", "beta-[0-9]+"),
            user("my-beta-42-user"),
            true,
        ),
        case(
            "regex.case-differs",
            single("userId", "REGEX", "^admin"),
            user("ADMIN-1"),
            false,
        ),
        case(
            "regex.case-insensitive",
            case_insensitive(single("userId", "REGEX", "^admin")),
            user("ADMIN-1"),
            true,
        ),
        case(
            "regex.field-missing",
            single("email", "REGEX", "."),
            empty(),
            false,
        ),
        // IN_CIDR: the context value is an IP address inside one of the blocks (a plain
        // address is a block of one); anything else is false.
        case(
            "in-cidr.inside",
            list("userId", "IN_CIDR", &["192.168.0.0/16", "10.0.0.0/8"]),
            user("10.1.2.3"),
            true,
        ),
        case(
            "in-cidr.outside",
            list("userId", "IN_CIDR", &["10.0.0.0/8"]),
            user("11.0.0.1"),
            false,
        ),
        case(
            "in-cidr.single-address",
            list("userId", "IN_CIDR", &["192.168.1.1"]),
            user("192.168.1.1"),
            true,
        ),
        case(
            "in-cidr.ipv6",
            list("userId", "IN_CIDR", &["2001:db8::/32"]),
            user("2001:db8::1"),
            true,
        ),
        case(
            "in-cidr.not-an-address",
            list("userId", "IN_CIDR", &["10.0.0.0/8"]),
            user("u-1"),
            false,
        ),
        case(
            "in-cidr.inverted",
            inverted(list("userId", "IN_CIDR", &["10.0.0.0/8"])),
            user("11.0.0.1"),
            true,
        ),
        // Two constraints: the strategy applies only when both hold.
        all_of(
            "and.both-hold",
            vec![
                list("plan", "IN", &["pro", "enterprise"]),
                single("age", "NUM_GTE", "18"),
            ],
            props(&[("plan", "pro"), ("age", "21")]),
            true,
        ),
        all_of(
            "and.first-fails",
            vec![
                list("plan", "IN", &["pro", "enterprise"]),
                single("age", "NUM_GTE", "18"),
            ],
            props(&[("plan", "free"), ("age", "21")]),
            false,
        ),
        all_of(
            "and.second-fails",
            vec![
                list("plan", "IN", &["pro", "enterprise"]),
                single("age", "NUM_GTE", "18"),
            ],
            props(&[("plan", "pro"), ("age", "16")]),
            false,
        ),
        all_of(
            "and.user-and-time",
            vec![
                list("userId", "STR_STARTS_WITH", &["beta-"]),
                single("currentTime", "DATE_BEFORE", "2030-01-01T00:00:00Z"),
            ],
            json!({"userId": "beta-1", "currentTime": "2029-12-31T00:00:00Z"}),
            true,
        ),
    ]
}
