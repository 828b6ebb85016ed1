//! An engine built from the one before (only changed toggles compiled) must be the engine
//! built from nothing: the same digest, the same facts and the same answers. Also the
//! engines the answers' tests (`frontend`, `ofrep`) are built with.

use std::sync::Arc;

use serde_json::{json, Value};
use unleash_types::client_features::Context;

use super::engine::EnvironmentEngine;
use super::frontend::{answer_json, Scope};
use super::ofrep::bulk_json;
use crate::domain::config_state::ConfigState;
use crate::domain::segment::Segment;
use crate::domain::toggle::Toggle;

/// An engine of `default` holding `toggles` (each with `name`, `environments`, and
/// optionally `project`, `dependencies`, `impressionData`, …).
pub(super) fn engine_of(toggles: Value) -> EnvironmentEngine {
    let mut state = ConfigState::default();
    for fields in toggles.as_array().expect("a list") {
        let toggle = toggle(fields.clone());
        state.features.insert(toggle.name.to_string(), toggle);
    }
    EnvironmentEngine::build("default", &state, None).expect("compiles")
}

/// A toggle from its JSON (name, project, environments, dependencies, …).
fn toggle(mut fields: Value) -> Arc<Toggle> {
    let object = fields.as_object_mut().expect("an object");
    for (key, value) in [
        ("project", json!("default")),
        ("description", json!("")),
        ("type", json!("release")),
        ("stale", json!(false)),
        ("createdAt", json!("2026-01-01T00:00:00Z")),
    ] {
        object.entry(key).or_insert(value);
    }
    Arc::new(serde_json::from_value(fields).expect("a toggle"))
}

/// On in `default` with `strategies`.
fn on(name: &str, strategies: Value) -> Arc<Toggle> {
    toggle(
        json!({"name": name, "environments": {"default": {"enabled": true,
        "strategies": strategies}}}),
    )
}

fn rollout(group: &str, percent: u32) -> Value {
    json!([{"name": "flexibleRollout", "parameters":
        {"rollout": percent.to_string(), "stickiness": "default", "groupId": group}}])
}

fn segment(id: u32, plans: &[&str]) -> Arc<Segment> {
    Arc::new(
        serde_json::from_value(json!({"id": id, "name": format!("s{id}"),
            "constraints": [{"contextName": "plan", "operator": "IN", "values": plans}],
            "createdAt": "2026-01-01T00:00:00Z"}))
        .expect("a segment"),
    )
}

/// Toggles of every kind the engine holds: plain, rollouts, a segment user, a child and its
/// parent, and one left to yggdrasil (a rollout above 100 %) with a compiled parent.
fn first_state() -> ConfigState {
    let mut state = ConfigState::default();
    state.segments.insert("1".into(), segment(1, &["pro"]));
    let mut toggles = vec![
        on("b-parent", rollout("p", 50)),
        toggle(
            json!({"name": "c-child", "dependencies": [{"feature": "b-parent"}],
            "environments": {"default": {"enabled": true, "strategies": [{"name": "default"}]}}}),
        ),
        on("d-segment", json!([{"name": "default", "segments": [1]}])),
        toggle(
            json!({"name": "e-left", "dependencies": [{"feature": "b-parent"}],
            "environments": {"default": {"enabled": true, "strategies": rollout("e", 150)}}}),
        ),
        toggle(
            json!({"name": "f-off", "environments": {"default": {"enabled": false,
            "strategies": [{"name": "default"}]}}}),
        ),
    ];
    for i in 0..20 {
        toggles.push(on(
            &format!("g-{i:02}"),
            rollout(&format!("g{i}"), 10 * (i % 11)),
        ));
    }
    for toggle in toggles {
        state.features.insert(toggle.name.to_string(), toggle);
    }
    state
}

fn contexts() -> Vec<Context> {
    (0..40)
        .map(|i| Context {
            user_id: Some(format!("user-{i}")),
            properties: Some(
                [(
                    "plan".to_string(),
                    if i % 2 == 0 { "pro" } else { "free" }.to_string(),
                )]
                .into(),
            ),
            ..Context::default()
        })
        .collect()
}

/// The incremental engine answers, tags and knows what the one built from nothing does.
fn assert_same_engine(incremental: &EnvironmentEngine, state: &ConfigState) {
    let fresh = EnvironmentEngine::build("default", state, None).expect("builds");
    assert_eq!(incremental.digest, fresh.digest);
    assert_eq!(incremental.volatility, fresh.volatility);
    assert_eq!(incremental.reads_remote_address, fresh.reads_remote_address);
    assert_eq!(incremental.compiled_counts(), fresh.compiled_counts());
    let names = |engine: &EnvironmentEngine| -> Vec<String> {
        engine
            .toggles()
            .iter()
            .map(|t| t.name.to_string())
            .collect()
    };
    assert_eq!(names(incremental), names(&fresh));
    let scope = Scope {
        environment: "default",
        projects: None,
    };
    for context in contexts() {
        assert_eq!(
            String::from_utf8_lossy(&answer_json(incremental, &scope, &context)),
            String::from_utf8_lossy(&answer_json(&fresh, &scope, &context)),
        );
        assert_eq!(
            bulk_json(incremental, &scope, &context),
            bulk_json(&fresh, &scope, &context)
        );
    }
}

