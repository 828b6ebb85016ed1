//! Documents per form: an environment's own configuration, segments by reference (a
//! top-level `segments`) or inlined into the strategies' constraints, a dangling segment id
//! inlined as a constraint no context meets, and unknown environments served unconfigured.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};

use super::*;
use crate::domain::config_state::ConfigState;
use crate::domain::environment::{seeded_environments, FeatureEnvironment};
use crate::domain::segment::Segment;
use crate::domain::toggle::{Constraint, Operator, Strategy as ToggleStrategy, Toggle};

fn at() -> chrono::DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000, 0).single().expect("time")
}

/// A configuration with segment 1 (`beta`, tenant in `t1`), and toggle `checkout` on in
/// `production` with a strategy referring to segments 1 and 404 (which does not exist); in
/// `default`, off with no strategies.
fn state() -> ConfigState {
    let mut state = ConfigState::default();
    for environment in seeded_environments(at()) {
        state
            .environments
            .insert(environment.name.clone(), Arc::new(environment));
    }
    let segment = Segment {
        id: 1,
        name: "beta".into(),
        description: None,
        project: None,
        constraints: vec![Constraint {
            context_name: "tenantId".into(),
            operator: Operator::In,
            values: Some(vec!["t1".into()]),
            value: None,
            inverted: None,
            case_insensitive: None,
        }],
        created_by: None,
        created_at: at(),
    };
    state.segments.insert("1".into(), Arc::new(segment));
    let mut toggle = Toggle {
        name: "checkout".into(),
        description: "".into(),
        kind: "release".into(),
        project: "default".into(),
        stale: false,
        environments: Default::default(),
        dependencies: Vec::new(),
        impression_data: None,
        created_at: at(),
        last_seen_at: None,
        tags: Vec::new(),
        archived_at: None,
    };
    *toggle.environment_mut("production") = FeatureEnvironment {
        enabled: true,
        strategies: vec![ToggleStrategy {
            segments: vec![1, 404],
            ..ToggleStrategy::named("default")
        }],
        variants: Vec::new(),
    };
    state.features.insert("checkout".into(), Arc::new(toggle));
    state.version = 1;
    state
}

/// The unfiltered document of `form` built from `state`, as JSON.
fn document(state: &ConfigState, form: DocumentForm) -> Value {
    let documents = ClientDocuments::new(form);
    documents.build(state);
    let document = documents.unfiltered.load_full().expect("built");
    serde_json::from_slice(&document.plain.to_vec()).expect("json")
}

#[test]
fn each_environment_serves_its_own_configuration() {
    let state = state();
    let production = document(&state, DocumentForm::requested("production", false, &state));
    let checkout = &production["features"][0];
    assert_eq!(checkout["enabled"], true);
    assert_eq!(checkout["strategies"][0]["segments"], json!([1, 404]));
    let default = document(&state, DocumentForm::requested("default", false, &state));
    assert_eq!(default["features"][0]["enabled"], false);
    assert_eq!(default["features"][0]["strategies"], json!([]));
}

#[test]
fn by_reference_documents_carry_the_referenced_segments() {
    let state = state();
    let served = document(&state, DocumentForm::requested("production", false, &state));
    assert_eq!(
        served["segments"],
        json!([{"id": 1, "name": "beta", "constraints": [
            {"contextName": "tenantId", "operator": "IN", "values": ["t1"]}]}])
    );
    // Every referenced segment, whatever the environment: `default` carries it too.
    let default = document(&state, DocumentForm::requested("default", false, &state));
    assert_eq!(default["segments"], served["segments"]);
}

#[test]
fn inline_documents_append_segment_constraints_and_a_dangling_id_is_unsatisfiable() {
    let state = state();
    let form = DocumentForm::requested("production", true, &state);
    assert!(form.inline_segments);
    let served = document(&state, form);
    assert!(served.get("segments").is_none(), "{served}");
    let strategy = &served["features"][0]["strategies"][0];
    assert!(
        strategy.get("segments").is_none_or(|s| s == &json!([])),
        "{strategy}"
    );
    let constraints = strategy["constraints"].as_array().expect("constraints");
    assert_eq!(constraints.len(), 2, "{strategy}");
    assert_eq!(constraints[0]["contextName"], "tenantId");
    // 404 names no segment: a constraint no context meets (the strategy is off, as for SDKs
    // that are served the id by reference).
    assert_eq!(constraints[1]["operator"], "IN");
    assert_eq!(constraints[1]["values"], json!([]));
}

#[test]
fn without_segments_inlining_is_the_default_form() {
    let mut state = state();
    state.segments = Default::default();
    assert_eq!(
        DocumentForm::requested("default", true, &state),
        DocumentForm::default()
    );
}

#[test]
fn unknown_environments_share_one_unconfigured_form() {
    let state = state();
    let one = DocumentForm::requested("nowhere", false, &state);
    assert_eq!(one, DocumentForm::requested("elsewhere", false, &state));
    let served = document(&state, one);
    assert_eq!(served["features"][0]["enabled"], false);
    assert_eq!(served["features"][0]["strategies"], json!([]));
}

#[test]
fn a_form_answers_unfiltered_polls_only_while_the_registry_holds_its_environment() {
    let mut state = state();
    let forms = ClientDocumentForms::default();
    let answered = |forms: &ClientDocumentForms, environment: &str| {
        forms.answer_unfiltered_of(environment, |response, recorded| {
            (response.version, recorded.to_string())
        })
    };
    // Not asked for yet, or not built yet: left to the general path.
    assert_eq!(answered(&forms, "production"), None);
    let production = forms
        .documents(&DocumentForm::requested("production", false, &state))
        .expect("made");
    assert_eq!(answered(&forms, "production"), None);
    production.build(&state);
    assert_eq!(
        answered(&forms, "production"),
        Some((1, "environment=production".to_string()))
    );
    // Each environment has its own forms; `default`'s by reference is the default form.
    assert_eq!(answered(&forms, "development"), None);
    forms.default_form().build(&state);
    assert_eq!(answered(&forms, "default"), Some((1, String::new())));
    // Once the registry no longer holds it, its name is served the unknown form.
    state.environments.remove("production");
    state.version = 2;
    production.build(&state);
    assert_eq!(answered(&forms, "production"), None);
}
