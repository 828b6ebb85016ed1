//! `/api/admin/addons` (API-FACTS §8.1), and the spec's `POST /api/addons[/:id]` (spec §4.7).
//! Sensitive parameters are always served masked. Also each addon's deliveries, dead letters
//! and redelivery.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::addon::{providers, AddonConfig, AddonSpec, Provider};
use crate::domain::delivery::DeliveryRecord;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath, ListLimit};
use crate::http::response::{Accepted, Created};
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

/// The addon a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct AddonPath {
    /// The addon's id
    id: String,
}

/// One delivery of an addon, as its path names it.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct DeliveryPath {
    /// The addon's id
    id: String,
    /// The delivery's id
    delivery: String,
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
async fn list_addons(State(service): State<Service>) -> ApiResult<Json<AddonList>> {
    let state = service.state()?;
    let mut addons: Vec<_> = state.addons.values().map(|a| a.masked()).collect();
    addons.sort_by_key(|a| a.id);
    Ok(Json(AddonList {
        addons,
        providers: providers(),
    }))
}

/// Shows an addon.
#[utoipa::path(
    get,
    path = "/addons/{id}",
    tag = "addons",
    params(AddonPath),
    responses(
        (status = 200, description = "The addon, sensitive parameters masked", body = AddonConfig),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn get_addon(
    State(service): State<Service>,
    AppPath(AddonPath { id }): AppPath<AddonPath>,
) -> ApiResult<Json<AddonConfig>> {
    let state = service.state()?;
    let addon = state
        .addons
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find addon {id}")))?;
    Ok(Json(addon.masked()))
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
) -> ApiResult<Created<AddonConfig>> {
    let addon = service.create_addon(&actor, spec).await?;
    Ok(Created(addon.masked()))
}

/// Updates an addon.
#[utoipa::path(
    put,
    path = "/addons/{id}",
    tag = "addons",
    params(AddonPath),
    request_body = AddonSpec,
    responses(
        (status = 200, description = "Updated (masked parameters sent back keep their value)", body = AddonConfig),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn update_addon(
    State(service): State<Service>,
    actor: Actor,
    AppPath(AddonPath { id }): AppPath<AddonPath>,
    AppJson(spec): AppJson<AddonSpec>,
) -> ApiResult<Json<AddonConfig>> {
    let addon = service.update_addon(&actor, &id, spec).await?;
    Ok(Json(addon.masked()))
}

/// Deletes an addon with its delivery log and dead letters.
#[utoipa::path(
    delete,
    path = "/addons/{id}",
    tag = "addons",
    params(AddonPath),
    responses(
        (status = 200, description = "Deleted, with its delivery log and dead letters"),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn delete_addon(
    State(service): State<Service>,
    actor: Actor,
    AppPath(AddonPath { id }): AppPath<AddonPath>,
) -> ApiResult<StatusCode> {
    service.delete_addon(&actor, &id).await?;
    Ok(StatusCode::OK)
}

/// Lists an addon's newest deliveries.
#[utoipa::path(
    get,
    path = "/addons/{id}/deliveries",
    tag = "addons",
    params(AddonPath, ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "How many (default 100)")),
    responses(
        (status = 200, description = "The newest deliveries", body = DeliveryList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn list_deliveries(
    State(service): State<Service>,
    AppPath(AddonPath { id }): AppPath<AddonPath>,
    ListLimit(limit): ListLimit,
) -> ApiResult<Json<DeliveryList>> {
    let deliveries = service.deliveries(&id, limit).await?;
    Ok(Json(DeliveryList { deliveries }))
}

/// Lists an addon's dead letters.
#[utoipa::path(
    get,
    path = "/addons/{id}/deliveries/dead",
    tag = "addons",
    params(AddonPath, ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "How many (default 100)")),
    responses(
        (status = 200, description = "The newest dead letters", body = DeadLetterList),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn list_dead_letters(
    State(service): State<Service>,
    AppPath(AddonPath { id }): AppPath<AddonPath>,
    ListLimit(limit): ListLimit,
) -> ApiResult<Json<DeadLetterList>> {
    let (dead_letters, total) = service.dead_letters(&id, limit).await?;
    Ok(Json(DeadLetterList {
        dead_letters,
        total,
    }))
}

/// Queues one delivery again.
#[utoipa::path(
    post,
    path = "/addons/{id}/deliveries/{delivery}/redeliver",
    tag = "addons",
    params(DeliveryPath),
    responses(
        (status = 202, description = "Queued again", body = Redelivered),
        (status = 404, description = "No such addon or delivery", body = ErrorBody),
        (status = 409, description = "The delivery is still queued or retrying", body = ErrorBody),
    )
)]
async fn redeliver(
    State(service): State<Service>,
    AppPath(DeliveryPath { id, delivery }): AppPath<DeliveryPath>,
) -> ApiResult<Accepted<Redelivered>> {
    service.redeliver(&id, &delivery).await?;
    Ok(Accepted(Redelivered {
        redelivered: 1,
        remaining: None,
    }))
}

/// Queues an addon's dead letters again (up to 1,000 per call).
#[utoipa::path(
    post,
    path = "/addons/{id}/deliveries/redeliver-all-dead",
    tag = "addons",
    params(AddonPath),
    responses(
        (status = 202, description = "Up to 1,000 dead letters queued again", body = Redelivered),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn redeliver_dead(
    State(service): State<Service>,
    AppPath(AddonPath { id }): AppPath<AddonPath>,
) -> ApiResult<Accepted<Redelivered>> {
    let (redelivered, left) = service.redeliver_dead(&id).await?;
    Ok(Accepted(Redelivered {
        redelivered,
        remaining: Some(left),
    }))
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
) -> ApiResult<Created<AddonConfig>> {
    create_addon(service, actor, spec).await
}

/// The spec's `POST /api/addons/:id`: [`update_addon`] at the path without `admin`.
#[utoipa::path(
    post,
    path = "/api/addons/{id}",
    tag = "addons",
    params(AddonPath),
    request_body = AddonSpec,
    responses(
        (status = 200, description = "Updated (masked parameters sent back keep their value)", body = AddonConfig),
        (status = 404, description = "No such addon", body = ErrorBody),
    )
)]
async fn update_addon_at_spec_path(
    service: State<Service>,
    actor: Actor,
    id: AppPath<AddonPath>,
    spec: AppJson<AddonSpec>,
) -> ApiResult<Json<AddonConfig>> {
    update_addon(service, actor, id, spec).await
}
