//! `/api/admin/tag-types` (API-FACTS §4.2).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::tag::TagTypeSpec;
use crate::domain::DomainError;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{parse_json, AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/tag-types", get(list_tag_types).post(create_tag_type))
        .route(
            "/tag-types/{name}",
            get(get_tag_type)
                .put(update_tag_type)
                .delete(delete_tag_type)
                .post(validate_tag_type),
        )
}

async fn list_tag_types(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tag_types: Vec<_> = state.tag_types.values().collect();
    Ok(Json(json!({"version": 1, "tagTypes": tag_types})))
}

async fn get_tag_type(
    State(service): State<Service>,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tag_type = state
        .tag_types
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find tag type \"{name}\"")))?;
    Ok(Json(json!({"version": 1, "tagType": tag_type})))
}

async fn create_tag_type(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<TagTypeSpec>,
) -> ApiResult<Response> {
    let tag_type = service.create_tag_type(&actor, spec).await?;
    Ok((StatusCode::CREATED, Json(tag_type)).into_response())
}

/// `POST /api/admin/tag-types/validate`; shares the `{name}` route so that a tag type called
/// `validate` stays addressable.
async fn validate_tag_type(
    State(service): State<Service>,
    AppPath(segment): AppPath<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    if segment != "validate" {
        return Err(ApiError::MethodNotAllowed);
    }
    let spec: TagTypeSpec = parse_json(&body)?;
    let tag_type = spec.validate(None)?;
    if service.state()?.tag_types.contains_key(&tag_type.name) {
        return Err(DomainError::AlreadyExists(format!(
            "There already exists a tag-type with the name {}",
            tag_type.name
        ))
        .into());
    }
    Ok(Json(json!({"valid": true, "tagType": tag_type})))
}

async fn update_tag_type(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
    AppJson(spec): AppJson<TagTypeSpec>,
) -> ApiResult<Json<Value>> {
    let tag_type = service.update_tag_type(&actor, &name, spec).await?;
    Ok(Json(json!(tag_type)))
}

async fn delete_tag_type(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_tag_type(&actor, &name).await?;
    Ok(StatusCode::OK)
}
