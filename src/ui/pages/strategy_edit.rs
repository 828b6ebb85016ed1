//! Editing a strategy in place: its own page with the add form's fields filled with what the
//! strategy holds, saved through the service the API's strategy PUT uses (the strategy keeps
//! its id and position). A refused save shows the API's messages and keeps what was typed.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use maud::html;

use crate::domain::feature_strategy::StrategySpec;
use crate::error::ApiError;
use crate::service::feature_environments::Target;
use crate::state::AppState;
use crate::ui::form::Errors;
use crate::ui::layout::{page, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::strategy_form::{strategy_body, strategy_edit_form, Fields};
use super::toggle::active_toggle;
use super::{see_other, toggle_path, with_notice};

/// The edit page of the strategy `id` of `name` in `environment`, filled with `typed` (what a
/// refused save sent) or else with what the strategy holds.
fn render(
    state: &AppState,
    viewer: &Viewer,
    (name, environment, id): (&str, &str, &str),
    typed: Option<(&Fields, &Errors)>,
) -> PageResult {
    let config = state.service.state()?;
    let toggle = active_toggle(&config, name)?;
    let strategy = toggle
        .environment(environment)
        .strategies
        .iter()
        .find(|s| s.id == id)
        .cloned()
        .ok_or_else(|| {
            Problem(ApiError::NotFound(format!(
                "{name} has no strategy “{id}” in {environment}."
            )))
        })?;
    let held = Fields::of_strategy(&strategy);
    let no_errors = Errors::default();
    let (fields, errors, status) = match typed {
        Some((fields, errors)) => (fields, errors, errors.status()),
        None => (&held, &no_errors, StatusCode::OK),
    };
    let label = strategy.title.as_deref().unwrap_or(&strategy.name);
    let body = html! {
        p { "Toggle " a href=(toggle_path(name)) { (name) } ", environment " strong { (environment) } "." }
        (strategy_edit_form(viewer, &config, &toggle, environment, id, fields, errors))
        p { a href=(toggle_path(name)) { "Back to " (name) " without saving" } }
    };
    Ok(page(
        status,
        &format!("Edit strategy {label} in {environment}"),
        Some(viewer),
        Section::Toggles,
        body,
    ))
}

/// `GET /ui/toggles/{name}/environments/{env}/strategies/{id}`.
pub async fn form(
    viewer: Viewer,
    State(state): State<AppState>,
    Path((name, env, id)): Path<(String, String, String)>,
) -> PageResult {
    render(&state, &viewer, (&name, &env, &id), None)
}

/// `POST /ui/toggles/{name}/environments/{env}/strategies/{id}`.
pub async fn save(
    State(state): State<AppState>,
    Path((name, env, id)): Path<(String, String, String)>,
    posted: Posted<Fields>,
) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let project = super::toggle::project_of(&state, &name)?;
    let outcome = match strategy_body(&form) {
        Err(errors) => Err(errors),
        Ok(body) => {
            let spec: StrategySpec = serde_json::from_value(body)
                .map_err(|e| Problem(ApiError::bad_request("", e.to_string())))?;
            let target = Target {
                project: &project,
                feature: &name,
                environment: &env,
            };
            match state
                .service
                .update_toggle_strategy(&viewer.actor, target, &id, spec)
                .await
            {
                Ok(_) => Ok(()),
                Err(e) => Err(Errors::keeping_input(e, "")),
            }
        }
    };
    match outcome {
        Ok(()) => Ok(see_other(&with_notice(
            &toggle_path(&name),
            &format!("Strategy saved in {env}."),
        ))),
        Err(errors) => render(&state, &viewer, (&name, &env, &id), Some((&form, &errors))),
    }
}
