//! Differential tests: random toggles over every shape the evaluator compiles (and some it
//! leaves to yggdrasil), random contexts, and the compiled answer must be yggdrasil's.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use proptest::prelude::*;
use serde_json::{json, Value};
use unleash_types::client_features::{ClientFeatures, Context, Payload};
use unleash_yggdrasil::EngineState;

use super::CompiledToggles;

const NAMES: [&str; 5] = ["t0", "t1", "t2", "t3", "t4"];

fn pick<T: Clone + std::fmt::Debug + 'static>(items: &[T]) -> impl Strategy<Value = T> {
    prop::sample::select(items.to_vec())
}

/// Values a constraint may test: plain words, numbers, dates, versions, addresses, patterns
/// and text that does not survive yggdrasil's quoting.
fn a_value() -> impl Strategy<Value = String> {
    let plain = pick(&[
        "pro",
        "team",
        "PRO",
        "web",
        "Web",
        "u1",
        "u2",
        "user-3",
        "1.2.3",
        "2.0.0-beta.1",
        "v1.2.3",
        "18",
        "42.5",
        "-3",
        "1e2",
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00.000+02:00",
        "2030-01-01T00:00:00Z",
        "10.0.0.0/8",
        "192.168.1.7",
        "::1/128",
        "^u[0-9]$",
        "(",
    ]);
    // Rarer: what yggdrasil's rule text does not read back, or its grammar not whole.
    let odd = pick(&["bad", "a\"b", "ends\\", "", " 5", "1.2", "01.2.3"]);
    prop_oneof![6 => plain, 1 => odd].prop_map(str::to_string)
}

fn a_field() -> impl Strategy<Value = String> {
    pick(&[
        "userId",
        "sessionId",
        "appName",
        "environment",
        "remoteAddress",
        "currentTime",
        "plan",
        "region",
        "version",
        "age",
    ])
    .prop_map(str::to_string)
}

fn a_constraint() -> impl Strategy<Value = Value> {
    let operators = pick(&[
        "IN",
        "NOT_IN",
        "STR_STARTS_WITH",
        "STR_ENDS_WITH",
        "STR_CONTAINS",
        "NUM_EQ",
        "NUM_GT",
        "NUM_GTE",
        "NUM_LT",
        "NUM_LTE",
        "DATE_AFTER",
        "DATE_BEFORE",
        "SEMVER_EQ",
        "SEMVER_GT",
        "SEMVER_GTE",
        "SEMVER_LT",
        "SEMVER_LTE",
        "REGEX",
        "IN_CIDR",
        "NOT_A_THING",
    ]);
    (
        a_field(),
        operators,
        prop::collection::vec(a_value(), 0..4),
        prop::option::weighted(0.9, a_value()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(field, operator, values, value, inverted, ci)| {
            let mut c = json!({"contextName": field, "operator": operator, "values": values,
                               "inverted": inverted, "caseInsensitive": ci});
            if let Some(value) = value {
                c["value"] = json!(value);
            }
            c
        })
}

/// Stickiness fields every generated context sets (no randomness in the answers).
fn a_stickiness() -> impl Strategy<Value = Option<String>> {
    prop::option::of(
        pick(&["default", "userId", "sessionId", "plan", "appName"]).prop_map(str::to_string),
    )
}

fn a_payload() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(
        pick(&[("string", "b"), ("json", "{\"a\":1}"), ("number", "7")])
            .prop_map(|(kind, value)| json!({"type": kind, "value": value})),
    )
}

fn strategy_variants() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(
        (pick(&["sv1", "sv2", "sv3"]), 0..1000i32, a_payload()),
        0..3,
    )
    .prop_map(|variants| {
        variants
            .into_iter()
            .enumerate()
            .map(|(i, (name, weight, payload))| {
                // Now and then all zero (or negative): no variant, never a panic.
                let weight = match i {
                    0 if weight < 30 => -weight,
                    0 if weight < 100 => 0,
                    0 => weight,
                    _ if weight < 50 => 0,
                    _ => weight,
                };
                let mut v = json!({"name": name, "weight": weight, "weightType": "variable",
                                   "stickiness": "default"});
                if let Some(p) = payload {
                    v["payload"] = p;
                }
                v
            })
            .collect()
    })
}

