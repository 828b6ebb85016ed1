//! `/api/admin/archive`: archived toggles and reviving them (spec §4.2).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::features::FeatureList;
use crate::domain::views::AdminToggle;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppJson, AppPath};
use crate::service::{Actor, Service};
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_archived_features))
        .routes(routes!(revive_feature_by_body))
        .routes(routes!(revive_feature))
}

/// Lists the archived toggles.
#[utoipa::path(
    get,
    path = "/archive/features",
    tag = "archive",
    responses((status = 200, description = "The archived toggles, with the legacy `strategy` and `parameters`", body = FeatureList))
)]
async fn list_archived_features(State(service): State<Service>) -> ApiResult<Response> {
    let state = service.state()?;
    let features: Vec<AdminToggle> = state
        .archive
        .values()
        .map(|t| AdminToggle::archived(t, &state))
        .collect();
    Ok(Json(FeatureList {
        version: 1,
        features,
    })
    .into_response())
}

/// The archived toggle a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ArchivedTogglePath {
    /// The archived toggle's name
    name: String,
}

/// `POST /api/admin/archive/revive`'s body.
#[derive(Deserialize, utoipa::ToSchema)]
struct ReviveBody {
    /// The archived toggle to revive.
    #[schema(required = true, nullable = false, min_length = 1)]
    name: Option<String>,
}

async fn revive(service: &Service, actor: &Actor, name: &str) -> ApiResult<Response> {
    let toggle = service.revive_toggle(actor, name).await?;
    let state = service.state()?;
    Ok(Json(AdminToggle::new(&toggle, &state)).into_response())
}

/// spec §4.2: `POST /api/admin/archive/revive` with `{"name": …}`.
#[utoipa::path(
    post,
    path = "/archive/revive",
    tag = "archive",
    request_body = ReviveBody,
    responses(
        (status = 200, description = "Revived (disabled)", body = AdminToggle),
        (status = 404, description = "No such archived toggle", body = ErrorBody),
        (status = 409, description = "An active toggle has the name, or a context field it uses is gone", body = ErrorBody),
    )
)]
async fn revive_feature_by_body(
    State(service): State<Service>,
    actor: Actor,
    AppJson(body): AppJson<ReviveBody>,
) -> ApiResult<Response> {
    let name = body
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("name", "\"name\" is required"))?;
    revive(&service, &actor, &name).await
}

/// The reference server's form: `POST /api/admin/archive/revive/:name`.
#[utoipa::path(
    post,
    path = "/archive/revive/{name}",
    tag = "archive",
    params(ArchivedTogglePath),
    responses(
        (status = 200, description = "Revived (disabled)", body = AdminToggle),
        (status = 404, description = "No such archived toggle", body = ErrorBody),
        (status = 409, description = "An active toggle has the name, or a context field it uses is gone", body = ErrorBody),
    )
)]
async fn revive_feature(
    State(service): State<Service>,
    actor: Actor,
    AppPath(ArchivedTogglePath { name }): AppPath<ArchivedTogglePath>,
) -> ApiResult<Response> {
    revive(&service, &actor, &name).await
}
