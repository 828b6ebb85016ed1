//! `/api/admin/context`: context fields (spec §4.6, API-FACTS §13.2), and the spec's
//! `PUT /api/context/:name`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::context_field::ContextFieldSpec;
use crate::domain::views::ContextFieldView;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{validate_route_name, AppJson, AppPath};
use crate::http::request_docs::{documented_body, NameToValidate, ValidateNameSegment};
use crate::http::response::Created;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_context_fields, create_context_field))
        .routes(routes!(
            get_context_field,
            update_context_field,
            delete_context_field,
            validate_context_field
        ))
}

documented_body! {
    /// The body of `PUT` as documented: a [`ContextFieldSpec`] without the `name`, which the
    /// path gives.
    ContextFieldUpdate = replacement_schema::<ContextFieldSpec>(
        "name",
        "A context field as sent to replace the one the path names. The name is the \
         path's: a body that repeats it must send that one.",
    )
}

/// The context field a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ContextFieldPath {
    /// The context field's name
    name: String,
}

/// The spec's update path, which has no `admin` segment.
pub fn spec_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default().routes(routes!(update_context_field_at_spec_path))
}

/// A bare array, by name (API-FACTS §13.2, G7).
#[utoipa::path(
    get,
    path = "/context",
    tag = "context",
    responses((status = 200, description = "Every context field, by sort order", body = Vec<ContextFieldView>))
)]
async fn list_context_fields(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let fields: Vec<_> = state
        .context_fields
        .values()
        .map(|f| ContextFieldView::new(f))
        .collect();
    Ok(Json(fields).into_response())
}

/// Shows a context field.
#[utoipa::path(
    get,
    path = "/context/{name}",
    tag = "context",
    params(ContextFieldPath),
    responses(
        (status = 200, description = "The context field", body = ContextFieldView),
        (status = 404, description = "No such context field", body = ErrorBody),
    )
)]
async fn get_context_field(
    State(service): State<Service>,
    AppPath(ContextFieldPath { name }): AppPath<ContextFieldPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let field = state
        .context_fields
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find context field \"{name}\"")))?;
    Ok(Json(ContextFieldView::new(field)).into_response())
}

/// Creates a context field.
#[utoipa::path(
    post,
    path = "/context",
    tag = "context",
    request_body = ContextFieldSpec,
    responses(
        (status = 201, description = "Created", body = ContextFieldView),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
async fn create_context_field(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<ContextFieldSpec>,
) -> ApiResult<Response> {
    let field = service.create_context_field(&actor, spec).await?;
    Ok(Created(ContextFieldView::new(&field)).into_response())
}

/// `POST /api/admin/context/validate` with `{"name": …}`.
#[utoipa::path(
    post,
    path = "/context/{name}",
    tag = "context",
    operation_id = "validate_context_field",
    summary = "`POST /api/admin/context/validate`: whether a name is valid and free",
    params(ValidateNameSegment),
    request_body(content = NameToValidate, description = "`{\"name\": …}`"),
    responses(
        (status = 200, description = "Valid and free"),
        (status = 405, description = "Any segment but `validate`", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
async fn validate_context_field(
    State(service): State<Service>,
    AppPath(ValidateNameSegment { name: segment }): AppPath<ValidateNameSegment>,
    AppJson(body): AppJson<serde_json::Map<String, Value>>,
) -> ApiResult<StatusCode> {
    let name = validate_route_name(&segment, &body, "name")?;
    service.validate_context_field_name(&name)?;
    Ok(StatusCode::OK)
}

/// Updates a context field.
#[utoipa::path(
    put,
    path = "/context/{name}",
    tag = "context",
    params(ContextFieldPath),
    request_body = ContextFieldUpdate,
    responses(
        (status = 200, description = "Updated", body = ContextFieldView),
        (status = 404, description = "No such context field", body = ErrorBody),
        (status = 409, description = "Active toggles use a legal value it would drop", body = ErrorBody),
    )
)]
async fn update_context_field(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ContextFieldPath { name }): AppPath<ContextFieldPath>,
    AppJson(spec): AppJson<ContextFieldSpec>,
) -> ApiResult<Response> {
    let field = service.update_context_field(&actor, &name, spec).await?;
    Ok(Json(ContextFieldView::new(&field)).into_response())
}

/// Deletes a context field.
#[utoipa::path(
    delete,
    path = "/context/{name}",
    tag = "context",
    params(ContextFieldPath),
    responses(
        (status = 200, description = "Deleted"),
        (status = 403, description = "A built-in field", body = ErrorBody),
        (status = 404, description = "No such context field", body = ErrorBody),
        (status = 409, description = "Active toggles' constraints use it", body = ErrorBody),
    )
)]
async fn delete_context_field(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ContextFieldPath { name }): AppPath<ContextFieldPath>,
) -> ApiResult<StatusCode> {
    service.delete_context_field(&actor, &name).await?;
    Ok(StatusCode::OK)
}

/// The spec's `PUT /api/context/:name`: [`update_context_field`] at the path without `admin`.
#[utoipa::path(
    put,
    path = "/api/context/{name}",
    tag = "context",
    params(ContextFieldPath),
    request_body = ContextFieldUpdate,
    responses(
        (status = 200, description = "Updated", body = ContextFieldView),
        (status = 404, description = "No such context field", body = ErrorBody),
        (status = 409, description = "Active toggles use a legal value it would drop", body = ErrorBody),
    )
)]
async fn update_context_field_at_spec_path(
    service: State<Service>,
    actor: Actor,
    name: AppPath<ContextFieldPath>,
    spec: AppJson<ContextFieldSpec>,
) -> ApiResult<Response> {
    update_context_field(service, actor, name, spec).await
}
