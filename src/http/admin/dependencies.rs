//! Dependencies on a parent toggle, at Unleash 7's routes under `/api/admin/projects/{id}`
//! (MODERN-MODEL §3). Path parameters are named as the project routes' (`{id}`) and the
//! toggle routes' (`{feature}`) so that all of them share one route tree.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::dependency::DependencySpec;
use crate::error::{ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(add_dependency, remove_all_dependencies))
        .routes(routes!(remove_dependency))
        .routes(routes!(list_possible_parents))
        .routes(routes!(list_parent_variants))
        .routes(routes!(dependencies_exist))
}

/// A project a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ProjectPath {
    /// The project's id
    id: String,
}

/// A toggle of a project.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ProjectTogglePath {
    /// The project's id
    id: String,
    /// The toggle's name
    feature: String,
}

/// A child's dependency on a parent.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct DependencyPath {
    /// The project's id
    id: String,
    /// The child toggle's name
    feature: String,
    /// The parent toggle's name
    parent: String,
}

/// Sets the toggle's parent.
///
/// A toggle has one parent: this one replaces the one it had. Refused with 403 (nothing
/// written) when the toggle would depend on itself, when other toggles depend on it, when the
/// parent has a parent of its own, is not an active toggle, or is in another project.
/// `enabled` is `true` when not sent; with `enabled: false` the `variants` are ignored.
#[utoipa::path(
    post,
    path = "/projects/{id}/features/{feature}/dependencies",
    tag = "dependencies",
    params(ProjectTogglePath),
    request_body = DependencySpec,
    responses(
        (status = 200, description = "Set (an empty body)"),
        (status = 403, description = "A dependency rule is broken", body = ErrorBody),
        (status = 404, description = "No such project, or no such active toggle in it", body = ErrorBody),
    )
)]
async fn add_dependency(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ProjectTogglePath { id, feature: name }): AppPath<ProjectTogglePath>,
    AppJson(spec): AppJson<DependencySpec>,
) -> ApiResult<StatusCode> {
    service.add_dependency(&actor, &id, &name, spec).await?;
    Ok(StatusCode::OK)
}

/// Removes the toggle's dependency on one parent (200 also when it had none on it).
#[utoipa::path(
    delete,
    path = "/projects/{id}/features/{feature}/dependencies/{parent}",
    tag = "dependencies",
    params(DependencyPath),
    responses(
        (status = 200, description = "Removed (an empty body)"),
        (status = 404, description = "No such project, or no such active toggle in it", body = ErrorBody),
    )
)]
async fn remove_dependency(
    State(service): State<Service>,
    actor: Actor,
    AppPath(DependencyPath {
        id,
        feature: name,
        parent,
    }): AppPath<DependencyPath>,
) -> ApiResult<StatusCode> {
    service
        .remove_dependency(&actor, &id, &name, &parent)
        .await?;
    Ok(StatusCode::OK)
}

/// Removes all of the toggle's dependencies.
#[utoipa::path(
    delete,
    path = "/projects/{id}/features/{feature}/dependencies",
    tag = "dependencies",
    params(ProjectTogglePath),
    responses(
        (status = 200, description = "Removed (an empty body)"),
        (status = 404, description = "No such project, or no such active toggle in it", body = ErrorBody),
    )
)]
async fn remove_all_dependencies(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ProjectTogglePath { id, feature: name }): AppPath<ProjectTogglePath>,
) -> ApiResult<StatusCode> {
    service.remove_all_dependencies(&actor, &id, &name).await?;
    Ok(StatusCode::OK)
}

/// The toggles this one could depend on: the active toggles of its project that have no
/// parent themselves, but itself, by name.
#[utoipa::path(
    get,
    path = "/projects/{id}/features/{feature}/parents",
    tag = "dependencies",
    params(ProjectTogglePath),
    responses(
        (status = 200, description = "Names of possible parents", body = Vec<String>),
        (status = 404, description = "No such project, or no such active toggle in it", body = ErrorBody),
    )
)]
async fn list_possible_parents(
    State(service): State<Service>,
    AppPath(ProjectTogglePath { id, feature: name }): AppPath<ProjectTogglePath>,
) -> ApiResult<Json<Vec<String>>> {
    Ok(Json(service.possible_parents(&id, &name)?))
}

/// The variant names a dependency on this toggle may ask for: its strategy variants and its
/// toggle variants in every environment, once each, sorted.
#[utoipa::path(
    get,
    path = "/projects/{id}/features/{feature}/parent-variants",
    tag = "dependencies",
    params(ProjectTogglePath),
    responses(
        (status = 200, description = "Variant names", body = Vec<String>),
        (status = 404, description = "No such project, or no such active toggle in it", body = ErrorBody),
    )
)]
async fn list_parent_variants(
    State(service): State<Service>,
    AppPath(ProjectTogglePath { id, feature: name }): AppPath<ProjectTogglePath>,
) -> ApiResult<Json<Vec<String>>> {
    Ok(Json(service.parent_variants(&id, &name)?))
}

/// Whether any toggle (of any project, as in Unleash 7) has a dependency: a bare JSON boolean.
#[utoipa::path(
    get,
    path = "/projects/{id}/dependencies",
    tag = "dependencies",
    params(ProjectPath),
    responses(
        (status = 200, description = "`true` when some toggle has a parent", body = bool, content_type = "application/json"),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
async fn dependencies_exist(
    State(service): State<Service>,
    AppPath(ProjectPath { id }): AppPath<ProjectPath>,
) -> ApiResult<Json<bool>> {
    Ok(Json(service.dependencies_exist(&id)?))
}
