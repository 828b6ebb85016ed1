//! `/api/admin/tags` (API-FACTS §4.3).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::tag::{Tag, TagRef, TagSpec};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::http::response::Created;
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

/// The tag type a path lists the tags of.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct TagTypeOfTagsPath {
    /// The tag type
    #[serde(rename = "type")]
    kind: String,
}

/// The tag a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct TagPath {
    /// The tag's type
    #[serde(rename = "type")]
    kind: String,
    /// The tag's value
    value: String,
}

impl From<TagPath> for TagRef {
    fn from(path: TagPath) -> Self {
        TagRef {
            kind: path.kind.into(),
            value: path.value.into(),
        }
    }
}

/// Lists the tags.
#[utoipa::path(
    get,
    path = "/tags",
    tag = "tags",
    responses((status = 200, description = "Every tag", body = TagList))
)]
async fn list_tags(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let tags = state.tags.values().map(|t| &**t).collect();
    Ok(Json(TagList { version: 1, tags }).into_response())
}

/// Lists the tags of a type.
#[utoipa::path(
    get,
    path = "/tags/{type}",
    tag = "tags",
    params(TagTypeOfTagsPath),
    responses((status = 200, description = "The tags of the type (none for an unknown type)", body = TagList))
)]
async fn list_tags_of_type(
    State(service): State<Service>,
    AppPath(TagTypeOfTagsPath { kind }): AppPath<TagTypeOfTagsPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let tags = state
        .tags
        .values()
        .filter(|t| t.kind == kind)
        .map(|t| &**t)
        .collect();
    Ok(Json(TagList { version: 1, tags }).into_response())
}

/// Shows a tag.
#[utoipa::path(
    get,
    path = "/tags/{type}/{value}",
    tag = "tags",
    params(TagPath),
    responses(
        (status = 200, description = "The tag", body = OneTag),
        (status = 404, description = "No such tag", body = ErrorBody),
    )
)]
async fn get_tag(
    State(service): State<Service>,
    AppPath(path): AppPath<TagPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let tag_ref = TagRef::from(path);
    let tag = state
        .tag(&tag_ref)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find the tag {}", tag_ref.key())))?;
    Ok(Json(OneTag { version: 1, tag }).into_response())
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
) -> ApiResult<Created<Tag>> {
    let tag = service.create_tag(&actor, spec).await?;
    Ok(Created(tag))
}

/// Deletes a tag and removes it from every toggle.
#[utoipa::path(
    delete,
    path = "/tags/{type}/{value}",
    tag = "tags",
    params(TagPath),
    responses(
        (status = 200, description = "Deleted, and removed from every toggle"),
        (status = 404, description = "No such tag", body = ErrorBody),
    )
)]
async fn delete_tag(
    State(service): State<Service>,
    actor: Actor,
    AppPath(path): AppPath<TagPath>,
) -> ApiResult<StatusCode> {
    service.delete_tag(&actor, path.into()).await?;
    Ok(StatusCode::OK)
}