fn a_strategy() -> impl Strategy<Value = Value> {
    let kinds = pick(&[
        "default",
        "userWithId",
        "flexibleRollout",
        "gradualRolloutUserId",
        "gradualRolloutSessionId",
        "gradualRolloutRandom",
        "remoteAddress",
        "applicationHostname",
        "myCustom",
    ]);
    let percents = pick(&["0", "1", "33", "50", "99", "100", "101", "x", "07"]);
    (
        kinds,
        percents,
        a_stickiness(),
        prop::option::of(pick(&["g1", "g2", "grp \"q\""])),
        prop::collection::vec(a_constraint(), 0..2),
        // 9 is no segment: the toggle is off.
        prop::collection::vec(pick(&[1, 2, 3, 1, 2, 3, 9]), 0..2),
        strategy_variants(),
    )
        .prop_map(
            |(kind, percent, stickiness, group, constraints, segments, variants)| {
                let mut params = serde_json::Map::new();
                match kind {
                    "userWithId" => {
                        params.insert("userIds".into(), json!("u1, u2,user-3 , u9"));
                    }
                    "flexibleRollout" => {
                        params.insert("rollout".into(), json!(percent));
                        if let Some(s) = stickiness {
                            params.insert("stickiness".into(), json!(s));
                        }
                    }
                    "gradualRolloutUserId" | "gradualRolloutSessionId" => {
                        params.insert("percentage".into(), json!(percent));
                    }
                    // Only the certain answers (0 and 100 and above) are compared.
                    "gradualRolloutRandom" => {
                        let certain = if percent == "0" || percent == "x" {
                            percent
                        } else {
                            "100"
                        };
                        params.insert("percentage".into(), json!(certain));
                    }
                    "remoteAddress" => {
                        params.insert("IPs".into(), json!("10.0.0.0/8, 192.168.1.7,bad"));
                    }
                    "applicationHostname" => {
                        params.insert("hostNames".into(), json!("a.example, b"));
                    }
                    _ => {}
                }
                if let Some(group) = group {
                    params.insert("groupId".into(), json!(group));
                }
                json!({"name": kind, "parameters": params, "constraints": constraints,
                   "segments": segments, "variants": variants})
            },
        )
}

fn toggle_variants() -> impl Strategy<Value = Vec<Value>> {
    (
        prop::collection::vec(
            (pick(&["blue", "green", "red"]), 0..1000i32, a_payload()),
            0..4,
        ),
        a_stickiness(),
        prop::option::of((a_field(), prop::collection::vec(a_value(), 1..3))),
    )
        .prop_map(|(variants, stickiness, an_override)| {
            variants
                .into_iter()
                .enumerate()
                .map(|(i, (name, weight, payload))| {
                    // Now and then zero or negative: not weighable, no variant.
                    let weight = match i {
                        0 if weight < 10 => -1,
                        0 if weight < 40 => 0,
                        _ => weight,
                    };
                    let mut v = json!({"name": name, "weight": weight, "weightType": "variable"});
                    if let Some(s) = &stickiness {
                        v["stickiness"] = json!(s);
                    }
                    if let Some(p) = payload {
                        v["payload"] = p;
                    }
                    if let (1, Some((field, values))) = (i, &an_override) {
                        v["overrides"] = json!([{"contextName": field, "values": values}]);
                    }
                    v
                })
                .collect()
        })
}

fn a_dependency() -> impl Strategy<Value = Value> {
    (
        pick(&["t0", "t1", "t2", "missing"]),
        prop::option::of(any::<bool>()),
        prop::option::of(prop::collection::vec(
            pick(&["blue", "sv1", "disabled"]),
            0..2,
        )),
    )
        .prop_map(|(feature, enabled, variants)| {
            let mut d = json!({"feature": feature});
            if let Some(e) = enabled {
                d["enabled"] = json!(e);
            }
            if let Some(v) = variants {
                d["variants"] = json!(v);
            }
            d
        })
}

