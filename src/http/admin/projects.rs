//! `/api/admin/projects` (spec §4.5, API-FACTS §13.1), and the spec's `PUT /api/projects/:id`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::project::{by_name, ProjectSpec};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{validate_route_name, AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/projects", get(list_projects).post(create_project))
        .route(
            "/projects/{id}",
            get(get_project)
                .put(update_project)
                .delete(delete_project)
                .post(validate_project),
        )
}

/// The spec's update path, which has no `admin` segment.
pub fn spec_router() -> Router<AppState> {
    Router::new().route("/api/projects/{id}", put(update_project))
}

async fn list_projects(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let projects = by_name(state.projects.values().map(|p| &**p));
    Ok(Json(json!({"version": 1, "projects": projects})))
}

async fn get_project(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let project = state
        .projects
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find project \"{id}\"")))?;
    Ok(Json(json!(project)))
}

async fn create_project(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<ProjectSpec>,
) -> ApiResult<Response> {
    let project = service.create_project(&actor, spec).await?;
    Ok((StatusCode::CREATED, Json(json!(project))).into_response())
}

/// `POST /api/admin/projects/validate` with `{"id": …}`.
async fn validate_project(
    State(service): State<Service>,
    AppPath(segment): AppPath<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let id = validate_route_name(&segment, &body, "id")?;
    service.validate_project_id(&id)?;
    Ok(StatusCode::OK)
}

async fn update_project(
    State(service): State<Service>,
    actor: Actor,
    AppPath(id): AppPath<String>,
    AppJson(spec): AppJson<ProjectSpec>,
) -> ApiResult<Json<Value>> {
    let project = service.update_project(&actor, &id, spec).await?;
    Ok(Json(json!(project)))
}

async fn delete_project(
    State(service): State<Service>,
    actor: Actor,
    AppPath(id): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_project(&actor, &id).await?;
    Ok(StatusCode::OK)
}
