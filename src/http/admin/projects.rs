//! `/api/admin/projects` (spec §4.5, API-FACTS §13.1), and the spec's `PUT /api/projects/:id`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::domain::project::ProjectSpec;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/projects", get(list_projects).post(create_project))
        .route("/projects/validate", post(validate_project))
        .route(
            "/projects/{id}",
            get(get_project).put(update_project).delete(delete_project),
        )
}

/// The spec's update path, which has no `admin` segment.
pub fn spec_router() -> Router<AppState> {
    Router::new().route("/api/projects/{id}", put(update_project))
}

async fn list_projects(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let mut projects: Vec<_> = state.projects.values().collect();
    // API-FACTS G7: by name; ids (unique) break ties.
    projects.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
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

/// The body of the validate route.
#[derive(Deserialize)]
struct IdBody {
    id: String,
}

async fn validate_project(
    State(service): State<Service>,
    AppJson(body): AppJson<IdBody>,
) -> ApiResult<StatusCode> {
    service.validate_project_id(&body.id)?;
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
