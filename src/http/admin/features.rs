//! `/api/admin/features`: toggles and the tags on them (spec §4.2).

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::tag::{TagRef, TagSpec};
use crate::domain::toggle::{Toggle, ToggleSpec};
use crate::domain::views::AdminToggle;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{validate_route_name, AppJson, AppPath, FilterQuery};
use crate::service::{Actor, Service, ServiceError};
use crate::state::AppState;
use crate::store::StoreError;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/features", get(list_features).post(create_feature))
        .route(
            "/features/{name}",
            get(get_feature)
                .put(update_feature)
                .delete(archive_feature)
                .post(validate_feature_name),
        )
        .route("/features/{name}/toggle/on", post(enable_feature))
        .route("/features/{name}/toggle/off", post(disable_feature))
        .route("/features/{name}/stale/on", post(mark_stale))
        .route("/features/{name}/stale/off", post(unmark_stale))
        .route(
            "/features/{name}/tags",
            get(list_feature_tags).post(add_feature_tag),
        )
        .route(
            "/features/{name}/tags/{type}/{value}",
            delete(remove_feature_tag),
        )
}

/// Renders a toggle as the admin API shows it, tag ids from the current snapshot.
fn admin_json(service: &Service, toggle: &Toggle) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    Ok(Json(json!(AdminToggle::new(toggle, &state))))
}

async fn list_features(
    State(service): State<Service>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let filter = FilterQuery::parse(query.as_deref().unwrap_or(""))?.filter()?;
    let state = service.state()?;
    let features: Vec<AdminToggle> = state
        .features
        .values()
        .filter(|t| filter.matches(t))
        .map(|t| AdminToggle::new(t, &state))
        .collect();
    // spec §4.2: the admin list is version 2.
    Ok(Json(json!({"version": 2, "features": features})))
}

async fn get_feature(
    State(service): State<Service>,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let toggle = state
        .features
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find feature \"{name}\"")))?;
    Ok(Json(json!(AdminToggle::new(toggle, &state))))
}

async fn create_feature(
    State(service): State<Service>,
    actor: Actor,
    AppJson(spec): AppJson<ToggleSpec>,
) -> ApiResult<Json<Value>> {
    let toggle = service.create_toggle(&actor, spec).await?;
    // spec §4.2: 200 on success.
    admin_json(&service, &toggle)
}

/// `POST /api/admin/features/validate` with `{"name": …}`.
async fn validate_feature_name(
    State(service): State<Service>,
    AppPath(segment): AppPath<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let name = validate_route_name(&segment, &body, "name")?;
    service.validate_toggle_name(&name)?;
    Ok(StatusCode::OK)
}

async fn update_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
    AppJson(spec): AppJson<ToggleSpec>,
) -> ApiResult<Json<Value>> {
    let toggle = service.update_toggle(&actor, &name, spec).await?;
    admin_json(&service, &toggle)
}

async fn archive_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let toggle = service.archive_toggle(&actor, &name).await?;
    admin_json(&service, &toggle)
}

async fn enable_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let toggle = service.set_enabled(&actor, &name, true).await?;
    admin_json(&service, &toggle)
}

async fn disable_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let toggle = service.set_enabled(&actor, &name, false).await?;
    admin_json(&service, &toggle)
}

async fn mark_stale(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let toggle = service.set_stale(&actor, &name, true).await?;
    admin_json(&service, &toggle)
}

async fn unmark_stale(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let toggle = service.set_stale(&actor, &name, false).await?;
    admin_json(&service, &toggle)
}

async fn list_feature_tags(
    State(service): State<Service>,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let toggle = state
        .features
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("Could not find feature \"{name}\"")))?;
    let tags: Vec<_> = toggle.tags.iter().filter_map(|t| state.tag(t)).collect();
    Ok(Json(json!({"version": 1, "tags": tags})))
}

async fn add_feature_tag(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
    AppJson(spec): AppJson<TagSpec>,
) -> ApiResult<Response> {
    let tag = service.add_toggle_tag(&actor, &name, spec).await?;
    // spec §4.2: 201 when tagged.
    Ok((StatusCode::CREATED, Json(tag)).into_response())
}

async fn remove_feature_tag(
    State(service): State<Service>,
    actor: Actor,
    AppPath((name, kind, value)): AppPath<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let tag = TagRef { kind, value };
    match service.remove_toggle_tag(&actor, &name, tag).await {
        Ok(()) => Ok(StatusCode::OK),
        // spec §7: removing a tag while the database cannot be reached is a 500.
        Err(ServiceError::Store(e @ (StoreError::Unavailable(_) | StoreError::Uncertain(_)))) => {
            tracing::warn!(error = %e, "tag removal failed");
            Err(ApiError::StoreUnreachable(
                "The store is unreachable; the tag was not removed. Try again shortly.".into(),
            ))
        }
        Err(e) => Err(e.into()),
    }
}
