//! The toggle list: search, filters, sort and page size in the URL; a switch per row and
//! environment (a form of its own, enhanced by htmx to swap just its row); bulk actions on
//! the rows selected.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Extension, Query, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use maud::{html, Markup};
use serde::Deserialize;

use crate::domain::config_state::ConfigState;
use crate::domain::export::export_environment_of;
use crate::domain::feature_type::FEATURE_TYPES;
use crate::domain::feature_view::environments_in_order;
use crate::domain::tag::TagSpec;
use crate::domain::toggle::Toggle;
use crate::service::feature_environments::Target;
use crate::service::ServiceError;
use crate::state::AppState;
use crate::ui::layout::{csrf, page, time, Section};
use crate::ui::problem::PageResult;
use crate::ui::session::{Posted, Viewer};
use crate::ui::toggle_query::{run, ListQuery, PAGE_SIZES};

use super::sparkline::{last_hour, sparkline, Buckets, Sparklines};
use super::{see_other, segment, with_notice};

/// `?notice=`: what the last write did, shown once.
#[derive(Deserialize, Default)]
pub struct Notice {
    #[serde(default)]
    pub notice: Option<String>,
}

/// A labelled `<select>` keeping `current`; `options` are (value, text).
pub fn select(label: &str, name: &str, current: &str, options: &[(String, String)]) -> Markup {
    let id = format!("f-{name}");
    html! {
        label for=(id) {
            (label)
            select id=(id) name=(name) {
                @for (value, text) in options {
                    option value=(value) selected[value == current] { (text) }
                }
            }
        }
    }
}

/// The environments whose switches the list shows: the one filtered on, else every enabled one.
fn shown_environments<'a>(state: &'a ConfigState, query: &ListQuery) -> Vec<&'a str> {
    environments_in_order(state)
        .into_iter()
        .filter(|e| {
            if query.environment.is_empty() {
                e.enabled
            } else {
                e.name == query.environment
            }
        })
        .map(|e| e.name.as_str())
        .collect()
}

/// The switch of `toggle` in `environment`: a form posting the opposite state.
pub fn switch(
    viewer: &Viewer,
    toggle: &Toggle,
    environment: &str,
    back: &str,
    id: &str,
    swap: &str,
) -> Markup {
    let on = toggle.environment(environment).enabled;
    let action = format!(
        "/ui/toggles/{}/environments/{}",
        segment(&toggle.name),
        segment(environment)
    );
    html! {
        form.switch method="post" action=(action)
            hx-post=(action) hx-target={ "#" (swap) } hx-select={ "#" (swap) } hx-swap="outerHTML" {
            (csrf(viewer))
            input type="hidden" name="enabled" value=(if on { "false" } else { "true" });
            input type="hidden" name="back" value=(back);
            button.toggle id=(id) type="submit" role="switch" aria-checked=(on)
                aria-label={ (toggle.name) " in " (environment) } {
                (if on { "On" } else { "Off" })
            }
        }
    }
}

