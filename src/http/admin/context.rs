//! `/api/admin/context`: context fields (spec §4.6, API-FACTS §13.2), and the spec's
//! `PUT /api/context/:name`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::context_field::ContextFieldSpec;
use crate::domain::views::ContextFieldView;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{validate_route_name, AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/context",
            get(list_context_fields).post(create_context_field),
        )
        .route(
            "/context/{name}",
            get(get_context_field)
                .put(update_context_field)
                .delete(delete_context_field)
                .post(validate_context_field),
        )
}

/// The spec's update path, which has no `admin` segment.
pub fn spec_router() -> Router<AppState> {
    Router::new().route("/api/context/{name}", put(update_context_field))
}

/// A bare array, by name (API-FACTS §13.2, G7).
async fn list_context_fields(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let fields: Vec<_> = state
        .context_fields
        .values()
        .map(|f| ContextFieldView::new(f))
        .collect();
    Ok(Json(json!(fields)))
}

async fn get_context_field(
    State(service): State<Service>,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let field = state
        .context_fields
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find context field \"{name}\"")))?;
    Ok(Json(json!(ContextFieldView::new(field))))
}

async fn create_context_field(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<ContextFieldSpec>,
) -> ApiResult<Response> {
    let field = service.create_context_field(&actor, spec).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!(ContextFieldView::new(&field))),
    )
        .into_response())
}

/// `POST /api/admin/context/validate` with `{"name": …}`.
async fn validate_context_field(
    State(service): State<Service>,
    AppPath(segment): AppPath<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let name = validate_route_name(&segment, &body, "name")?;
    service.validate_context_field_name(&name)?;
    Ok(StatusCode::OK)
}

async fn update_context_field(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
    AppJson(spec): AppJson<ContextFieldSpec>,
) -> ApiResult<Json<Value>> {
    let field = service.update_context_field(&actor, &name, spec).await?;
    Ok(Json(json!(ContextFieldView::new(&field))))
}

async fn delete_context_field(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_context_field(&actor, &name).await?;
    Ok(StatusCode::OK)
}
