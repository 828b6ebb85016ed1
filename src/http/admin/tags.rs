//! `/api/admin/tags` (API-FACTS §4.3).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::tag::{TagRef, TagSpec};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/tags", get(list_tags).post(create_tag))
        .route("/tags/{type}", get(list_tags_of_type))
        .route("/tags/{type}/{value}", get(get_tag).delete(delete_tag))
}

async fn list_tags(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tags: Vec<_> = state.tags.values().collect();
    Ok(Json(json!({"version": 1, "tags": tags})))
}

async fn list_tags_of_type(
    State(service): State<Service>,
    AppPath(kind): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tags: Vec<_> = state.tags.values().filter(|t| t.kind == kind).collect();
    Ok(Json(json!({"version": 1, "tags": tags})))
}

async fn get_tag(
    State(service): State<Service>,
    AppPath((kind, value)): AppPath<(String, String)>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tag_ref = TagRef { kind, value };
    let tag = state
        .tag(&tag_ref)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find the tag {}", tag_ref.key())))?;
    Ok(Json(json!({"version": 1, "tag": tag})))
}

async fn create_tag(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<TagSpec>,
) -> ApiResult<Response> {
    let tag = service.create_tag(&actor, spec).await?;
    Ok((StatusCode::CREATED, Json(tag)).into_response())
}

async fn delete_tag(
    State(service): State<Service>,
    actor: Actor,
    AppPath((kind, value)): AppPath<(String, String)>,
) -> ApiResult<StatusCode> {
    service.delete_tag(&actor, TagRef { kind, value }).await?;
    Ok(StatusCode::OK)
}