fn filters(state: &ConfigState, query: &ListQuery) -> Markup {
    let any = || (String::new(), "Any".to_string());
    let mut projects = vec![any()];
    projects.push(("default".into(), "default".into()));
    projects.extend(
        state
            .projects
            .keys()
            .filter(|p| p.as_str() != "default")
            .map(|p| (p.clone(), p.clone())),
    );
    let mut environments = vec![(String::new(), "All".to_string())];
    environments.extend(
        environments_in_order(state)
            .into_iter()
            .map(|e| (e.name.clone(), e.name.clone())),
    );
    let mut kinds = vec![any()];
    kinds.extend(
        FEATURE_TYPES
            .iter()
            .map(|t| (t.id.to_string(), t.name.to_string())),
    );
    let mut tags = vec![any()];
    tags.extend(state.tags.keys().map(|k| (k.clone(), k.clone())));
    let pair = |v: &str, t: &str| (v.to_string(), t.to_string());
    html! {
        search { form.filters method="get" action="/ui/toggles"
            hx-get="/ui/toggles" hx-target="#results" hx-select="#results" hx-swap="outerHTML"
            hx-push-url="true"
            hx-trigger="submit, input delay:300ms, change" {
            label for="f-q" { "Search toggles" }
            input type="search" id="f-q" name="q" value=(query.q)
                placeholder="Name, description or tag" aria-keyshortcuts="/";
            details open[!query.project.is_empty() || !query.environment.is_empty() || !query.kind.is_empty()
                || !query.enabled.is_empty() || !query.stale.is_empty() || !query.tag.is_empty()] {
                summary { "Filters and sort" }
                div.grid-filters {
                    (select("Project", "project", &query.project, &projects))
                    (select("Environment", "environment", &query.environment, &environments))
                    (select("Type", "type", &query.kind, &kinds))
                    (select("Enabled", "enabled", &query.enabled,
                        &[pair("", "Any"), pair("on", "On"), pair("off", "Off")]))
                    (select("Stale", "stale", &query.stale,
                        &[pair("", "Any"), pair("yes", "Stale"), pair("no", "Not stale")]))
                    (select("Tag", "tag", &query.tag, &tags))
                    (select("Sort by", "sort", &query.sort,
                        &[pair("", "Name (A–Z)"), pair("-name", "Name (Z–A)"),
                          pair("-created", "Newest first"), pair("created", "Oldest first")]))
                    (select("Per page", "size", &query.size().to_string(),
                        &PAGE_SIZES.iter().map(|s| (s.to_string(), s.to_string())).collect::<Vec<_>>()))
                }
            }
            button type="submit" { "Search" }
        } }
    }
}

fn bulk_form(viewer: &Viewer, state: &ConfigState, back: &str) -> Markup {
    html! {
        // Not boosted: htmx leaves out the row checkboxes, which join the form by `form=`.
        form #bulk.bulk method="post" action="/ui/toggles/bulk" hx-boost="false" {
            (csrf(viewer))
            input type="hidden" name="back" value=(back);
            fieldset {
                legend { "With the selected toggles" }
                label for="f-action" { "Action"
                    select id="f-action" name="action" {
                        option value="enable" { "Switch on in…" }
                        option value="disable" { "Switch off in…" }
                        option value="stale" { "Mark stale" }
                        option value="unstale" { "Mark not stale" }
                        option value="tag" { "Add tag…" }
                        option value="archive" { "Archive" }
                        option value="export" { "Export (download)" }
                    }
                }
                label for="f-bulk-env" { "Environment (switch on/off, export)"
                    select id="f-bulk-env" name="environment" {
                        @for e in environments_in_order(state) { option value=(e.name) { (e.name) } }
                    }
                }
                label for="f-bulk-tag" { "Tag (type:value)"
                    input type="text" id="f-bulk-tag" name="tag" placeholder="simple:team-a";
                }
                button type="submit" data-confirm-action="archive"
                    data-confirm="Archive the selected toggles? SDKs stop getting them." { "Apply to selected" }
            }
        }
    }
}

fn pagination(query: &ListQuery, total: usize) -> Markup {
    let pages = total.div_ceil(query.size()).max(1);
    let page = query.page().min(pages);
    html! {
        nav.pages aria-label="Pages" {
            ul {
                @if page > 1 {
                    li { a href={ "/ui/toggles?" (query.on_page(page - 1).to_query()) } rel="prev" { "Previous page" } }
                }
                li { span aria-current="page" { "Page " (page) " of " (pages) } }
                @if page < pages {
                    li { a href={ "/ui/toggles?" (query.on_page(page + 1).to_query()) } rel="next" { "Next page" } }
                }
            }
        }
    }
}

