//! The playground: a context in, each toggle's answer and its explanation out, from the
//! engines the frontend API and the SDKs' evaluation share (`evaluation::playground`).

use axum::extract::State;
use axum::http::StatusCode;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::domain::feature_view::environments_in_order;
use crate::error::ApiError;
use crate::evaluation::frontend::Scope;
use crate::evaluation::playground::{explain, PlaygroundFeature};
use crate::evaluation::EvaluationContext;
use crate::state::AppState;
use crate::ui::form::Errors;
use crate::ui::layout::{csrf, page, Section};
use crate::ui::problem::PageResult;
use crate::ui::session::{Posted, Viewer};

/// The form's fields.
#[derive(Deserialize, Default)]
pub struct PlaygroundForm {
    #[serde(default)]
    environment: String,
    #[serde(default, rename = "userId")]
    user_id: String,
    #[serde(default)]
    properties: String,
}

fn results(features: &[PlaygroundFeature]) -> Markup {
    html! {
        h2 #h-results { "Results" }
        div.table-scroll tabindex="0" role="region" aria-labelledby="h-results" {
            table {
                thead { tr { th scope="col" { "Toggle" } th scope="col" { "Result" } th scope="col" { "Variant" } th scope="col" { "Why" } } }
                tbody {
                    @for f in features {
                        tr {
                            th scope="row" { (f.name) }
                            td { @if f.is_enabled { strong { "On" } } @else { "Off" } }
                            td { (f.variant.name) }
                            td {
                                @if !f.is_enabled_in_current_environment { "Switched off in this environment. " }
                                @if f.has_unsatisfied_dependency { "A parent toggle is not as required. " }
                                @if f.strategies.data.is_empty() && f.is_enabled_in_current_environment { "No strategies. " }
                                ul {
                                    @for s in &f.strategies.data {
                                        li {
                                            (s.title.as_deref().unwrap_or(&s.name)) ": "
                                            (if s.result.enabled { "passes" } else { "does not pass" })
                                            @if s.disabled { " (disabled)" }
                                            @for c in &s.constraints {
                                                br; small { "constraint " (serde_json::to_string(c).unwrap_or_default()) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn render(
    state: &AppState,
    viewer: &Viewer,
    form: &PlaygroundForm,
    errors: &Errors,
    features: Option<&[PlaygroundFeature]>,
) -> PageResult {
    let config = state.service.state()?;
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let body = html! {
        (errors.summary())
        form method="post" action="/ui/playground" {
            (csrf(viewer))
            label for="f-environment" { "Environment"
                select id="f-environment" name="environment" {
                    @for e in environments_in_order(&config) {
                        option value=(e.name) selected[e.name == form.environment] { (e.name) }
                    }
                }
            }
            label for="f-userId" { "User id" input type="text" id="f-userId" name="userId" value=(form.user_id); }
            label for="f-properties" { "Other context fields (one name=value a line)"
                textarea id="f-properties" name="properties" rows="3"
                    aria-invalid=[errors.has("context").then_some("true")] { (form.properties) }
            }
            (errors.under("f-properties", "context"))
            button type="submit" { "Evaluate" }
        }
        @if let Some(features) = features { (results(features)) }
    };
    Ok(page(
        status,
        "Playground",
        Some(viewer),
        Section::Playground,
        body,
    ))
}

/// `GET /ui/playground`.
pub async fn form(viewer: Viewer, State(state): State<AppState>) -> PageResult {
    render(
        &state,
        &viewer,
        &PlaygroundForm::default(),
        &Errors::default(),
        None,
    )
}

/// `POST /ui/playground`: evaluates and shows the results (a read: nothing changes).
pub async fn run(State(state): State<AppState>, posted: Posted<PlaygroundForm>) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let config = state.service.state()?;
    let environment = if form.environment.is_empty() {
        "default".to_string()
    } else {
        form.environment.clone()
    };
    if !config.environments.contains_key(&environment) {
        return render(
            &state,
            &viewer,
            &form,
            &Errors::field("environment", "No such environment."),
            None,
        );
    }
    let mut object = Map::new();
    object.insert("environment".into(), Value::String(environment.clone()));
    if !form.user_id.trim().is_empty() {
        object.insert("userId".into(), Value::String(form.user_id.trim().into()));
    }
    let mut properties = Map::new();
    for line in form.properties.lines().filter(|l| !l.trim().is_empty()) {
        let Some((k, v)) = line.split_once('=') else {
            return render(
                &state,
                &viewer,
                &form,
                &Errors::field("context", format!("“{}” is not name=value.", line.trim())),
                None,
            );
        };
        let (k, v) = (k.trim(), Value::String(v.trim().into()));
        match k {
            "appName" | "sessionId" | "remoteAddress" | "currentTime" => {
                object.insert(k.into(), v);
            }
            _ => {
                properties.insert(k.into(), v);
            }
        }
    }
    if !properties.is_empty() {
        object.insert("properties".into(), Value::Object(properties));
    }
    let context = match EvaluationContext::from_object(object) {
        Ok(context) => context,
        Err(e) => {
            return render(
                &state,
                &viewer,
                &form,
                &Errors::field("context", e.to_string()),
                None,
            )
        }
    };
    let engine =
        state.evaluator.engine(&environment).await.ok_or_else(|| {
            ApiError::Unavailable("The evaluation engine is not built yet".into())
        })?;
    let scope = Scope {
        environment: &environment,
        projects: None,
    };
    let features = explain(&config, &engine, &scope, &context.to_engine());
    render(&state, &viewer, &form, &Errors::default(), Some(&features))
}
