//! `/api/admin/events`: the audit log, newest first, each event with its `diffs` from the
//! previous event of the same resource (API-FACTS §3).

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::event::Event;
use crate::domain::event_diff::with_diffs;
use crate::error::{ApiResult, ErrorBody};
use crate::http::extract::{AppPath, ListLimit, ToggleNamePath};
use crate::service::Service;
use crate::state::AppState;

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
#[derive(Serialize, utoipa::ToSchema)]
struct EventList {
    /// Always 1.
    version: u32,
    // Each a `ListedEvent`, as `with_diffs` builds it.
    #[schema(value_type = Vec<ListedEvent>)]
    events: Vec<Value>,
}

/// A toggle's history, newest first.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ToggleEventList {
    toggle_name: String,
    // Each a `ListedEvent`, as `with_diffs` builds it.
    #[schema(value_type = Vec<ListedEvent>)]
    events: Vec<Value>,
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
    ListLimit(limit): ListLimit,
) -> ApiResult<Json<EventList>> {
    let events = service.events(limit, None).await?;
    Ok(Json(EventList {
        version: 1,
        events: with_diffs(&events),
    }))
}

/// Lists a toggle's newest events.
#[utoipa::path(
    get,
    path = "/events/{name}",
    tag = "events",
    params(ToggleNamePath, ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "How many events (default 100)")),
    responses(
        (status = 200, description = "The toggle's newest events (none for an unknown name)", body = ToggleEventList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
    )
)]
async fn list_toggle_events(
    State(service): State<Service>,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
    ListLimit(limit): ListLimit,
) -> ApiResult<Json<ToggleEventList>> {
    let events = service.events(limit, Some(&name)).await?;
    Ok(Json(ToggleEventList {
        events: with_diffs(&events),
        toggle_name: name,
    }))
}
