//! `/api/admin/tags` (API-FACTS §4.3).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::tag::{Tag, TagRef, TagSpec};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_tags, create_tag))
        .routes(routes!(list_tags_of_type))
        .routes(routes!(get_tag, delete_tag))
}

/// A list of tags.
#[derive(Serialize, utoipa::ToSchema)]
struct TagList<'a> {
    /// Always 1.
    version: u32,
    tags: Vec<&'a Tag>,
}

/// One tag.
#[derive(Serialize, utoipa::ToSchema)]
struct OneTag<'a> {
    /// Always 1.
    version: u32,
    tag: &'a Tag,
}

/// Lists the tags.
#[utoipa::path(
    get,
    path = "/tags",
    tag = "tags",
    responses((status = 200, description = "Every tag", body = TagList))
)]
async fn list_tags(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tags = state.tags.values().map(|t| &**t).collect();
    Ok(Json(json!(TagList { version: 1, tags })))
}

/// Lists the tags of a type.
#[utoipa::path(
    get,
    path = "/tags/{type}",
    tag = "tags",
    params(("type" = String, Path, description = "The tag type")),
    responses((status = 200, description = "The tags of the type (none for an unknown type)", body = TagList))
)]
async fn list_tags_of_type(
    State(service): State<Service>,
    AppPath(kind): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tags = state
        .tags
        .values()
        .filter(|t| t.kind == kind)
        .map(|t| &**t)
        .collect();
    Ok(Json(json!(TagList { version: 1, tags })))
}

/// Shows a tag.
#[utoipa::path(
    get,
    path = "/tags/{type}/{value}",
    tag = "tags",
    params(
        ("type" = String, Path, description = "The tag's type"),
        ("value" = String, Path, description = "The tag's value"),
    ),
    responses(
        (status = 200, description = "The tag", body = OneTag),
        (status = 404, description = "No such tag", body = ErrorBody),
    )
)]
async fn get_tag(
    State(service): State<Service>,
    AppPath((kind, value)): AppPath<(String, String)>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let tag_ref = TagRef {
        kind: kind.into(),
        value: value.into(),
    };
    let tag = state
        .tag(&tag_ref)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find the tag {}", tag_ref.key())))?;
    Ok(Json(json!(OneTag { version: 1, tag })))
}

/// Creates a tag.
#[utoipa::path(
    post,
    path = "/tags",
    tag = "tags",
    request_body = TagSpec,
    responses(
        (status = 201, description = "Created", body = Tag),
        (status = 404, description = "No such tag type", body = ErrorBody),
        (status = 409, description = "The tag exists", body = ErrorBody),
    )
)]
async fn create_tag(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<TagSpec>,
) -> ApiResult<Response> {
    let tag = service.create_tag(&actor, spec).await?;
    Ok((StatusCode::CREATED, Json(tag)).into_response())
}

/// Deletes a tag and removes it from every toggle.
#[utoipa::path(
    delete,
    path = "/tags/{type}/{value}",
    tag = "tags",
    params(
        ("type" = String, Path, description = "The tag's type"),
        ("value" = String, Path, description = "The tag's value"),
    ),
    responses(
        (status = 200, description = "Deleted, and removed from every toggle"),
        (status = 404, description = "No such tag", body = ErrorBody),
    )
)]
async fn delete_tag(
    State(service): State<Service>,
    actor: Actor,
    AppPath((kind, value)): AppPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let tag_ref = TagRef {
        kind: kind.into(),
        value: value.into(),
    };
    service.delete_tag(&actor, tag_ref).await?;
    Ok(StatusCode::OK)
}
