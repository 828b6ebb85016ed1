//! Addons: each configuration with its delivery log and dead letters, which can be
//! redelivered one at a time or all at once; a webhook addon can be created here.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::html;
use serde::Deserialize;

use crate::domain::addon::{AddonSpec, ADDON_EVENTS};
use crate::error::ApiError;
use crate::state::AppState;
use crate::ui::form::{text_field, Errors};
use crate::ui::layout::{csrf, page, time, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::{Posted, Viewer};

use super::toggles::Notice;
use super::{see_other, with_notice};

/// How many deliveries and dead letters a page shows.
const SHOWN: usize = 50;

/// The new-webhook form's fields.
#[derive(Deserialize, Default)]
pub struct WebhookForm {
    #[serde(default)]
    url: String,
    #[serde(default)]
    description: String,
}

fn render(
    state: &AppState,
    viewer: &Viewer,
    form: &WebhookForm,
    errors: &Errors,
    notice: Option<&str>,
) -> PageResult {
    let config = state.service.state()?;
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let body = html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if config.addons.is_empty() { p { "No addons yet." } }
        ul {
            @for a in config.addons.values() {
                li {
                    a href={ "/ui/addons/" (a.id) } { (a.provider) " #" (a.id) }
                    @if !a.description.is_empty() { " — " (a.description) }
                    @if !a.enabled { " " mark { "disabled" } }
                }
            }
        }
        section aria-labelledby="h-new" {
            h2 #h-new { "New webhook" }
            (errors.summary())
            form method="post" action="/ui/addons" {
                (csrf(viewer))
                (text_field("Receiver URL", "url", &form.url, errors, Some("Every event is posted there as JSON.")))
                (text_field("Description (optional)", "description", &form.description, errors, None))
                button type="submit" { "Create webhook" }
            }
        }
    };
    Ok(page(status, "Addons", Some(viewer), Section::Addons, body))
}

/// `GET /ui/addons`.
pub async fn list(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(notice): Query<Notice>,
) -> PageResult {
    render(
        &state,
        &viewer,
        &WebhookForm::default(),
        &Errors::default(),
        notice.notice.as_deref(),
    )
}

/// `POST /ui/addons`: a webhook subscribed to every toggle event.
pub async fn create(State(state): State<AppState>, posted: Posted<WebhookForm>) -> PageResult {
    let Posted { viewer, form } = posted;
    let spec: AddonSpec = serde_json::from_value(serde_json::json!({
        "provider": "webhook", "enabled": true, "description": form.description,
        "parameters": {"url": form.url.trim()}, "events": ADDON_EVENTS,
    }))
    .map_err(|e| Problem(ApiError::bad_request("", e.to_string())))?;
    match state.service.create_addon(&viewer.actor, spec).await {
        Ok(addon) => Ok(see_other(&format!("/ui/addons/{}", addon.id))),
        Err(e) => {
            let mut errors = Errors::of(e, "url")?;
            errors.rename("parameters.url", "url");
            render(&state, &viewer, &form, &errors, None)
        }
    }
}

/// `GET /ui/addons/{id}`: the delivery log and the dead letters.
pub async fn detail(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(notice): Query<Notice>,
) -> PageResult {
    let config = state.service.state()?;
    let addon = config
        .addons
        .get(&id)
        .cloned()
        .ok_or_else(|| Problem(ApiError::NotFound(format!("There is no addon {id}."))))?;
    let deliveries = state.service.deliveries(&id, SHOWN).await?;
    let (dead, dead_total) = state.service.dead_letters(&id, SHOWN).await?;
    let base = format!("/ui/addons/{id}");
    let body = html! {
        @if let Some(n) = &notice.notice { p.notice role="status" { (n) } }
        p { "Provider " strong { (addon.provider) } @if !addon.description.is_empty() { " — " (addon.description) }
            " · events: " (addon.events.join(", ")) }
        section aria-labelledby="h-dead" {
            h2 #h-dead { "Dead letters (" (dead_total) ")" }
            @if dead.is_empty() { p { "None: every delivery was accepted or is still being tried." } }
            @else {
                form method="post" action={ (base) "/redeliver-dead" } {
                    (csrf(&viewer))
                    button type="submit" { "Redeliver all dead letters" }
                }
                div.table-scroll tabindex="0" role="region" aria-labelledby="h-dead" {
                    table {
                        thead { tr { th scope="col" { "Event" } th scope="col" { "Type" } th scope="col" { "Error" } th scope="col" { "Died" } th scope="col" { "Redeliver" } } }
                        tbody { @for d in &dead {
                            tr {
                                th scope="row" { (d.job.event) }
                                td { (d.job.kind) }
                                td { (d.error) }
                                td { (time(&d.dead_at)) }
                                td { form.inline method="post" action={ (base) "/redeliver" } {
                                    (csrf(&viewer))
                                    input type="hidden" name="delivery" value=(d.job.delivery);
                                    button type="submit" { "Redeliver " span.visually-hidden { "event " (d.job.event) } }
                                } }
                            }
                        } }
                    }
                }
            }
        }
        section aria-labelledby="h-log" {
            h2 #h-log { "Delivery log" }
            div.table-scroll tabindex="0" role="region" aria-labelledby="h-log" {
                table {
                    thead { tr { th scope="col" { "Event" } th scope="col" { "Type" } th scope="col" { "Status" } th scope="col" { "Attempts" } th scope="col" { "Last error" } } }
                    tbody { @for d in &deliveries {
                        tr {
                            th scope="row" { (d.event_id) }
                            td { (d.kind) }
                            td { (serde_json::to_value(d.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default())
                                 @if let Some(code) = d.last_status_code { " (HTTP " (code) ")" } }
                            td { (d.attempts) }
                            td { (d.last_error.as_deref().unwrap_or("")) }
                        }
                    } }
                }
            }
        }
    };
    Ok(page(
        StatusCode::OK,
        &format!("Addon {} #{}", addon.provider, addon.id),
        Some(&viewer),
        Section::Addons,
        body,
    ))
}

/// The redeliver form's field.
#[derive(Deserialize)]
pub struct RedeliverForm {
    delivery: String,
}

/// `POST /ui/addons/{id}/redeliver`.
pub async fn redeliver(
    State(state): State<AppState>,
    Path(id): Path<String>,
    posted: Posted<RedeliverForm>,
) -> PageResult {
    state.service.redeliver(&id, &posted.form.delivery).await?;
    Ok(see_other(&with_notice(
        &format!("/ui/addons/{id}"),
        "Queued for redelivery.",
    )))
}

/// `POST /ui/addons/{id}/redeliver-dead`.
pub async fn redeliver_dead(
    State(state): State<AppState>,
    Path(id): Path<String>,
    _posted: Posted<serde::de::IgnoredAny>,
) -> PageResult {
    let (queued, left) = state.service.redeliver_dead(&id).await?;
    Ok(see_other(&with_notice(
        &format!("/ui/addons/{id}"),
        &format!("{queued} dead letters queued for redelivery; {left} left."),
    )))
}
