//! `/api/admin/environments`: the environment registry, with Unleash 7's routes and shapes
//! (OSS: list, get, on/off, sort order) and Unleash enterprise's create, update and delete.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::environment::{Environment, EnvironmentSpec};
use crate::domain::feature_view::{environments_in_order, EnvironmentView};
use crate::error::{ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::http::request_docs::documented_body;
use crate::http::response::Created;
use crate::service::environments::existing_environment;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_environments, create_environment))
        .routes(routes!(
            get_environment,
            update_environment,
            delete_environment
        ))
        .routes(routes!(update_environment_enterprise))
        .routes(routes!(environment_on))
        .routes(routes!(environment_off))
        .routes(routes!(set_sort_order))
}

/// Every environment, by sort order then name.
#[derive(Serialize, utoipa::ToSchema)]
struct EnvironmentList<'a> {
    /// Always 1.
    version: u32,
    environments: Vec<EnvironmentView<'a>>,
}

/// The environment a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct EnvironmentPath {
    /// The environment's name
    name: String,
}

documented_body! {
    /// The body of `POST` as documented: an [`EnvironmentSpec`] that names the environment.
    NewEnvironment = creation_schema::<EnvironmentSpec>(
        "name",
        "An environment as sent to create it.",
    )
}

documented_body! {
    /// The body of the update routes as documented: an [`EnvironmentSpec`] without the name.
    EnvironmentUpdate = replacement_schema::<EnvironmentSpec>(
        "name",
        "An environment as sent to update the one the path names: its type, and its enabled \
         state and sort order (kept when not sent). A body that repeats the name must send \
         the path's.",
    )
}

/// `{name: order}` for the environments to reorder (documentation only).
#[derive(utoipa::ToSchema)]
#[schema(value_type = BTreeMap<String, i64>, example = json!({"production": 1, "development": 2}))]
#[allow(dead_code)]
struct SortOrder(BTreeMap<String, i64>);

/// Lists the environments.
#[utoipa::path(
    get,
    path = "/environments",
    tag = "environments",
    responses((status = 200, description = "Every environment, by sort order then name", body = EnvironmentList))
)]
async fn list_environments(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let environments = environments_in_order(&state)
        .into_iter()
        .map(|e| EnvironmentView::new(e, &state))
        .collect();
    Ok(Json(EnvironmentList {
        version: 1,
        environments,
    })
    .into_response())
}

/// Shows an environment.
#[utoipa::path(
    get,
    path = "/environments/{name}",
    tag = "environments",
    params(EnvironmentPath),
    responses(
        (status = 200, description = "The environment", body = Environment),
        (status = 404, description = "No such environment", body = ErrorBody),
    )
)]
async fn get_environment(
    State(service): State<Service>,
    AppPath(EnvironmentPath { name }): AppPath<EnvironmentPath>,
) -> ApiResult<Json<Environment>> {
    let state = service.state()?;
    Ok(Json(existing_environment(&state, &name)?.clone()))
}

/// Creates an environment (Unleash enterprise; there is no limit on their number).
#[utoipa::path(
    post,
    path = "/environments",
    tag = "environments",
    request_body = NewEnvironment,
    responses(
        (status = 201, description = "Created", body = Environment),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
async fn create_environment(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<EnvironmentSpec>,
) -> ApiResult<Created<Environment>> {
    Ok(Created(service.create_environment(&actor, spec).await?))
}

/// Updates an environment (Unleash enterprise's path is `PUT /environments/update/{name}`).
#[utoipa::path(
    put,
    path = "/environments/{name}",
    tag = "environments",
    params(EnvironmentPath),
    request_body = EnvironmentUpdate,
    responses(
        (status = 200, description = "Updated", body = Environment),
        (status = 404, description = "No such environment", body = ErrorBody),
    )
)]
async fn update_environment(
    State(service): State<Service>,
    actor: Actor,
    AppPath(EnvironmentPath { name }): AppPath<EnvironmentPath>,
    AppJson(spec): AppJson<EnvironmentSpec>,
) -> ApiResult<Json<Environment>> {
    Ok(Json(service.update_environment(&actor, &name, spec).await?))
}

/// Updates an environment at Unleash enterprise's path.
#[utoipa::path(
    put,
    path = "/environments/update/{name}",
    tag = "environments",
    params(EnvironmentPath),
    request_body = EnvironmentUpdate,
    responses(
        (status = 200, description = "Updated", body = Environment),
        (status = 404, description = "No such environment", body = ErrorBody),
    )
)]
async fn update_environment_enterprise(
    service: State<Service>,
    actor: Actor,
    path: AppPath<EnvironmentPath>,
    spec: AppJson<EnvironmentSpec>,
) -> ApiResult<Json<Environment>> {
    update_environment(service, actor, path, spec).await
}

/// Deletes an environment that is not protected and that no toggle has configuration in.
#[utoipa::path(
    delete,
    path = "/environments/{name}",
    tag = "environments",
    params(EnvironmentPath),
    responses(
        (status = 200, description = "Deleted"),
        (status = 404, description = "No such environment", body = ErrorBody),
        (status = 409, description = "Protected (`default`), or a toggle has configuration in it", body = ErrorBody),
    )
)]
async fn delete_environment(
    State(service): State<Service>,
    actor: Actor,
    AppPath(EnvironmentPath { name }): AppPath<EnvironmentPath>,
) -> ApiResult<StatusCode> {
    service.delete_environment(&actor, &name).await?;
    Ok(StatusCode::OK)
}

/// Switches an environment on.
#[utoipa::path(
    post,
    path = "/environments/{name}/on",
    tag = "environments",
    params(EnvironmentPath),
    responses(
        (status = 204, description = "On"),
        (status = 404, description = "No such environment", body = ErrorBody),
    )
)]
async fn environment_on(
    State(service): State<Service>,
    actor: Actor,
    AppPath(EnvironmentPath { name }): AppPath<EnvironmentPath>,
) -> ApiResult<StatusCode> {
    service.set_environment_enabled(&actor, &name, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Switches an environment off (toggles keep their configuration in it; its client
/// documents are still served, as in Unleash).
#[utoipa::path(
    post,
    path = "/environments/{name}/off",
    tag = "environments",
    params(EnvironmentPath),
    responses(
        (status = 204, description = "Off"),
        (status = 404, description = "No such environment", body = ErrorBody),
    )
)]
async fn environment_off(
    State(service): State<Service>,
    actor: Actor,
    AppPath(EnvironmentPath { name }): AppPath<EnvironmentPath>,
) -> ApiResult<StatusCode> {
    service
        .set_environment_enabled(&actor, &name, false)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Sets the sort order of the environments named; the others keep theirs.
#[utoipa::path(
    put,
    path = "/environments/sort-order",
    tag = "environments",
    request_body = SortOrder,
    responses(
        (status = 200, description = "Updated"),
        (status = 404, description = "A name is not an environment", body = ErrorBody),
    )
)]
async fn set_sort_order(
    State(service): State<Service>,
    actor: Actor,
    AppJson(orders): AppJson<BTreeMap<String, Value>>,
) -> ApiResult<StatusCode> {
    service.set_environment_sort_order(&actor, orders).await?;
    Ok(StatusCode::OK)
}
