//! API tokens: the list (never their secrets) with a delete button per token (by its listed
//! id), and a form creating one whose secret is shown once, on the answer to the form (not
//! behind a redirect: it must not reach a URL).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::html;
use serde::Deserialize;

use crate::domain::api_token::TokenSpec;
use crate::domain::feature_view::environments_in_order;
use crate::error::ApiError;
use crate::state::AppState;
use crate::ui::form::{text_field, Errors};
use crate::ui::layout::{csrf, page, time, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::toggles::{select, Notice};
use super::{see_other, with_notice};

/// The form's fields.
#[derive(Deserialize, Default)]
pub struct TokenForm {
    #[serde(default, rename = "tokenName")]
    token_name: String,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    environment: String,
    #[serde(default)]
    project: String,
}

fn render(
    state: &AppState,
    viewer: &Viewer,
    form: &TokenForm,
    errors: &Errors,
    created: Option<(&str, &str)>,
    notice: Option<&str>,
) -> PageResult {
    let config = state.service.state()?;
    let tokens = state.service.api_tokens()?;
    let pair = |v: &str, t: &str| (v.to_string(), t.to_string());
    let mut environments = vec![pair("", "default (admin tokens: all)")];
    environments.extend(
        environments_in_order(&config)
            .into_iter()
            .map(|e| pair(&e.name, &e.name)),
    );
    let mut projects = vec![pair("*", "All projects")];
    projects.push(pair("default", "default"));
    projects.extend(
        config
            .projects
            .keys()
            .filter(|p| p.as_str() != "default")
            .map(|p| pair(p, p)),
    );
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let body = html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if let Some((name, secret)) = created {
            section.notice role="status" aria-labelledby="h-secret" {
                h2 #h-secret { "Token “" (name) "” created" }
                p { "Copy its secret now: it is shown only this once." }
                label for="f-secret" { "Secret of " (name) }
                input type="text" id="f-secret" readonly value=(secret);
                button type="button" data-copy="#f-secret" { "Copy secret" }
            }
        }
        section aria-labelledby="h-new" {
            h2 #h-new { "New token" }
            (errors.summary())
            form method="post" action="/ui/tokens" {
                (csrf(viewer))
                (text_field("Token name", "tokenName", &form.token_name, errors, None))
                (select("Type", "type", if form.kind.is_empty() { "backend" } else { &form.kind },
                    &[pair("backend", "Backend (server SDKs)"), pair("client", "Client"),
                      pair("frontend", "Frontend (browser and mobile)"), pair("admin", "Admin")]))
                (select("Environment", "environment", &form.environment, &environments))
                (select("Project", "project", if form.project.is_empty() { "*" } else { &form.project }, &projects))
                button type="submit" { "Create token" }
            }
        }
        section aria-labelledby="h-list" {
            h2 #h-list { "Tokens" }
            div.table-scroll tabindex="0" role="region" aria-labelledby="h-list" {
                table {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Environment" }
                        th scope="col" { "Projects" } th scope="col" { "Starts with" } th scope="col" { "Created" } th scope="col" { "Expires" }
                        th scope="col" { "Actions" }
                    } }
                    tbody {
                        @for t in &tokens {
                            tr {
                                th scope="row" { (t.username) }
                                td { (serde_json::to_value(t.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()) }
                                td { (t.environment) }
                                td { (t.projects.join(", ")) }
                                td { code { (t.prefix) "…" } }
                                td { (time(&t.created_at)) }
                                td { @if let Some(at) = &t.expires_at { (time(at)) } @else { "never" } }
                                td {
                                    // By its id (the start of the secret's hash): the UI never holds a secret.
                                    form.inline method="post" action={ "/ui/tokens/" (t.id()) "/delete" } {
                                        (csrf(viewer))
                                        // A label, not hidden text: an absolutely placed span escapes the
                                        // table's scrolling region and widens the page at 390 px.
                                        button.secondary.outline type="submit" aria-label={ "Delete token " (t.username) }
                                            data-confirm={ "Delete the token “" (t.username) "”? Clients using it are refused from then on." } {
                                            "Delete"
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(page(
        status,
        "API tokens",
        Some(viewer),
        Section::Tokens,
        body,
    ))
}

/// `GET /ui/tokens`.
pub async fn list(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(notice): Query<Notice>,
) -> PageResult {
    render(
        &state,
        &viewer,
        &TokenForm::default(),
        &Errors::default(),
        None,
        notice.notice.as_deref(),
    )
}

/// `POST /ui/tokens/{id}/delete`: revokes the token whose id (listed) is `id`.
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    posted: Posted<serde::de::IgnoredAny>,
) -> PageResult {
    let name = state
        .service
        .api_tokens()?
        .into_iter()
        .find(|t| t.id() == id)
        .map(|t| t.username)
        .ok_or_else(|| {
            Problem(ApiError::NotFound(
                "There is no such token (it may have been deleted already).".into(),
            ))
        })?;
    state
        .service
        .delete_api_token(&posted.viewer.actor, &id)
        .await?;
    Ok(see_other(&with_notice(
        "/ui/tokens",
        &format!("Token “{name}” deleted."),
    )))
}

/// `POST /ui/tokens`.
pub async fn create(State(state): State<AppState>, posted: Posted<TokenForm>) -> PageResult {
    let Posted { viewer, form, .. } = posted;
    let admin = form.kind == "admin";
    let mut body = serde_json::json!({
        "tokenName": form.token_name.trim(),
        "type": form.kind,
    });
    if !admin {
        if !form.environment.is_empty() {
            body["environment"] = serde_json::json!(form.environment);
        }
        body["projects"] = serde_json::json!([if form.project.is_empty() {
            "*"
        } else {
            &form.project
        }]);
    }
    let spec: TokenSpec = serde_json::from_value(body)
        .map_err(|e| Problem(ApiError::bad_request("", e.to_string())))?;
    match state.service.create_api_token(&viewer.actor, spec).await {
        Ok((token, secret)) => {
            let name = token.username.clone();
            render(
                &state,
                &viewer,
                &TokenForm::default(),
                &Errors::default(),
                Some((&name, &secret)),
                None,
            )
        }
        Err(e) => render(
            &state,
            &viewer,
            &form,
            &Errors::of(e, "tokenName")?,
            None,
            None,
        ),
    }
}