/// The results region: what the search replaces.
fn results(
    viewer: &Viewer,
    state: &ConfigState,
    query: &ListQuery,
    usage: Option<&Buckets>,
) -> Markup {
    let list = run(state, query);
    let environments = shown_environments(state, query);
    let back = format!("/ui/toggles?{}", query.to_query());
    html! {
        div #results {
            p #count role="status" { (list.total) " toggles" @if !query.q.is_empty() { " match “" (query.q) "”" } }
            (bulk_form(viewer, state, &back))
            div.table-scroll tabindex="0" role="region" aria-labelledby="count" {
                table {
                    thead {
                        tr {
                            th scope="col" {
                                input type="checkbox" #select-all aria-label="Select all on this page";
                            }
                            th scope="col" { "Name" }
                            th scope="col" { "Project" }
                            th scope="col" { "Type" }
                            th scope="col" { "Tags" }
                            @for env in &environments { th scope="col" { (env) } }
                            th scope="col" { "Last hour" }
                            th scope="col" { "Created" }
                        }
                    }
                    tbody {
                        @for (i, toggle) in list.rows.iter().enumerate() {
                            @let row = format!("row-{i}");
                            tr id=(row) {
                                td { input type="checkbox" name="names" value=(toggle.name) form="bulk"
                                        aria-label={ "Select " (toggle.name) }; }
                                th scope="row" {
                                    a href={ "/ui/toggles/" (segment(&toggle.name)) } { (toggle.name) }
                                    @if toggle.stale { " " mark { "stale" } }
                                    @if !toggle.description.is_empty() { br; small { (toggle.description) } }
                                }
                                td { (toggle.project) }
                                td { (toggle.kind) }
                                td { @for t in &toggle.tags { span.tag { (t.kind) ":" (t.value) } " " } }
                                @for (j, env) in environments.iter().enumerate() {
                                    td { (switch(viewer, toggle, env, &back, &format!("sw-{i}-{j}"), &row)) }
                                }
                                td.usage {
                                    @match usage {
                                        Some(usage) => { (sparkline(&toggle.name, usage.get(toggle.name.as_str()))) }
                                        None => { "—" }
                                    }
                                }
                                td { (time(&toggle.created_at)) }
                            }
                        }
                    }
                }
            }
            (pagination(query, list.total))
        }
    }
}

/// `GET /ui/toggles`.
pub async fn list(
    viewer: Viewer,
    State(state): State<AppState>,
    Extension(sparklines): Extension<Arc<Sparklines>>,
    Query(query): Query<ListQuery>,
    Query(notice): Query<Notice>,
) -> PageResult {
    let started = Instant::now();
    let config = state.service.state()?;
    let usage = last_hour(&sparklines, &state.usage);
    let body = html! {
        @if let Some(n) = &notice.notice { p.notice role="status" { (n) } }
        p { a href="/ui/new-toggle" role="button" { "New toggle" } }
        (filters(&config, &query))
        (results(&viewer, &config, &query, usage.as_deref()))
    };
    let mut response = page(
        StatusCode::OK,
        "Toggles",
        Some(&viewer),
        Section::Toggles,
        body,
    );
    // The server's time to build the page (docs/performance.md, "Admin UI").
    let timing = format!("render;dur={:.2}", started.elapsed().as_secs_f64() * 1000.0);
    if let Ok(value) = HeaderValue::from_str(&timing) {
        response
            .headers_mut()
            .insert(HeaderName::from_static("server-timing"), value);
    }
    Ok(response)
}

/// Bulk writes in flight at once (a page holds at most 200 rows).
const BULK_CONCURRENCY: usize = 32;

/// The bulk form's fields.
#[derive(Deserialize)]
pub struct BulkForm {
    #[serde(default)]
    names: Vec<String>,
    action: String,
    #[serde(default)]
    environment: String,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    back: String,
}

