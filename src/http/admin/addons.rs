//! `/api/admin/addons` (API-FACTS §8.1), and the spec's `POST /api/addons[/:id]` (spec §4.7).
//! Sensitive parameters are always served masked. Also each addon's deliveries, dead letters
//! and redelivery.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::addon::{providers, AddonConfig, AddonSpec, Provider};
use crate::domain::delivery::DeliveryRecord;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;
use crate::store::delivery::DeadLetter;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_addons, create_addon))
        .routes(routes!(get_addon, update_addon, delete_addon))
        .routes(routes!(list_deliveries))
        .routes(routes!(list_dead_letters))
        .routes(routes!(redeliver_dead))
        .routes(routes!(redeliver))
}

/// Every addon (sensitive parameters masked) and the providers.
#[derive(Serialize, utoipa::ToSchema)]
struct AddonList {
    addons: Vec<AddonConfig>,
    providers: Vec<Provider>,
}

/// An addon's newest deliveries.
#[derive(Serialize, utoipa::ToSchema)]
struct DeliveryList {
    deliveries: Vec<DeliveryRecord>,
}

/// An addon's dead letters, newest first.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeadLetterList {
    dead_letters: Vec<DeadLetter>,
    /// How many there are in all.
    total: u64,
}

/// What a redelivery request queued.
#[derive(Serialize, utoipa::ToSchema)]
struct Redelivered {
    redelivered: usize,
    /// Dead letters left (after the 1,000 one call takes); absent for a single redelivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    remaining: Option<u64>,
}

/// The spec's paths, which have no `admin` segment: create, and update by POST.
pub fn spec_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(create_addon_at_spec_path))
        .routes(routes!(update_addon_at_spec_path))
}

/// Lists the addons (sensitive parameters masked) and the providers.
#[utoipa::path(
    get,
    path = "/addons",
    tag = "addons",
    responses((status = 200, description = "Every addon and the providers", body = AddonList))
)]
async fn list_addons(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let mut addons: Vec<_> = state.addons.values().map(|a| a.masked()).collect();
    addons.sort_by_key(|a| a.id);
    Ok(Json(json!(AddonList {
        addons,
        providers: providers()
    })))
}

/// Shows an addon.
#[utoipa::path(
    get,
    path = "/addons/{id}",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id")),
    responses(
        (status = 200, description = "The addon, sensitive parameters masked", body = AddonConfig),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
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

/// Creates an addon.
#[utoipa::path(
    post,
    path = "/addons",
    tag = "addons",
    request_body = AddonSpec,
    responses((status = 201, description = "Created", body = AddonConfig))
)]
async fn create_addon(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<AddonSpec>,
) -> ApiResult<Response> {
    let addon = service.create_addon(&actor, spec).await?;
    Ok((StatusCode::CREATED, Json(json!(addon.masked()))).into_response())
}

/// Updates an addon.
#[utoipa::path(
    put,
    path = "/addons/{id}",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id")),
    request_body = AddonSpec,
    responses(
        (status = 200, description = "Updated (masked parameters sent back keep their value)", body = AddonConfig),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn update_addon(
    State(service): State<Service>,
    actor: Actor,
    AppPath(id): AppPath<String>,
    AppJson(spec): AppJson<AddonSpec>,
) -> ApiResult<Json<Value>> {
    let addon = service.update_addon(&actor, &id, spec).await?;
    Ok(Json(json!(addon.masked())))
}

/// Deletes an addon with its delivery log and dead letters.
#[utoipa::path(
    delete,
    path = "/addons/{id}",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id")),
    responses(
        (status = 200, description = "Deleted, with its delivery log and dead letters"),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn delete_addon(
    State(service): State<Service>,
    actor: Actor,
    AppPath(id): AppPath<String>,
) -> ApiResult<StatusCode> {
    service.delete_addon(&actor, &id).await?;
    Ok(StatusCode::OK)
}

/// Lists an addon's newest deliveries.
#[utoipa::path(
    get,
    path = "/addons/{id}/deliveries",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id"), ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "How many (default 100)")),
    responses(
        (status = 200, description = "The newest deliveries", body = DeliveryList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn list_deliveries(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let limit = super::events::limit(query.as_deref())?;
    let deliveries = service.deliveries(&id, limit).await?;
    Ok(Json(json!(DeliveryList { deliveries })))
}

/// Lists an addon's dead letters.
#[utoipa::path(
    get,
    path = "/addons/{id}/deliveries/dead",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id"), ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "How many (default 100)")),
    responses(
        (status = 200, description = "The newest dead letters", body = DeadLetterList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn list_dead_letters(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let limit = super::events::limit(query.as_deref())?;
    let (letters, total) = service.dead_letters(&id, limit).await?;
    Ok(Json(json!(DeadLetterList {
        dead_letters: letters,
        total
    })))
}

/// Queues one delivery again.
#[utoipa::path(
    post,
    path = "/addons/{id}/deliveries/{delivery}/redeliver",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id"), ("delivery" = String, Path, description = "The delivery's id")),
    responses(
        (status = 202, description = "Queued again", body = Redelivered),
        (status = 404, description = "No such addon or delivery", body = ErrorBody),
        (status = 409, description = "The delivery is still queued or retrying", body = ErrorBody),
    )
)]
async fn redeliver(
    State(service): State<Service>,
    AppPath((id, delivery)): AppPath<(String, String)>,
) -> ApiResult<Response> {
    service.redeliver(&id, &delivery).await?;
    let body = Redelivered {
        redelivered: 1,
        remaining: None,
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// Queues an addon's dead letters again (up to 1,000 per call).
#[utoipa::path(
    post,
    path = "/addons/{id}/deliveries/redeliver-all-dead",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id")),
    responses(
        (status = 202, description = "Up to 1,000 dead letters queued again", body = Redelivered),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn redeliver_dead(
    State(service): State<Service>,
    AppPath(id): AppPath<String>,
) -> ApiResult<Response> {
    let (redelivered, left) = service.redeliver_dead(&id).await?;
    let body = Redelivered {
        redelivered,
        remaining: Some(left),
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// The spec's `POST /api/addons`: [`create_addon`] at the path without `admin`.
#[utoipa::path(
    post,
    path = "/api/addons",
    tag = "addons",
    request_body = AddonSpec,
    responses((status = 201, description = "Created", body = AddonConfig))
)]
async fn create_addon_at_spec_path(
    service: State<Service>,
    actor: Actor,
    spec: AppJson<AddonSpec>,
) -> ApiResult<Response> {
    create_addon(service, actor, spec).await
}

/// The spec's `POST /api/addons/:id`: [`update_addon`] at the path without `admin`.
#[utoipa::path(
    post,
    path = "/api/addons/{id}",
    tag = "addons",
    params(("id" = String, Path, description = "The addon's id")),
    request_body = AddonSpec,
    responses(
        (status = 200, description = "Updated (masked parameters sent back keep their value)", body = AddonConfig),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn update_addon_at_spec_path(
    service: State<Service>,
    actor: Actor,
    id: AppPath<String>,
    spec: AppJson<AddonSpec>,
) -> ApiResult<Json<Value>> {
    update_addon(service, actor, id, spec).await
}