#[test]
fn a_changed_toggle_is_the_only_one_compiled_again() {
    let state = first_state();
    let first = EnvironmentEngine::build("default", &state, None).expect("builds");
    assert_eq!(first.work.compiled, 25);
    assert_eq!(first.compiled_counts(), (24, 1));

    let mut changed = state.clone();
    changed.version += 1;
    let parent = on("b-parent", rollout("p", 80));
    changed.features.insert("b-parent".into(), parent);
    let second = EnvironmentEngine::build("default", &changed, Some(&first)).expect("builds");
    assert_eq!((second.work.compiled, second.work.reused), (1, 24));
    assert_ne!(second.digest, first.digest);
    assert_same_engine(&second, &changed);
}

#[test]
fn toggles_that_come_or_go_recompile_only_those_with_dependencies() {
    let state = first_state();
    let first = EnvironmentEngine::build("default", &state, None).expect("builds");
    let mut changed = state.clone();
    // Before every other name: every place moves by one.
    changed
        .features
        .insert("a-new".into(), on("a-new", rollout("a", 30)));
    changed.features.remove("g-05");
    let second = EnvironmentEngine::build("default", &changed, Some(&first)).expect("builds");
    // The new toggle and the two with dependencies; the removed one is simply gone.
    assert_eq!((second.work.compiled, second.work.reused), (3, 22));
    assert_same_engine(&second, &changed);
}

#[test]
fn a_changed_segment_compiles_everything_again() {
    let state = first_state();
    let first = EnvironmentEngine::build("default", &state, None).expect("builds");
    let mut changed = state.clone();
    changed.segments.insert("1".into(), segment(1, &["free"]));
    let second = EnvironmentEngine::build("default", &changed, Some(&first)).expect("builds");
    assert_eq!((second.work.compiled, second.work.reused), (25, 0));
    assert_ne!(second.digest, first.digest);
    assert_same_engine(&second, &changed);
}

#[test]
fn the_same_content_reloaded_compiles_nothing() {
    let state = first_state();
    let first = EnvironmentEngine::build("default", &state, None).expect("builds");
    // As a reload from the store makes it: equal toggles in new allocations.
    let mut reloaded = state.clone();
    for (name, toggle) in state.features.iter() {
        reloaded
            .features
            .insert(name.clone(), Arc::new(Toggle::clone(toggle)));
    }
    let second = EnvironmentEngine::build("default", &reloaded, Some(&first)).expect("builds");
    assert_eq!((second.work.compiled, second.work.reused), (0, 25));
    assert_eq!(second.digest, first.digest);
    assert_same_engine(&second, &reloaded);
}

#[test]
fn a_child_left_to_yggdrasil_follows_its_parent_s_change() {
    let state = first_state();
    let first = EnvironmentEngine::build("default", &state, None).expect("builds");
    let mut changed = state.clone();
    // The parent off: both children are off for everyone.
    changed.features.insert(
        "b-parent".into(),
        toggle(
            json!({"name": "b-parent", "environments": {"default": {"enabled": false,
            "strategies": [{"name": "default"}]}}}),
        ),
    );
    let second = EnvironmentEngine::build("default", &changed, Some(&first)).expect("builds");
    for context in contexts() {
        assert!(!second.evaluate("c-child", &context).enabled);
        assert!(!second.evaluate("e-left", &context).enabled);
    }
    assert_same_engine(&second, &changed);
}

/// A disabled strategy is not served, nor part of the digest: its payloads must not make
/// OFREP answer a payload (an answer the digest, and so the ETag, would not name).
#[test]
fn a_disabled_strategy_s_payloads_do_not_count() {
    let mut state = ConfigState::default();
    let toggle = toggle(
        json!({"name": "t", "environments": {"default": {"enabled": true,
        "strategies": [{"name": "default"}, {"name": "default", "disabled": true,
            "variants": [{"name": "v", "weight": 1000, "weightType": "variable",
                "stickiness": "default", "payload": {"type": "string", "value": "x"}}]}]}}}),
    );
    state.features.insert("t".into(), toggle);
    let engine = EnvironmentEngine::build("default", &state, None).expect("builds");
    let facts = engine.toggle("t").expect("the toggle");
    assert!(!facts.has_payloads);
}
