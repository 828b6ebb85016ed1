//! Archived toggles, searchable, each with a revive button.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::html;
use serde::Deserialize;

use crate::state::AppState;
use crate::ui::layout::{csrf, page, time, Section};
use crate::ui::problem::PageResult;
use crate::ui::session::{Posted, Viewer};

use super::{see_other, segment, with_notice};

/// `?q=` and `?notice=`.
#[derive(Deserialize, Default)]
pub struct ArchiveQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    notice: Option<String>,
}

/// `GET /ui/archive`.
pub async fn list(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(query): Query<ArchiveQuery>,
) -> PageResult {
    let config = state.service.state()?;
    let needle = query.q.to_lowercase();
    let rows: Vec<_> = config
        .archive
        .values()
        .filter(|t| {
            needle.is_empty()
                || t.name.to_lowercase().contains(&needle)
                || t.description.to_lowercase().contains(&needle)
        })
        .take(500)
        .collect();
    let body = html! {
        @if let Some(n) = &query.notice { p.notice role="status" { (n) } }
        search { form method="get" action="/ui/archive" {
            label for="f-q" { "Search the archive" }
            input type="search" id="f-q" name="q" value=(query.q) aria-keyshortcuts="/";
            button type="submit" { "Search" }
        } }
        p #count role="status" { (rows.len()) " archived toggles" }
        div.table-scroll tabindex="0" role="region" aria-labelledby="count" {
            table {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Project" } th scope="col" { "Archived" } th scope="col" { "Revive" } } }
                tbody {
                    @for t in &rows {
                        tr {
                            th scope="row" { (t.name) @if !t.description.is_empty() { br; small { (t.description) } } }
                            td { (t.project) }
                            td { @if let Some(at) = &t.archived_at { (time(at)) } }
                            td {
                                form.inline method="post" action={ "/ui/archive/" (segment(&t.name)) "/revive" } {
                                    (csrf(&viewer))
                                    button type="submit" { "Revive " span.visually-hidden { (t.name) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(page(
        StatusCode::OK,
        "Archive",
        Some(&viewer),
        Section::Archive,
        body,
    ))
}

/// `POST /ui/archive/{name}/revive`.
pub async fn revive(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<serde::de::IgnoredAny>,
) -> PageResult {
    state
        .service
        .revive_toggle(&posted.viewer.actor, &name)
        .await?;
    Ok(see_other(&with_notice(
        &format!("/ui/toggles/{}", segment(&name)),
        "Revived. It is off in every environment until switched on.",
    )))
}
