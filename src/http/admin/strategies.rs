//! `/api/admin/strategies` (API-FACTS §2).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::strategy::{ParameterDefinition, StrategyDefinition, StrategyDefinitionSpec};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::http::request_docs::documented_body;
use crate::http::response::Created;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_strategies, create_strategy))
        .routes(routes!(get_strategy, update_strategy, delete_strategy))
        .routes(routes!(deprecate_strategy))
        .routes(routes!(reactivate_strategy))
}

/// Every strategy definition.
#[derive(Serialize, utoipa::ToSchema)]
struct StrategyList<'a> {
    /// Always 1.
    version: u32,
    strategies: Vec<StrategyView<'a>>,
}

/// A definition as served: `editable` is false for built-ins.
#[derive(Serialize, utoipa::ToSchema)]
struct StrategyView<'a> {
    name: &'a str,
    editable: bool,
    description: &'a str,
    parameters: &'a [ParameterDefinition],
    deprecated: bool,
}

/// The strategy definition a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct StrategyPath {
    /// The strategy's name
    name: String,
}

fn view(s: &StrategyDefinition) -> StrategyView<'_> {
    StrategyView {
        name: &s.name,
        editable: !s.built_in,
        description: &s.description,
        parameters: &s.parameters,
        deprecated: s.deprecated,
    }
}

/// Lists the strategy definitions.
#[utoipa::path(
    get,
    path = "/strategies",
    tag = "strategies",
    responses((status = 200, description = "Every strategy definition", body = StrategyList))
)]
async fn list_strategies(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let strategies = state.strategies.values().map(|s| view(s)).collect();
    Ok(Json(StrategyList {
        version: 1,
        strategies,
    })
    .into_response())
}

/// Shows a strategy definition.
#[utoipa::path(
    get,
    path = "/strategies/{name}",
    tag = "strategies",
    params(StrategyPath),
    responses(
        (status = 200, description = "The strategy definition", body = StrategyView),
        (status = 404, description = "No such strategy", body = ErrorBody),
    )
)]
async fn get_strategy(
    State(service): State<Service>,
    AppPath(StrategyPath { name }): AppPath<StrategyPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let strategy = state
        .strategies
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find strategy \"{name}\"")))?;
    Ok(Json(view(strategy)).into_response())
}

documented_body! {
    /// The body of `POST` as documented: a [`StrategyDefinitionSpec`] that names the strategy.
    NewStrategy = creation_schema::<StrategyDefinitionSpec>(
        "name",
        "A strategy definition as sent to create it.",
    )
}

documented_body! {
    /// The body of `PUT` as documented: a [`StrategyDefinitionSpec`] without the `name`, which
    /// the path gives.
    StrategyUpdate = replacement_schema::<StrategyDefinitionSpec>(
        "name",
        "A strategy definition as sent to replace the one the path names. The name is the \
         path's: a body that repeats it must send that one.",
    )
}

/// Creates a strategy definition.
#[utoipa::path(
    post,
    path = "/strategies",
    tag = "strategies",
    request_body = NewStrategy,
    responses(
        (status = 201, description = "Created", body = StrategyView),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
async fn create_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<StrategyDefinitionSpec>,
) -> ApiResult<Response> {
    let strategy = service.create_strategy(&actor, spec).await?;
    Ok(Created(view(&strategy)).into_response())
}

/// Updates a strategy definition.
#[utoipa::path(
    put,
    path = "/strategies/{name}",
    tag = "strategies",
    params(StrategyPath),
    request_body = StrategyUpdate,
    responses(
        (status = 200, description = "Updated", body = StrategyView),
        (status = 403, description = "A built-in strategy", body = ErrorBody),
        (status = 404, description = "No such strategy", body = ErrorBody),
    )
)]
async fn update_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(StrategyPath { name }): AppPath<StrategyPath>,
    AppJson(spec): AppJson<StrategyDefinitionSpec>,
) -> ApiResult<Response> {
    let strategy = service.update_strategy(&actor, &name, spec).await?;
    Ok(Json(view(&strategy)).into_response())
}

/// Deletes a strategy definition.
#[utoipa::path(
    delete,
    path = "/strategies/{name}",
    tag = "strategies",
    params(StrategyPath),
    responses(
        (status = 200, description = "Deleted"),
        (status = 403, description = "A built-in strategy", body = ErrorBody),
        (status = 404, description = "No such strategy", body = ErrorBody),
        (status = 409, description = "Toggles use it", body = ErrorBody),
    )
)]
async fn delete_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(StrategyPath { name }): AppPath<StrategyPath>,
) -> ApiResult<StatusCode> {
    service.delete_strategy(&actor, &name).await?;
    Ok(StatusCode::OK)
}

/// Deprecates a strategy definition.
#[utoipa::path(
    post,
    path = "/strategies/{name}/deprecate",
    tag = "strategies",
    params(StrategyPath),
    responses(
        (status = 200, description = "Deprecated", body = StrategyView),
        (status = 403, description = "A built-in strategy that cannot be deprecated", body = ErrorBody),
        (status = 404, description = "No such strategy", body = ErrorBody),
    )
)]
async fn deprecate_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(StrategyPath { name }): AppPath<StrategyPath>,
) -> ApiResult<Response> {
    let strategy = service.set_strategy_deprecated(&actor, &name, true).await?;
    Ok(Json(view(&strategy)).into_response())
}

/// Reactivates a deprecated strategy definition.
#[utoipa::path(
    post,
    path = "/strategies/{name}/reactivate",
    tag = "strategies",
    params(StrategyPath),
    responses(
        (status = 200, description = "Reactivated", body = StrategyView),
        (status = 403, description = "A built-in strategy that cannot be deprecated", body = ErrorBody),
        (status = 404, description = "No such strategy", body = ErrorBody),
    )
)]
async fn reactivate_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(StrategyPath { name }): AppPath<StrategyPath>,
) -> ApiResult<Response> {
    let strategy = service
        .set_strategy_deprecated(&actor, &name, false)
        .await?;
    Ok(Json(view(&strategy)).into_response())
}
