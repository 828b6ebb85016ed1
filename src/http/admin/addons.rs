//! `/api/admin/addons` (API-FACTS §8.1), and the spec's `POST /api/addons[/:id]` (spec §4.7).
//! Sensitive parameters are always served masked. Also each addon's deliveries, dead letters
//! and redelivery.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::addon::{providers, AddonSpec};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/addons", get(list_addons).post(create_addon))
        .route(
            "/addons/{id}",
            get(get_addon).put(update_addon).delete(delete_addon),
        )
        .route("/addons/{id}/deliveries", get(list_deliveries))
        .route("/addons/{id}/deliveries/dead", get(list_dead_letters))
        .route(
            "/addons/{id}/deliveries/redeliver-all-dead",
            post(redeliver_dead),
        )
        .route(
            "/addons/{id}/deliveries/{delivery}/redeliver",
            post(redeliver),
        )
}

/// The spec's paths, which have no `admin` segment: create, and update by POST.
pub fn spec_router() -> Router<AppState> {
    Router::new()
        .route("/api/addons", post(create_addon))
        .route("/api/addons/{id}", post(update_addon))
}

async fn list_addons(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let mut addons: Vec<_> = state.addons.values().map(|a| a.masked()).collect();
    addons.sort_by_key(|a| a.id);
    Ok(Json(json!({"addons": addons, "providers": providers()})))
}

async fn get_addon(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let addon = state
        .addons
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find addon {id}")))?;
    Ok(Json(json!(addon.masked())))
}

async fn create_addon(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<AddonSpec>,
) -> ApiResult<Response> {
    let addon = service.create_addon(&actor, spec).await?;
    Ok((StatusCode::CREATED, Json(json!(addon.masked()))).into_response())
}

async fn update_addon(
    State(service): State<Service>,
    actor: Actor,
    AppPath(id): AppPath<String>,
    AppJson(spec): AppJson<AddonSpec>,
) -> ApiResult<Json<Value>> {
    let addon = service.update_addon(&actor, &id, spec).await?;
    Ok(Json(json!(addon.masked())))
}

async fn delete_addon(
    State(service): State<Service>,
    actor: Actor,
    AppPath(id): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_addon(&actor, &id).await?;
    Ok(StatusCode::OK)
}

async fn list_deliveries(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let limit = super::events::limit(query.as_deref())?;
    let deliveries = service.deliveries(&id, limit).await?;
    Ok(Json(json!({"deliveries": deliveries})))
}

async fn list_dead_letters(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let limit = super::events::limit(query.as_deref())?;
    let (letters, total) = service.dead_letters(&id, limit).await?;
    Ok(Json(json!({"deadLetters": letters, "total": total})))
}

async fn redeliver(
    State(service): State<Service>,
    AppPath((id, delivery)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    service.redeliver(&id, &delivery).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"redelivered": 1}))).into_response())
}

async fn redeliver_dead(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
) -> ApiResult<Response> {
    let (redelivered, left) = service.redeliver_dead(&id).await?;
    let body = json!({"redelivered": redelivered, "remaining": left});
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}
