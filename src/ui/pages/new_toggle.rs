//! A new toggle: name (checked as it is typed), project, type and description; created as
//! the API's project route creates it (off, no strategies, in every environment).

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;

use crate::domain::feature_type::FEATURE_TYPES;
use crate::service::feature_environments::NewProjectFeature;
use crate::state::AppState;
use crate::ui::form::{text_field, Errors};
use crate::ui::layout::{csrf, page, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::toggles::select;
use super::{see_other, segment, with_notice};

/// The form's fields.
#[derive(Deserialize, Default)]
pub struct NewToggleForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    project: String,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    description: String,
}

fn render(state: &AppState, viewer: &Viewer, form: &NewToggleForm, errors: &Errors) -> PageResult {
    let config = state.service.state()?;
    let mut projects = vec![("default".to_string(), "default".to_string())];
    projects.extend(
        config
            .projects
            .keys()
            .filter(|p| p.as_str() != "default")
            .map(|p| (p.clone(), p.clone())),
    );
    let kinds: Vec<(String, String)> = FEATURE_TYPES
        .iter()
        .map(|t| (t.id.to_string(), format!("{} — {}", t.name, t.description)))
        .collect();
    let kind = if form.kind.is_empty() {
        "release"
    } else {
        &form.kind
    };
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    Ok(page(
        status,
        "New toggle",
        Some(viewer),
        Section::NewToggle,
        html! {
            (errors.summary())
            form method="post" action="/ui/new-toggle" {
                (csrf(viewer))
                label for="f-name" { "Name" }
                input type="text" id="f-name" name="name" value=(form.name) required
                    autocomplete="off" spellcheck="false"
                    aria-invalid=[errors.has("name").then_some("true")]
                    aria-describedby="f-name-check"
                    hx-get="/ui/new-toggle/name-check" hx-trigger="input changed delay:250ms"
                    hx-target="#f-name-check" hx-swap="outerHTML" hx-sync="this:replace";
                @if errors.has("name") {
                    small.error #f-name-check aria-live="polite" { (errors.about_text("name")) }
                } @else {
                    small #f-name-check aria-live="polite" { "Letters, digits and - _ . ! ~ * ' ( ); 2–100 characters." }
                }
                (select("Project", "project", &form.project, &projects))
                (select("Type", "type", kind, &kinds))
                (text_field("Description (optional)", "description", &form.description, errors, None))
                button type="submit" { "Create toggle" }
            }
        },
    ))
}

/// `GET /ui/new-toggle`.
pub async fn form(viewer: Viewer, State(state): State<AppState>) -> PageResult {
    render(
        &state,
        &viewer,
        &NewToggleForm::default(),
        &Errors::default(),
    )
}

/// `POST /ui/new-toggle`.
pub async fn submit(State(state): State<AppState>, posted: Posted<NewToggleForm>) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let project = if form.project.is_empty() {
        "default"
    } else {
        &form.project
    };
    let spec: NewProjectFeature = serde_json::from_value(serde_json::json!({
        "name": form.name.trim(),
        "type": if form.kind.is_empty() { "release" } else { &form.kind },
        "description": form.description,
    }))
    .map_err(|e| Problem(crate::error::ApiError::bad_request("", e.to_string())))?;
    match state
        .service
        .create_project_toggle(&viewer.actor, project, spec)
        .await
    {
        Ok(toggle) => Ok(see_other(&with_notice(
            &format!("/ui/toggles/{}", segment(&toggle.name)),
            "Toggle created. It is off in every environment.",
        ))),
        Err(e) => render(&state, &viewer, &form, &Errors::of(e, "name")?),
    }
}

/// `?name=`: the name typed so far.
#[derive(Deserialize)]
pub struct NameQuery {
    #[serde(default)]
    name: String,
}

/// `GET /ui/new-toggle/name-check`: whether the name typed so far can be used (for htmx).
pub async fn name_check(
    _viewer: Viewer,
    State(state): State<AppState>,
    Query(query): Query<NameQuery>,
) -> Response {
    let name = query.name.trim();
    let markup = match state.service.validate_toggle_name(name) {
        _ if name.is_empty() => {
            html! { small #f-name-check aria-live="polite" { "Enter a name." } }
        }
        Ok(()) => html! { small.ok #f-name-check aria-live="polite" { "“" (name) "” is free." } },
        Err(e) => {
            let message = crate::error::ApiError::from(e).to_string();
            html! { small.error #f-name-check aria-live="polite" { (message) } }
        }
    };
    markup.into_response()
}
