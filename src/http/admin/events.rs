//! `/api/admin/events`: the audit log, newest first, each event with its `diffs` from the
//! previous event of the same resource (API-FACTS §3).

use axum::extract::{RawQuery, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::event::Event;
use crate::domain::event_diff::with_diffs;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::AppPath;
use crate::service::Service;
use crate::state::AppState;

/// Events per listing unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 100;
/// The largest `limit` accepted.
const MAX_LIMIT: usize = 1000;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_events))
        .routes(routes!(list_toggle_events))
}

/// An event as listed: with the changes from the previous event of the same resource in the
/// listing (documentation only: built by `domain::event_diff::with_diffs`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct ListedEvent {
    #[serde(flatten)]
    event: Event,
    /// Deep-diff changes (`kind`, `path`, `lhs`, `rhs`), or null for the oldest of its resource.
    diffs: Option<Vec<Value>>,
}

/// The audit log, newest first.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct EventList {
    /// Always 1.
    version: u32,
    events: Vec<ListedEvent>,
}

/// A toggle's history, newest first.
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct ToggleEventList {
    toggle_name: String,
    events: Vec<ListedEvent>,
}

#[derive(Deserialize)]
struct EventQuery {
    limit: Option<String>,
}

/// The `limit` of a listing query (also used by the deliveries listing).
pub(super) fn limit(query: Option<&str>) -> ApiResult<usize> {
    let query: EventQuery = serde_html_form::from_str(query.unwrap_or(""))
        .map_err(|e| ApiError::bad_request("", format!("Invalid query string: {e}")))?;
    match query.limit {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(ApiError::bad_request(
                "limit",
                format!("\"limit\" must be a whole number from 1 to {MAX_LIMIT}"),
            )),
        },
    }
}

/// Lists the newest events of the audit log.
#[utoipa::path(
    get,
    path = "/events",
    tag = "events",
    params(("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "How many events (default 100)")),
    responses(
        (status = 200, description = "The newest events", body = EventList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
    )
)]
async fn list_events(
    State(service): State<Service>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let events = service.events(limit(query.as_deref())?, None).await?;
    Ok(Json(json!({"version": 1, "events": with_diffs(&events)})))
}

/// Lists a toggle's newest events.
#[utoipa::path(
    get,
    path = "/events/{name}",
    tag = "events",
    params(("name" = String, Path, description = "The toggle's name"), ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "How many events (default 100)")),
    responses(
        (status = 200, description = "The toggle's newest events (none for an unknown name)", body = ToggleEventList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
    )
)]
async fn list_toggle_events(
    State(service): State<Service>,
    AppPath(name): AppPath<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let events = service
        .events(limit(query.as_deref())?, Some(&name))
        .await?;
    Ok(Json(
        json!({"toggleName": name, "events": with_diffs(&events)}),
    ))
}