fn a_document() -> impl Strategy<Value = Value> {
    let toggle = (
        any::<bool>(),
        prop::collection::vec(a_strategy(), 0..3),
        toggle_variants(),
        prop::collection::vec(a_dependency(), 0..2),
    );
    (
        prop::collection::vec(toggle, 1..=NAMES.len()),
        prop::collection::vec(prop::collection::vec(a_constraint(), 0..2), 3),
    )
        .prop_map(|(toggles, segments)| {
            let features: Vec<Value> = toggles
                .into_iter()
                .enumerate()
                .map(|(i, (enabled, strategies, variants, dependencies))| {
                    json!({"name": NAMES[i], "enabled": enabled, "strategies": strategies,
                           "variants": variants, "dependencies": dependencies})
                })
                .collect();
            let segments: Vec<Value> = segments
                .into_iter()
                .enumerate()
                .map(|(i, constraints)| json!({"id": i + 1, "constraints": constraints}))
                .collect();
            json!({"version": 2, "features": features, "segments": segments})
        })
}

/// A value of the pool constraint values are drawn from (so that equal, below and above all
/// occur), or of a few the constraints never name.
fn a_context_value(others: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![3 => a_value(), 1 => pick(others).prop_map(str::to_string)])
}

/// Contexts with `userId` and `sessionId` (most), only `sessionId`, or neither (the default
/// stickiness then falls back to `sessionId`, or to chance).
fn a_context() -> impl Strategy<Value = Context> {
    (
        pick(&["u1", "u2", "u9", "user-3", "x7", "u1000", "ü"]),
        pick(&["s1", "s2", "s3"]),
        prop_oneof![5 => Just((true, true)), 3 => Just((false, true)), 2 => Just((false, false))],
        pick(&["web", "Web-app", "mobile"]),
        pick(&["pro", "team", "free", "PRO"]),
        a_context_value(&["1.2.3-alpha", "x", "1.2.4"]),
        a_context_value(&["17", "abc", "18.5"]),
        prop::option::of(pick(&["10.0.0.1", "192.168.1.7", "::1", "bad"])),
        a_context_value(&["2023-06-01T00:00:00Z", "bad"]),
    )
        .prop_map(
            |(user, session, (has_user, has_session), app, plan, version, age, address, time)| {
                let mut properties = std::collections::HashMap::new();
                properties.insert("plan".to_string(), plan.to_string());
                for (name, value) in [("version", version), ("age", age)] {
                    if let Some(value) = value {
                        properties.insert(name.to_string(), value);
                    }
                }
                Context {
                    user_id: has_user.then(|| user.into()),
                    session_id: has_session.then(|| session.into()),
                    environment: Some("production".into()),
                    app_name: Some(app.into()),
                    current_time: time,
                    remote_address: address.map(str::to_string),
                    properties: Some(properties),
                }
            },
        )
}

/// What is compared of an answer: on, the variant's name, whether one was chosen, its payload.
type Answer = (bool, String, bool, Option<Payload>);

