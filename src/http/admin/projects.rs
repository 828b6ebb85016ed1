//! `/api/admin/projects` (spec §4.5, API-FACTS §13.1), and the spec's `PUT /api/projects/:id`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::project::{by_name, Project, ProjectSpec};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{validate_route_name, AppJson, AppPath};
use crate::http::request_docs::{documented_body, IdToValidate, ValidateIdSegment};
use crate::http::response::Created;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_projects, create_project))
        .routes(routes!(
            get_project,
            update_project,
            delete_project,
            validate_project
        ))
}

/// Every project.
#[derive(Serialize, utoipa::ToSchema)]
struct ProjectList<'a> {
    /// Always 1.
    version: u32,
    projects: Vec<&'a Project>,
}

documented_body! {
    /// The body of `PUT` as documented: a [`ProjectSpec`] without the `id`, which the path
    /// gives.
    ProjectUpdate = replacement_schema::<ProjectSpec>(
        "id",
        "A project as sent to replace the one the path names. The id is the path's: a \
         body that repeats it must send that one.",
    )
}

/// The project a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ProjectPath {
    /// The project's id
    id: String,
}

/// The spec's update path, which has no `admin` segment.
pub fn spec_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default().routes(routes!(update_project_at_spec_path))
}

/// Lists the projects.
#[utoipa::path(
    get,
    path = "/projects",
    tag = "projects",
    responses((status = 200, description = "Every project, by name", body = ProjectList))
)]
async fn list_projects(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let projects = by_name(state.projects.values().map(|p| &**p));
    Ok(Json(ProjectList {
        version: 1,
        projects,
    })
    .into_response())
}

/// Shows a project.
#[utoipa::path(
    get,
    path = "/projects/{id}",
    tag = "projects",
    params(ProjectPath),
    responses(
        (status = 200, description = "The project", body = Project),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
async fn get_project(
    State(service): State<Service>,
    AppPath(ProjectPath { id }): AppPath<ProjectPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let project = state
        .projects
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find project \"{id}\"")))?;
    Ok(Json(project).into_response())
}

/// Creates a project.
#[utoipa::path(
    post,
    path = "/projects",
    tag = "projects",
    request_body = ProjectSpec,
    responses(
        (status = 201, description = "Created", body = Project),
        (status = 409, description = "The id is taken", body = ErrorBody),
    )
)]
async fn create_project(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<ProjectSpec>,
) -> ApiResult<Created<Project>> {
    let project = service.create_project(&actor, spec).await?;
    Ok(Created(project))
}

/// `POST /api/admin/projects/validate` with `{"id": …}`.
#[utoipa::path(
    post,
    path = "/projects/{id}",
    tag = "projects",
    operation_id = "validate_project",
    summary = "`POST /api/admin/projects/validate`: whether an id is valid and free",
    params(ValidateIdSegment),
    request_body(content = IdToValidate, description = "`{\"id\": …}`"),
    responses(
        (status = 200, description = "Valid and free"),
        (status = 405, description = "Any segment but `validate`", body = ErrorBody),
        (status = 409, description = "The id is taken", body = ErrorBody),
    )
)]
async fn validate_project(
    State(service): State<Service>,
    AppPath(ValidateIdSegment { id: segment }): AppPath<ValidateIdSegment>,
    AppJson(body): AppJson<serde_json::Map<String, Value>>,
) -> ApiResult<StatusCode> {
    let id = validate_route_name(&segment, &body, "id")?;
    service.validate_project_id(&id)?;
    Ok(StatusCode::OK)
}

/// Updates a project.
#[utoipa::path(
    put,
    path = "/projects/{id}",
    tag = "projects",
    params(ProjectPath),
    request_body = ProjectUpdate,
    responses(
        (status = 200, description = "Updated", body = Project),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
async fn update_project(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ProjectPath { id }): AppPath<ProjectPath>,
    AppJson(spec): AppJson<ProjectSpec>,
) -> ApiResult<Json<Project>> {
    let project = service.update_project(&actor, &id, spec).await?;
    Ok(Json(project))
}

/// Deletes a project.
#[utoipa::path(
    delete,
    path = "/projects/{id}",
    tag = "projects",
    params(ProjectPath),
    responses(
        (status = 200, description = "Deleted; its archived toggles move to `default`"),
        (status = 403, description = "The `default` project", body = ErrorBody),
        (status = 404, description = "No such project", body = ErrorBody),
        (status = 409, description = "It has active toggles", body = ErrorBody),
    )
)]
async fn delete_project(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ProjectPath { id }): AppPath<ProjectPath>,
) -> ApiResult<StatusCode> {
    service.delete_project(&actor, &id).await?;
    Ok(StatusCode::OK)
}

/// The spec's `PUT /api/projects/:id`: [`update_project`] at the path without `admin`.
#[utoipa::path(
    put,
    path = "/api/projects/{id}",
    tag = "projects",
    params(ProjectPath),
    request_body = ProjectUpdate,
    responses(
        (status = 200, description = "Updated", body = Project),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
async fn update_project_at_spec_path(
    service: State<Service>,
    actor: Actor,
    id: AppPath<ProjectPath>,
    spec: AppJson<ProjectSpec>,
) -> ApiResult<Json<Project>> {
    update_project(service, actor, id, spec).await
}