/// Applies one bulk action to one toggle.
async fn apply(
    state: &AppState,
    viewer: &Viewer,
    form: &BulkForm,
    name: &str,
) -> Result<(), ServiceError> {
    let service = &state.service;
    let actor = &viewer.actor;
    match form.action.as_str() {
        "enable" | "disable" => {
            let project = service
                .state()?
                .features
                .get(name)
                .map(|t| t.project.to_string())
                .unwrap_or_default();
            let target = Target {
                project: &project,
                feature: name,
                environment: &form.environment,
            };
            service
                .set_toggle_environment_enabled(actor, target, form.action == "enable")
                .await?;
        }
        "stale" | "unstale" => {
            service
                .set_stale(actor, name, form.action == "stale")
                .await?;
        }
        "archive" => {
            service.archive_toggle(actor, name).await?;
        }
        "tag" => {
            let (kind, value) = form.tag.split_once(':').unwrap_or(("simple", &form.tag));
            let spec: TagSpec = serde_json::from_value(serde_json::json!({
                "type": kind.trim(), "value": value.trim()
            }))
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
            match service.add_toggle_tag(actor, name, spec).await {
                // Already tagged: nothing to do for this one.
                Err(ServiceError::Domain(crate::domain::DomainError::AlreadyExists(_))) => {}
                other => {
                    other?;
                }
            }
        }
        other => {
            return Err(crate::domain::ValidationErrors::single(
                "action",
                format!("unknown action {other:?}"),
            )
            .into())
        }
    }
    Ok(())
}

/// `POST /ui/toggles/bulk`.
pub async fn bulk(State(state): State<AppState>, posted: Posted<BulkForm>) -> Response {
    let Posted { viewer, form, .. } = posted;
    let back = if form.back.starts_with("/ui/toggles") {
        form.back.clone()
    } else {
        "/ui/toggles".to_string()
    };
    if form.names.is_empty() {
        return see_other(&with_notice(&back, "Select at least one toggle first."));
    }
    if form.action == "export" {
        return export_selected(&state, &form, &back);
    }
    // Concurrently, so that the replica's group commit writes them in a few commits rather
    // than one commit (and one wait for the client documents) per toggle; outcomes reported
    // in the order sent.
    // Archives one at a time: whether a parent may go depends on its children going first,
    // and a lost race decides concurrent writers again in any order.
    let concurrency = if form.action == "archive" {
        1
    } else {
        BULK_CONCURRENCY
    };
    let (state, viewer, form) = (&state, &viewer, &form);
    let outcomes: Vec<(String, Result<(), ServiceError>)> =
        futures_util::stream::iter(form.names.iter().cloned())
            .map(|name| async move {
                let outcome = apply(state, viewer, form, &name).await;
                (name, outcome)
            })
            .buffered(concurrency)
            .collect()
            .await;
    let mut done = 0;
    let mut failed = Vec::new();
    for (name, outcome) in outcomes {
        match outcome {
            Ok(()) => done += 1,
            Err(e) => failed.push(format!("{name}: {}", crate::error::ApiError::from(e))),
        }
    }
    let mut notice = format!(
        "{} applied to {done} of {} toggles.",
        form.action,
        form.names.len()
    );
    if !failed.is_empty() {
        notice.push_str(" Not applied: ");
        notice.push_str(&failed.join("; "));
    }
    see_other(&with_notice(&back, &notice))
}

/// The bulk export: the selected toggles as the chosen environment's client document (with
/// the segments they refer to there), downloaded; `POST /api/admin/state/import?environment=E`
/// takes it back.
fn export_selected(state: &AppState, form: &BulkForm, back: &str) -> Response {
    let config = match state.service.state() {
        Ok(config) => config,
        Err(e) => {
            return see_other(&with_notice(
                back,
                &crate::error::ApiError::from(e).to_string(),
            ))
        }
    };
    if !config.environments.contains_key(&form.environment) {
        return see_other(&with_notice(back, "Choose an environment to export from."));
    }
    let document = export_environment_of(&config, &form.environment, &form.names);
    let body = match serde_json::to_vec_pretty(&document) {
        Ok(body) => body,
        Err(e) => return see_other(&with_notice(back, &e.to_string())),
    };
    let file: String = form
        .environment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(disposition) = HeaderValue::from_str(&format!(
        "attachment; filename=\"flagpole-toggles-{file}.json\""
    )) {
        headers.insert(axum::http::header::CONTENT_DISPOSITION, disposition);
    }
    response
}
