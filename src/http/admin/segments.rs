//! `/api/admin/segments` (MODERN-MODEL §1; Unleash 7's `segment-controller.ts`): the
//! registry of segments, who uses each, and the segments of a strategy.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::segment::{
    segments_of_strategy, strategies_using, AdminSegment, SegmentSpec, SegmentStrategy,
    SegmentUsage,
};
use crate::error::{ApiResult, ErrorBody};
use crate::http::extract::{validate_route_name, AppJson, AppPath};
use crate::http::request_docs::ValidateIdSegment;
use crate::service::segments::existing_segment;
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource, under `/api/admin`.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_segments, create_segment))
        .routes(routes!(
            get_segment,
            update_segment,
            delete_segment,
            validate_segment
        ))
        .routes(routes!(strategies_of_segment))
        .routes(routes!(segments_of_a_strategy))
}

/// Segments, in id order.
#[derive(Serialize, utoipa::ToSchema)]
struct SegmentList<'a> {
    segments: Vec<AdminSegment<'a>>,
}

/// The strategies using a segment.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct SegmentStrategies {
    /// Strategies of active toggles, in every environment.
    strategies: Vec<SegmentStrategy>,
    /// Always empty: Flagpole has no change requests.
    #[schema(value_type = Vec<Object>)]
    change_request_strategies: Vec<Value>,
}

/// `{"name": …}` for `POST /api/admin/segments/validate` (documentation only).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct SegmentNameToValidate {
    #[schema(min_length = 1, max_length = 255, example = "beta users")]
    name: String,
}

/// The segment a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct SegmentPath {
    /// The segment's id
    id: u32,
}

/// The strategy a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct StrategyPath {
    /// The strategy's id (any toggle, any environment)
    #[serde(rename = "strategyId")]
    #[param(rename = "strategyId")]
    strategy_id: String,
}

/// Lists the segments.
#[utoipa::path(
    get,
    path = "/segments",
    tag = "segments",
    responses((status = 200, description = "Every segment, by id", body = SegmentList))
)]
async fn list_segments(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let usage = SegmentUsage::of(&state);
    let mut segments: Vec<_> = state.segments.values().map(|s| usage.view(s)).collect();
    segments.sort_by_key(|s| s.id);
    Ok(Json(SegmentList { segments }).into_response())
}

/// Shows a segment.
#[utoipa::path(
    get,
    path = "/segments/{id}",
    tag = "segments",
    params(SegmentPath),
    responses(
        (status = 200, description = "The segment", body = AdminSegment),
        (status = 400, description = "An id that is not a whole number", body = ErrorBody),
        (status = 404, description = "No such segment", body = ErrorBody),
    )
)]
async fn get_segment(
    State(service): State<Service>,
    AppPath(SegmentPath { id }): AppPath<SegmentPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let segment = existing_segment(&state, id)?;
    Ok(Json(SegmentUsage::of(&state).view(segment)).into_response())
}

/// Creates a segment.
#[utoipa::path(
    post,
    path = "/segments",
    tag = "segments",
    request_body = SegmentSpec,
    responses(
        (status = 201, description = "Created; `Location: segments/<id>`", body = AdminSegment,
         headers(("location" = String, description = "`segments/<id>`"))),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
async fn create_segment(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<SegmentSpec>,
) -> ApiResult<Response> {
    let segment = service.create_segment(&actor, spec).await?;
    let location = format!("segments/{}", segment.id);
    // A new segment has no users yet.
    let view = SegmentUsage::default().view(&segment);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(view),
    )
        .into_response())
}

/// `POST /api/admin/segments/validate` with `{"name": …}`.
#[utoipa::path(
    post,
    path = "/segments/{id}",
    tag = "segments",
    operation_id = "validate_segment",
    summary = "`POST /api/admin/segments/validate`: whether a name is free",
    params(ValidateIdSegment),
    request_body(content = SegmentNameToValidate, description = "`{\"name\": …}`"),
    responses(
        (status = 204, description = "Free"),
        (status = 405, description = "Any segment but `validate`", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
async fn validate_segment(
    State(service): State<Service>,
    AppPath(ValidateIdSegment { id: segment }): AppPath<ValidateIdSegment>,
    AppJson(body): AppJson<serde_json::Map<String, Value>>,
) -> ApiResult<StatusCode> {
    let name = validate_route_name(&segment, &body, "name")?;
    service.validate_segment_name(&name)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replaces a segment.
#[utoipa::path(
    put,
    path = "/segments/{id}",
    tag = "segments",
    params(SegmentPath),
    request_body = SegmentSpec,
    responses(
        (status = 204, description = "Updated"),
        (status = 404, description = "No such segment", body = ErrorBody),
        (status = 409, description = "Another segment has the name", body = ErrorBody),
    )
)]
async fn update_segment(
    State(service): State<Service>,
    actor: Actor,
    AppPath(SegmentPath { id }): AppPath<SegmentPath>,
    AppJson(spec): AppJson<SegmentSpec>,
) -> ApiResult<StatusCode> {
    service.update_segment(&actor, id, spec).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a segment that no active toggle's strategy uses.
#[utoipa::path(
    delete,
    path = "/segments/{id}",
    tag = "segments",
    params(SegmentPath),
    responses(
        (status = 204, description = "Deleted (or there was no such segment)"),
        (status = 400, description = "An id that is not a whole number", body = ErrorBody),
        (status = 409, description = "Strategies of active toggles use it; the message names \
                                       the toggles", body = ErrorBody),
    )
)]
async fn delete_segment(
    State(service): State<Service>,
    actor: Actor,
    AppPath(SegmentPath { id }): AppPath<SegmentPath>,
) -> ApiResult<StatusCode> {
    service.delete_segment(&actor, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The strategies that use a segment.
#[utoipa::path(
    get,
    path = "/segments/{id}/strategies",
    tag = "segments",
    params(SegmentPath),
    responses(
        (status = 200, description = "Strategies of active toggles using it, in every \
                                       environment", body = SegmentStrategies),
        (status = 400, description = "An id that is not a whole number", body = ErrorBody),
        (status = 404, description = "No such segment", body = ErrorBody),
    )
)]
async fn strategies_of_segment(
    State(service): State<Service>,
    AppPath(SegmentPath { id }): AppPath<SegmentPath>,
) -> ApiResult<Json<SegmentStrategies>> {
    let state = service.state()?;
    existing_segment(&state, id)?;
    Ok(Json(SegmentStrategies {
        strategies: strategies_using(&state, id),
        change_request_strategies: Vec::new(),
    }))
}

/// The segments a strategy uses.
#[utoipa::path(
    get,
    path = "/segments/strategies/{strategyId}",
    tag = "segments",
    params(StrategyPath),
    responses((status = 200, description = "The strategy's segments, by id (none for an \
                                             unknown strategy)", body = SegmentList))
)]
async fn segments_of_a_strategy(
    State(service): State<Service>,
    AppPath(StrategyPath { strategy_id }): AppPath<StrategyPath>,
) -> ApiResult<Response> {
    let state = service.state()?;
    let usage = SegmentUsage::of(&state);
    let segments = segments_of_strategy(&state, &strategy_id)
        .into_iter()
        .map(|s| usage.view(s))
        .collect();
    Ok(Json(SegmentList { segments }).into_response())
}