/// Every toggle of `document`, for every context: the compiled answer (where it compiles)
/// is yggdrasil's. Returns how many toggles compiled.
fn assert_same(document: &Value, contexts: &[Context]) -> Result<usize, TestCaseError> {
    let features: ClientFeatures =
        serde_json::from_value(document.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let compiled = CompiledToggles::build(&features);
    let engine = EngineState::default();
    // yggdrasil panics on unweighable variants: it is fed what the engine feeds it.
    let mut fed = features.clone();
    super::drop_unweighable_variants(&mut fed);
    let _ = engine.apply_client_features(fed);
    let mut count = 0;
    // The whole document only when it is small enough to read.
    let shown = if features.features.len() <= NAMES.len() {
        document.to_string()
    } else {
        String::from("(the benchmark's toggles)")
    };
    let sticks_to_user_id = document.to_string().contains(r#""stickiness":"userId""#);
    for (index, feature) in features.features.iter().enumerate() {
        for context in contexts {
            let got = |compiled: &CompiledToggles| -> Option<Answer> {
                let verdict = compiled.evaluate(index, context)?;
                Some((
                    verdict.enabled,
                    verdict.variant.map_or("disabled", |v| &*v.name).to_string(),
                    verdict.variant.is_some(),
                    verdict.variant.and_then(|v| v.payload.clone()),
                ))
            };
            let want = || -> Answer {
                let expected = engine.get_variant(&feature.name, context, &None);
                (
                    expected.feature_enabled,
                    expected.name,
                    expected.enabled,
                    expected.payload,
                )
            };
            let Some(answer) = got(&compiled) else {
                continue;
            };
            let expected = want();
            let whole = context.user_id.is_some() && context.session_id.is_some();
            // A stickiness on a missing field is left to chance: then compared only where
            // neither side gives two answers in 16 tries. With `sessionId` alone, only a
            // `userId` stickiness is (the default one must read `sessionId`).
            let chance = match (context.user_id.is_some(), context.session_id.is_some()) {
                (true, true) => false,
                (false, true) => sticks_to_user_id,
                _ => true,
            };
            if chance {
                let random = (0..16).any(|_| want() != expected)
                    || (0..16).any(|_| got(&compiled).as_ref() != Some(&answer));
                if random {
                    continue;
                }
            }
            ANSWERS.fetch_add(1, Relaxed);
            if expected.0 {
                ENABLED.fetch_add(1, Relaxed);
            }
            if expected.2 {
                WITH_VARIANT.fetch_add(1, Relaxed);
            }
            prop_assert_eq!(
                answer,
                expected,
                "{} for {:?} in {}",
                feature.name,
                context,
                shown
            );
            let enabled = engine.is_enabled(&feature.name, context, &None);
            if whole {
                prop_assert_eq!(
                    compiled.is_enabled(index, context),
                    Some(enabled),
                    "is_enabled {} for {:?}",
                    feature.name,
                    context
                );
            }
        }
        if compiled.evaluate(index, &Context::default()).is_some() {
            count += 1;
        }
    }
    Ok(count)
}

/// Toggles generated and compiled, and compiled answers compared (on, with a variant), across
/// the property test's cases: it must exercise the compiled path, and not only toggles off.
static GENERATED: AtomicUsize = AtomicUsize::new(0);
static COMPILED: AtomicUsize = AtomicUsize::new(0);
static ANSWERS: AtomicUsize = AtomicUsize::new(0);
static ENABLED: AtomicUsize = AtomicUsize::new(0);
static WITH_VARIANT: AtomicUsize = AtomicUsize::new(0);

/// Random documents and contexts (a fixed seed, so every run checks the same cases): the
/// compiled answers are yggdrasil's, most generated toggles compile, and the answers compared
/// are not only toggles off.
#[test]
fn compiled_answers_are_yggdrasil_s() {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let config = Config {
        cases: 2000,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let cases = (a_document(), prop::collection::vec(a_context(), 1..6));
    let result = runner.run(&cases, |(document, contexts)| {
        let compiled = assert_same(&document, &contexts)?;
        let generated = document["features"].as_array().map_or(0, Vec::len);
        GENERATED.fetch_add(generated, Relaxed);
        COMPILED.fetch_add(compiled, Relaxed);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    let generated = GENERATED.load(Relaxed);
    let compiled = COMPILED.load(Relaxed);
    let (answers, enabled, variants) = (
        ANSWERS.load(Relaxed),
        ENABLED.load(Relaxed),
        WITH_VARIANT.load(Relaxed),
    );
    eprintln!(
        "{compiled} of {generated} generated toggles compiled; {answers} compiled answers \
         compared, {enabled} on, {variants} with a variant"
    );
    assert!(compiled * 2 >= generated, "{compiled} of {generated}");
    assert!(enabled * 7 >= answers && variants * 10 >= answers);
}

/// Each NUM_, DATE_ and SEMVER_ operator for a value below, equal to and above the
/// constraint's, and each STR_ operator with and without caseInsensitive: yggdrasil's answers.
#[test]
fn each_comparison_operator_answers_as_yggdrasil_does() {
    let mut features = Vec::new();
    let mut constrained = |operator: &str, field: &str, value: &str, ci: bool| {
        let name = format!("{operator}-{ci}");
        features.push(
            json!({"name": name, "enabled": true, "strategies": [{"name": "default",
            "constraints": [{"contextName": field, "operator": operator, "value": value,
                             "values": [value], "caseInsensitive": ci}]}]}),
        );
    };
    for operator in ["NUM_EQ", "NUM_GT", "NUM_GTE", "NUM_LT", "NUM_LTE"] {
        constrained(operator, "age", "10", false);
    }
    for operator in ["DATE_AFTER", "DATE_BEFORE"] {
        constrained(operator, "currentTime", "2024-01-01T00:00:00Z", false);
    }
    for operator in [
        "SEMVER_EQ",
        "SEMVER_GT",
        "SEMVER_GTE",
        "SEMVER_LT",
        "SEMVER_LTE",
    ] {
        constrained(operator, "version", "1.2.3", false);
    }
    for operator in ["STR_STARTS_WITH", "STR_ENDS_WITH", "STR_CONTAINS"] {
        constrained(operator, "plan", "PRO", false);
        constrained(operator, "plan", "PRO", true);
    }
    let count = features.len();
    let document = json!({"version": 2, "features": features});
    let contexts: Vec<Context> = [
        ("9", "2023-12-31T23:59:59Z", "1.2.2", "pro"),
        ("10", "2024-01-01T00:00:00Z", "1.2.3", "PRO"),
        ("11", "2024-01-01T00:00:01Z", "1.2.4", "Pro"),
    ]
    .iter()
    .map(|(age, time, version, plan)| Context {
        user_id: Some("u1".into()),
        current_time: Some((*time).into()),
        properties: Some(
            [("age", *age), ("version", *version), ("plan", *plan)]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        ),
        ..Context::default()
    })
    .collect();
    let compiled = assert_same(&document, &contexts).expect("the same answers");
    assert_eq!(compiled, count);
}

/// A parent's rollout without a group id hashes with the child's name (as yggdrasil
/// evaluates a dependency): 200 users, compared.
#[test]
fn a_parent_s_rollout_hashes_with_the_child_s_name() {
    let document = json!({"version": 2, "features": [
        {"name": "parent", "enabled": true, "strategies": [{"name": "flexibleRollout",
            "parameters": {"rollout": "50", "stickiness": "default"}}]},
        {"name": "child", "enabled": true, "strategies": [{"name": "default"}],
         "dependencies": [{"feature": "parent"}]},
    ]});
    let contexts: Vec<Context> = (0..200)
        .map(|i| Context {
            user_id: Some(format!("user-{i}")),
            ..Context::default()
        })
        .collect();
    let compiled = assert_same(&document, &contexts).expect("the same answers");
    assert_eq!(compiled, 2);
}

/// The load test's toggles (loadtest/frontend.py `document()`) all compile and answer as
/// yggdrasil does.
#[test]
fn the_benchmark_s_toggles_compile_and_agree() {
    let mut features = Vec::new();
    for i in 0..100 {
        let name = format!("bench.{i:05}");
        let strategies = match i % 5 {
            0 => json!([{"name": "flexibleRollout", "parameters":
                {"rollout": "50", "stickiness": "default", "groupId": name}}]),
            1 => json!([{"name": "default", "constraints": [
                {"contextName": "plan", "operator": "IN", "values": ["pro", "team"]}]}]),
            2 => {
                let ids: Vec<String> = (i..i + 20).map(|j| format!("user-{j}")).collect();
                json!([{"name": "userWithId", "parameters": {"userIds": ids.join(",")}}])
            }
            3 => json!([{"name": "flexibleRollout", "parameters":
                {"rollout": "100", "stickiness": "default", "groupId": name},
                "constraints": [{"contextName": "appName", "operator": "STR_STARTS_WITH",
                                 "values": ["web"]}]}]),
            _ => json!([{"name": "default"}]),
        };
        let mut feature = json!({"name": name, "enabled": i % 10 != 9, "strategies": strategies});
        if i % 4 == 0 {
            feature["variants"] = json!([
                {"name": "blue", "weight": 500, "stickiness": "default",
                 "payload": {"type": "string", "value": "b"}},
                {"name": "green", "weight": 500, "stickiness": "default"}]);
        }
        features.push(feature);
    }
    let document = json!({"version": 2, "features": features});
    let contexts: Vec<Context> = (0..50)
        .map(|i| Context {
            user_id: Some(format!("user-{i}")),
            app_name: Some(if i % 2 == 0 { "web" } else { "ios" }.into()),
            properties: Some([("plan".to_string(), "pro".to_string())].into()),
            ..Context::default()
        })
        .collect();
    let compiled = assert_same(&document, &contexts).expect("the same answers");
    assert_eq!(compiled, 100);
}

/// A context without `userId` or `sessionId` rolls out at random: about half of a 50% rollout.
#[test]
fn a_random_stickiness_rolls_out_about_its_percentage() {
    let document = json!({"version": 2, "features": [{"name": "r", "enabled": true,
        "strategies": [{"name": "flexibleRollout", "parameters":
            {"rollout": "50", "stickiness": "default", "groupId": "r"}}]}]});
    let features: ClientFeatures = serde_json::from_value(document).expect("features");
    let compiled = CompiledToggles::build(&features);
    let on = (0..4000)
        .filter(|_| compiled.is_enabled(0, &Context::default()) == Some(true))
        .count();
    assert!((1700..2300).contains(&on), "{on} of 4000");
}

/// A toggle left to yggdrasil leaves its children, and theirs, to it too, however long the
/// chain; toggles off that chain stay compiled.
#[test]
fn a_parent_left_to_yggdrasil_takes_its_descendants_along() {
    // `root` has a rollout above 100 %, which is not compiled; then a chain of 500 below it.
    let mut features = vec![json!({"name": "root", "enabled": true, "strategies": [
        {"name": "flexibleRollout", "parameters": {"rollout": "150", "stickiness": "default"}}]})];
    for i in 0..500 {
        let parent = if i == 0 {
            "root".to_string()
        } else {
            format!("c{}", i - 1)
        };
        features.push(json!({"name": format!("c{i}"), "enabled": true,
            "strategies": [{"name": "default"}], "dependencies": [{"feature": parent}]}));
    }
    features.push(json!({"name": "apart", "enabled": true, "strategies": [{"name": "default"}]}));
    features.push(json!({"name": "apart-child", "enabled": true,
        "strategies": [{"name": "default"}], "dependencies": [{"feature": "apart"}]}));
    let features: ClientFeatures =
        serde_json::from_value(json!({"version": 2, "features": features})).expect("features");
    let compiled = CompiledToggles::build(&features);
    assert!(!compiled.is_compiled("root"));
    assert!((0..500).all(|i| !compiled.is_compiled(&format!("c{i}"))));
    assert!(compiled.is_compiled("apart") && compiled.is_compiled("apart-child"));
    assert_eq!(compiled.counts(), (2, 501));
}

/// `applicationHostname` compiles to what yggdrasil answers for the host name it reads (in test
/// builds, with its `hostname` feature, the machine's): a list naming this machine and one
/// that does not, beside a constraint.
#[test]
fn application_hostname_compiles_to_yggdrasil_s_constant_answer() {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_default();
    let document = json!({"version": 2, "features": [
        {"name": "here", "enabled": true, "strategies": [{"name": "applicationHostname",
            "parameters": {"hostNames": format!("elsewhere, {}", machine.to_uppercase())}}]},
        {"name": "there", "enabled": true, "strategies": [{"name": "applicationHostname",
            "parameters": {"hostNames": "elsewhere.example"}}]},
        {"name": "here-for-pro", "enabled": true, "strategies": [{"name": "applicationHostname",
            "parameters": {"hostNames": machine},
            "constraints": [{"contextName": "plan", "operator": "IN", "values": ["pro"]}]}]},
    ]});
    let contexts: Vec<Context> = ["pro", "free"]
        .iter()
        .map(|plan| Context {
            properties: Some([("plan".to_string(), plan.to_string())].into()),
            ..Context::default()
        })
        .collect();
    let compiled = assert_same(&document, &contexts).expect("the same answers");
    assert_eq!(compiled, 3);
    if !machine.is_empty() && std::env::var_os("hostname").is_none() {
        let features: ClientFeatures = serde_json::from_value(document).expect("features");
        let toggles = CompiledToggles::build(&features);
        assert_eq!(toggles.is_enabled(0, &contexts[1]), Some(true));
        assert_eq!(toggles.is_enabled(1, &contexts[1]), Some(false));
    }
}
