//! `/api/admin/archive`: archived toggles and reviving them (spec §4.2).

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::domain::views::AdminToggle;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/archive/features", get(list_archived_features))
        .route("/archive/revive", post(revive_feature_by_body))
        .route("/archive/revive/{name}", post(revive_feature))
}

async fn list_archived_features(State(service): State<Service>) -> ApiResult<Json<Value>> {
    let state = service.state()?;
    let features: Vec<AdminToggle> = state
        .archive
        .values()
        .map(|t| AdminToggle::archived(t, &state))
        .collect();
    Ok(Json(json!({"version": 1, "features": features})))
}

#[derive(Deserialize)]
struct ReviveBody {
    name: Option<String>,
}

async fn revive(service: &Service, actor: &Actor, name: &str) -> ApiResult<Json<Value>> {
    let toggle = service.revive_toggle(actor, name).await?;
    let state = service.state()?;
    Ok(Json(json!(AdminToggle::new(&toggle, &state))))
}

/// spec §4.2: `POST /api/admin/archive/revive` with `{"name": …}`.
async fn revive_feature_by_body(
    State(service): State<Service>,
    actor: Actor,
    AppJson(body): AppJson<ReviveBody>,
) -> ApiResult<Json<Value>> {
    let name = body
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("name", "\"name\" is required"))?;
    revive(&service, &actor, &name).await
}

/// The reference server's form: `POST /api/admin/archive/revive/:name`.
async fn revive_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    revive(&service, &actor, &name).await
}
