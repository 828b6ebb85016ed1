//! `/api/admin/tag-types` (API-FACTS §4.2).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::tag::{TagType, TagTypeSpec};
use crate::domain::DomainError;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::http::request_docs::{documented_body, ValidateNameSegment};
use crate::http::response::Created;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_tag_types, create_tag_type))
        .routes(routes!(
            get_tag_type,
            update_tag_type,
            delete_tag_type,
            validate_tag_type
        ))
}

documented_body! {
    /// The body of `PUT` as documented: a [`TagTypeSpec`] without the `name`, which the path
    /// gives.
    TagTypeUpdate = replacement_schema::<TagTypeSpec>(
        "name",
        "A tag type as sent to replace the one the path names. The name is the path's: \
         a body that repeats it must send that one.",
    )
}

/// The tag type a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct TagTypePath {
    /// The tag type's name
    name: String,
}

/// Every tag type.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct TagTypeList<'a> {
    /// Always 1.
    version: u32,
    tag_types: Vec<&'a TagType>,
}

/// One tag type.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct OneTagType<'a> {
    /// Always 1.
    version: u32,
    tag_type: &'a TagType,
}

/// A tag type that would be valid.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ValidTagType<'a> {
    /// Always true.
    valid: bool,
    tag_type: &'a TagType,
}

/// Lists the tag types.
#[utoipa::path(
    get,
    path = "/tag-types",
    tag = "tags",
    responses((status = 200, description = "Every tag type", body = TagTypeList))
)]
async fn list_tag_types(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let tag_types = state.tag_types.values().map(|t| &**t).collect();
    Ok(Json(TagTypeList {
        version: 1,
        tag_types,
    })
    .into_response())
}

/// Shows a tag type.
#[utoipa::path(
    get,
    path = "/tag-types/{name}",
    tag = "tags",
    params(TagTypePath),
    responses(
        (status = 200, description = "The tag type", body = OneTagType),
        (status = 404, description = "No such tag type", body = ErrorBody),
    )
)]
async fn get_tag_type(
    State(service): State<Service>,
    AppPath(TagTypePath { name }): AppPath<TagTypePath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let tag_type = state
        .tag_types
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find tag type \"{name}\"")))?;
    Ok(Json(OneTagType {
        version: 1,
        tag_type,
    })
    .into_response())
}

/// Creates a tag type.
#[utoipa::path(
    post,
    path = "/tag-types",
    tag = "tags",
    request_body = TagTypeSpec,
    responses(
        (status = 201, description = "Created", body = TagType),
        (status = 409, description = "The tag type exists", body = ErrorBody),
    )
)]
async fn create_tag_type(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<TagTypeSpec>,
) -> ApiResult<Created<TagType>> {
    let tag_type = service.create_tag_type(&actor, spec).await?;
    Ok(Created(tag_type))
}

/// `POST /api/admin/tag-types/validate`; shares the `{name}` route so that a tag type called
/// `validate` stays addressable.
#[utoipa::path(
    post,
    path = "/tag-types/{name}",
    tag = "tags",
    operation_id = "validate_tag_type",
    summary = "`POST /api/admin/tag-types/validate`: whether a tag type would be valid and new",
    params(ValidateNameSegment),
    request_body = TagTypeSpec,
    responses(
        (status = 200, description = "Valid and new", body = ValidTagType),
        (status = 405, description = "Any segment but `validate`", body = ErrorBody),
        (status = 409, description = "The tag type exists", body = ErrorBody),
    )
)]
async fn validate_tag_type(
    State(service): State<Service>,
    AppPath(ValidateNameSegment { name: segment }): AppPath<ValidateNameSegment>,
    AppJson(spec): AppJson<TagTypeSpec>,
) -> ApiResult<Response> {
    if segment != "validate" {
        return Err(ApiError::MethodNotAllowed);
    }
    let tag_type = spec.validate(None)?;
    if service.state()?.tag_types.contains_key(&tag_type.name) {
        return Err(DomainError::AlreadyExists(format!(
            "There already exists a tag-type with the name {}",
            tag_type.name
        ))
        .into());
    }
    Ok(Json(ValidTagType {
        valid: true,
        tag_type: &tag_type,
    })
    .into_response())
}

/// Updates a tag type.
#[utoipa::path(
    put,
    path = "/tag-types/{name}",
    tag = "tags",
    params(TagTypePath),
    request_body = TagTypeUpdate,
    responses(
        (status = 200, description = "Updated", body = TagType),
        (status = 404, description = "No such tag type", body = ErrorBody),
    )
)]
async fn update_tag_type(
    State(service): State<Service>,
    actor: Actor,
    AppPath(TagTypePath { name }): AppPath<TagTypePath>,
    AppJson(spec): AppJson<TagTypeSpec>,
) -> ApiResult<Json<TagType>> {
    let tag_type = service.update_tag_type(&actor, &name, spec).await?;
    Ok(Json(tag_type))
}

/// Deletes a tag type and its tags.
#[utoipa::path(
    delete,
    path = "/tag-types/{name}",
    tag = "tags",
    params(TagTypePath),
    responses(
        (status = 200, description = "Deleted"),
        (status = 404, description = "No such tag type", body = ErrorBody),
        (status = 409, description = "Tags of the type exist, or an addon reads it", body = ErrorBody),
    )
)]
async fn delete_tag_type(
    State(service): State<Service>,
    actor: Actor,
    AppPath(TagTypePath { name }): AppPath<TagTypePath>,
) -> ApiResult<StatusCode> {
    service.delete_tag_type(&actor, &name).await?;
    Ok(StatusCode::OK)
}
