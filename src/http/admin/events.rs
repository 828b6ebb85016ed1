//! `/api/admin/events`: the audit log, newest first, each event with its `diffs` from the
//! previous event of the same resource (API-FACTS §3).

use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::domain::event_diff::with_diffs;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::AppPath;
use crate::service::Service;
use crate::state::AppState;

/// Events per listing unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 100;
/// The largest `limit` accepted.
const MAX_LIMIT: usize = 1000;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/events", get(list_events))
        .route("/events/{name}", get(list_toggle_events))
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

async fn list_events(
    State(service): State<Service>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let events = service.events(limit(query.as_deref())?, None).await?;
    Ok(Json(json!({"version": 1, "events": with_diffs(&events)})))
}

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
