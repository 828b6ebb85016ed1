//! `/api/admin/strategies` (API-FACTS §2).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{json, Value};

use crate::domain::strategy::{ParameterDefinition, StrategyDefinition, StrategyDefinitionSpec};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/strategies", get(list_strategies).post(create_strategy))
        .route(
            "/strategies/{name}",
            get(get_strategy)
                .put(update_strategy)
                .delete(delete_strategy),
        )
        .route("/strategies/{name}/deprecate", post(deprecate_strategy))
        .route("/strategies/{name}/reactivate", post(reactivate_strategy))
}

/// A definition as served: `editable` is false for built-ins.
#[derive(Serialize)]
struct StrategyView<'a> {
    name: &'a str,
    editable: bool,
    description: &'a str,
    parameters: &'a [ParameterDefinition],
    deprecated: bool,
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

async fn list_strategies(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let strategies: Vec<_> = state.strategies.values().map(|s| view(s)).collect();
    Ok(Json(json!({"version": 1, "strategies": strategies})))
}

async fn get_strategy(
    State(service): State<Service>,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let strategy = state
        .strategies
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find strategy \"{name}\"")))?;
    Ok(Json(json!(view(strategy))))
}

async fn create_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<StrategyDefinitionSpec>,
) -> ApiResult<Response> {
    let strategy = service.create_strategy(&actor, spec).await?;
    Ok((StatusCode::CREATED, Json(json!(view(&strategy)))).into_response())
}

async fn update_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
    AppJson(spec): AppJson<StrategyDefinitionSpec>,
) -> ApiResult<Json<Value>> {
    let strategy = service.update_strategy(&actor, &name, spec).await?;
    Ok(Json(json!(view(&strategy))))
}

async fn delete_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_strategy(&actor, &name).await?;
    Ok(StatusCode::OK)
}

async fn deprecate_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let strategy = service.set_strategy_deprecated(&actor, &name, true).await?;
    Ok(Json(json!(view(&strategy))))
}

async fn reactivate_strategy(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let strategy = service
        .set_strategy_deprecated(&actor, &name, false)
        .await?;
    Ok(Json(json!(view(&strategy))))
}
