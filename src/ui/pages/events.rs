//! The event log with filters (type, toggle, who, text), each event with what it changed.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use maud::html;
use serde::Deserialize;
use serde_json::Value;

use crate::domain::event_diff::with_diffs;
use crate::state::AppState;
use crate::ui::layout::{page, time, Section};
use crate::ui::problem::PageResult;
use crate::ui::session::Viewer;

/// How many recent events are read (then filtered).
const READ: usize = 1000;
/// How many are shown.
const SHOWN: usize = 200;

/// The filters.
#[derive(Deserialize, Default)]
pub struct EventQuery {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    toggle: String,
    #[serde(default)]
    by: String,
    #[serde(default)]
    q: String,
}

/// `GET /ui/events`.
pub async fn list(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(query): Query<EventQuery>,
) -> PageResult {
    let toggle = (!query.toggle.is_empty()).then_some(query.toggle.as_str());
    let events = state.service.events(READ, toggle).await?;
    let mut kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let all = with_diffs(&events);
    let needle = query.q.to_lowercase();
    let shown: Vec<&Value> = all
        .iter()
        .filter(|e| query.kind.is_empty() || e["type"] == query.kind.as_str())
        .filter(|e| query.by.is_empty() || e["createdBy"] == query.by.as_str())
        .filter(|e| needle.is_empty() || e["data"].to_string().to_lowercase().contains(&needle))
        .take(SHOWN)
        .collect();
    let body = html! {
        search { form.filters method="get" action="/ui/events" {
            div.grid {
                label for="f-type" { "Type"
                    select id="f-type" name="type" {
                        option value="" { "Any" }
                        @for k in &kinds { option value=(k) selected[*k == query.kind] { (k) } }
                    }
                }
                label for="f-toggle" { "Toggle" input type="text" id="f-toggle" name="toggle" value=(query.toggle); }
                label for="f-by" { "Changed by" input type="text" id="f-by" name="by" value=(query.by); }
                label for="f-q" { "Text in the data" input type="search" id="f-q" name="q" value=(query.q) aria-keyshortcuts="/"; }
            }
            button type="submit" { "Filter" }
        } }
        p #count role="status" { (shown.len()) " events" }
        ol.history {
            @for e in &shown {
                li {
                    strong { (e["type"].as_str().unwrap_or("")) }
                    " by " (e["createdBy"].as_str().unwrap_or(""))
                    @if let Some(at) = e["createdAt"].as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()) {
                        " at " (time(&at.with_timezone(&chrono::Utc)))
                    }
                    details {
                        summary { "Data" @if e["diffs"].as_array().is_some_and(|d| !d.is_empty()) { " and changes" } }
                        @if let Some(diffs) = e["diffs"].as_array() {
                            ul.diff { @for d in diffs {
                                li { code { (d["path"].to_string()) } ": "
                                    @if !d["lhs"].is_null() { del { (d["lhs"].to_string()) } " " }
                                    @if !d["rhs"].is_null() { ins { (d["rhs"].to_string()) } } }
                            } }
                        }
                        pre { (serde_json::to_string_pretty(&e["data"]).unwrap_or_default()) }
                    }
                }
            }
        }
    };
    Ok(page(
        StatusCode::OK,
        "Events",
        Some(&viewer),
        Section::Events,
        body,
    ))
}
