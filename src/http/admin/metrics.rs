//! The metrics views (spec §4.3, API-FACTS §12), at the spec's paths and the reference's
//! `/api/admin/metrics/...` paths, plus the applications registry's writes and the
//! configuration summary (`/api/admin/metrics/config-versions`) and a toggle's hourly counts
//! (`/api/admin/client-metrics/features/:name/raw`). The views themselves are
//! built in `usage::views`, which the Prometheus gauges read too.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{
    AppJson, AppPath, AppQuery, HoursBack, HoursBackQuery, StaleAfterQuery, StaleAfterSeconds,
    ToggleNamePath,
};
use crate::state::AppState;
use crate::store::usage::AppMetadata;
use crate::usage::{hourly, now_ms, views, UsageRecorder};

/// Longest accepted metadata value.
const METADATA_MAX: usize = 2048;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(list_seen_toggles))
        .routes(routes!(list_seen_toggles_at_metrics_path))
        .routes(routes!(list_toggle_metrics))
        .routes(routes!(get_toggle_metrics))
        .routes(routes!(get_raw_toggle_metrics))
        .routes(routes!(list_applications))
        .routes(routes!(list_applications_at_metrics_path))
        .routes(routes!(
            get_application,
            update_application,
            delete_application
        ))
        .routes(routes!(
            get_application_at_metrics_path,
            update_application_at_metrics_path,
            delete_application_at_metrics_path
        ))
        .routes(routes!(list_seen_apps))
        .routes(routes!(list_seen_apps_at_metrics_path))
        .routes(routes!(get_config_versions))
}

/// The applications seen in the last two days.
#[derive(Serialize, utoipa::ToSchema)]
struct ApplicationList {
    applications: Vec<views::ApplicationItem>,
}

/// The application a path names.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct ApplicationPath {
    /// The application's name
    app: String,
}

/// `GET …/applications`'s query.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ApplicationsQuery {
    /// Only applications whose SDKs implement this strategy
    #[serde(rename = "strategyName")]
    strategy_name: Option<String>,
}

/// Lists, per application, the toggles its SDKs reported.
#[utoipa::path(
    get,
    path = "/seen-toggles",
    tag = "metrics",
    responses((status = 200, description = "Per application, the toggles its SDKs reported", body = Vec<views::SeenToggles>))
)]
async fn list_seen_toggles(
    State(state): State<AppState>,
) -> ApiResult<Json<Vec<views::SeenToggles>>> {
    let view = state
        .metrics
        .usage
        .timed("usage_read", views::seen_toggles(state.usage.store()))
        .await?;
    Ok(Json(view))
}

/// Counts yes/no per toggle over the last hour and minute.
#[utoipa::path(
    get,
    path = "/metrics/feature-toggles",
    tag = "metrics",
    responses((status = 200, description = "yes/no counts per toggle over the last hour and minute", body = views::ToggleMetrics))
)]
async fn list_toggle_metrics(
    State(state): State<AppState>,
) -> ApiResult<Json<views::ToggleMetrics>> {
    let config = state.service.state()?;
    let view = state
        .metrics
        .usage
        .timed(
            "usage_read",
            views::toggle_metrics(state.usage.store(), &config),
        )
        .await?;
    Ok(Json(view))
}

/// Shows a toggle's counts, with variants and per application.
#[utoipa::path(
    get,
    path = "/metrics/feature-toggles/{name}",
    tag = "metrics",
    params(ToggleNamePath),
    responses((status = 200, description = "The toggle's counts, with variants and per application (zeros for an unknown name)", body = views::ToggleDetail))
)]
async fn get_toggle_metrics(
    State(state): State<AppState>,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
) -> ApiResult<Json<views::ToggleDetail>> {
    let view = state
        .metrics
        .usage
        .timed(
            "usage_read",
            views::toggle_detail(state.usage.store(), &name),
        )
        .await?;
    Ok(Json(view))
}

/// Lists a toggle's evaluations per application and hour (Unleash's raw feature metrics).
#[utoipa::path(
    get,
    path = "/client-metrics/features/{name}/raw",
    tag = "metrics",
    params(ToggleNamePath, HoursBackQuery),
    responses(
        (status = 200, description = "Per application and hour (the current one included, oldest first) the toggle's yes/no counts with variants; zeros for hours without any, nothing for an unknown name", body = hourly::RawMetrics),
        (status = 400, description = "hoursBack is not a whole number from 1 to 48", body = ErrorBody),
    )
)]
async fn get_raw_toggle_metrics(
    State(state): State<AppState>,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
    HoursBack(hours): HoursBack,
) -> ApiResult<Json<hourly::RawMetrics>> {
    let usage = state
        .metrics
        .usage
        .timed(
            "usage_read",
            hourly::hourly_usage(state.usage.store(), &name, hours),
        )
        .await?;
    Ok(Json(hourly::raw_metrics(&name, &usage)))
}

/// Lists the applications seen in the last two days.
#[utoipa::path(
    get,
    path = "/applications",
    tag = "metrics",
    params(ApplicationsQuery),
    responses(
        (status = 200, description = "The applications seen in the last two days", body = ApplicationList),
        (status = 400, description = "A malformed query", body = ErrorBody),
    )
)]
async fn list_applications(
    State(state): State<AppState>,
    AppQuery(query): AppQuery<ApplicationsQuery>,
) -> ApiResult<Json<ApplicationList>> {
    let applications = state
        .metrics
        .usage
        .timed(
            "usage_read",
            views::applications(state.usage.store(), query.strategy_name.as_deref()),
        )
        .await?;
    Ok(Json(ApplicationList { applications }))
}

/// Shows an application, its instances and the configuration each holds.
#[utoipa::path(
    get,
    path = "/applications/{app}",
    tag = "metrics",
    params(ApplicationPath),
    responses(
        (status = 200, description = "The application, its instances and what configuration each holds", body = views::ApplicationDetails),
        (status = 404, description = "Not seen in the last two days", body = ErrorBody),
    )
)]
async fn get_application(
    State(state): State<AppState>,
    AppPath(ApplicationPath { app }): AppPath<ApplicationPath>,
) -> ApiResult<Json<views::ApplicationDetails>> {
    let found = state
        .metrics
        .usage
        .timed("usage_read", views::application(state.usage.store(), &app))
        .await?;
    let Some((record, instances, toggles)) = found else {
        return Err(ApiError::NotFound(format!(
            "No application \"{app}\" has been seen in the last two days"
        )));
    };
    let etags = views::current_etags(&state.snapshot, views::poll_queries(&instances)).await;
    Ok(Json(views::application_details(
        record, instances, toggles, &etags,
    )))
}

/// `POST /api/admin/metrics/applications/:app`: what people say about an application.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MetadataBody {
    app_name: Option<String>,
    description: Option<String>,
    url: Option<String>,
    color: Option<String>,
    icon: Option<String>,
    // Accepted as the reference does; they come from registrations, not from people.
    #[allow(dead_code)]
    sdk_version: Option<String>,
    #[allow(dead_code)]
    strategies: Option<Vec<String>>,
}

/// Sets an application's description, URL, color or icon.
#[utoipa::path(
    post,
    path = "/applications/{app}",
    tag = "metrics",
    params(ApplicationPath),
    request_body = MetadataBody,
    responses((status = 202, description = "Stored"))
)]
async fn update_application(
    State(usage): State<Arc<UsageRecorder>>,
    AppPath(ApplicationPath { app }): AppPath<ApplicationPath>,
    AppJson(body): AppJson<MetadataBody>,
) -> ApiResult<StatusCode> {
    if body.app_name.as_ref().is_some_and(|name| *name != app) {
        return Err(ApiError::bad_request(
            "appName",
            "\"appName\" must match the application in the path",
        ));
    }
    let metadata = AppMetadata {
        description: body.description,
        url: body.url,
        color: body.color,
        icon: body.icon,
    };
    for (field, value) in [
        ("description", &metadata.description),
        ("url", &metadata.url),
        ("color", &metadata.color),
        ("icon", &metadata.icon),
    ] {
        if value
            .as_ref()
            .is_some_and(|v| v.chars().count() > METADATA_MAX)
        {
            return Err(ApiError::bad_request(
                field,
                format!("\"{field}\" must be at most {METADATA_MAX} characters long"),
            ));
        }
    }
    if app.trim().is_empty() || app.chars().any(char::is_control) {
        return Err(ApiError::bad_request("appName", "Invalid application name"));
    }
    usage
        .store()
        .set_metadata(&app, &metadata, now_ms())
        .await?;
    Ok(StatusCode::ACCEPTED)
}

/// Removes an application from the registry.
#[utoipa::path(
    delete,
    path = "/applications/{app}",
    tag = "metrics",
    params(ApplicationPath),
    responses((status = 200, description = "Removed from the registry"))
)]
async fn delete_application(
    State(usage): State<Arc<UsageRecorder>>,
    AppPath(ApplicationPath { app }): AppPath<ApplicationPath>,
) -> ApiResult<StatusCode> {
    usage.store().delete_application(&app).await?;
    Ok(StatusCode::OK)
}

/// Per toggle name, the applications that reported it.
type SeenApps = BTreeMap<String, Vec<views::ApplicationItem>>;

/// Lists, per toggle, the applications that reported it.
#[utoipa::path(
    get,
    path = "/seen-apps",
    tag = "metrics",
    responses((status = 200, description = "Per toggle name, the applications that reported it", body = std::collections::BTreeMap<String, Vec<views::ApplicationItem>>))
)]
async fn list_seen_apps(State(state): State<AppState>) -> ApiResult<Json<SeenApps>> {
    let view = state
        .metrics
        .usage
        .timed("usage_read", views::seen_apps(state.usage.store()))
        .await?;
    Ok(Json(view))
}

/// Shows, per application, how many instances hold the newest configuration.
#[utoipa::path(
    get,
    path = "/metrics/config-versions",
    tag = "metrics",
    params(StaleAfterQuery),
    responses(
        (status = 200, description = "Per application, how many instances hold the newest configuration", body = views::ConfigVersions),
        (status = 400, description = "A bad `staleAfterSeconds`", body = ErrorBody),
    )
)]
async fn get_config_versions(
    State(state): State<AppState>,
    StaleAfterSeconds(stale_after): StaleAfterSeconds,
) -> ApiResult<Json<views::ConfigVersions>> {
    let summary =
        views::current_config_versions(&state.usage, &state.snapshot, stale_after).await?;
    Ok(Json(summary))
}

// The reference's `/api/admin/metrics/...` paths of the spec's views.

/// [`list_seen_toggles`] at the reference's path.
#[utoipa::path(get, path = "/metrics/seen-toggles", tag = "metrics",
    responses((status = 200, description = "Per application, the toggles its SDKs reported", body = Vec<views::SeenToggles>))
)]
async fn list_seen_toggles_at_metrics_path(
    state: State<AppState>,
) -> ApiResult<Json<Vec<views::SeenToggles>>> {
    list_seen_toggles(state).await
}

/// [`list_applications`] at the reference's path.
#[utoipa::path(get, path = "/metrics/applications", tag = "metrics",
    params(ApplicationsQuery),
    responses(
        (status = 200, description = "The applications seen in the last two days", body = ApplicationList),
        (status = 400, description = "A malformed query", body = ErrorBody),
    )
)]
async fn list_applications_at_metrics_path(
    state: State<AppState>,
    query: AppQuery<ApplicationsQuery>,
) -> ApiResult<Json<ApplicationList>> {
    list_applications(state, query).await
}

/// [`get_application`] at the reference's path.
#[utoipa::path(get, path = "/metrics/applications/{app}", tag = "metrics",
    params(ApplicationPath),
    responses(
        (status = 200, description = "The application, its instances and what configuration each holds", body = views::ApplicationDetails),
        (status = 404, description = "Not seen in the last two days", body = ErrorBody),
    )
)]
async fn get_application_at_metrics_path(
    state: State<AppState>,
    app: AppPath<ApplicationPath>,
) -> ApiResult<Json<views::ApplicationDetails>> {
    get_application(state, app).await
}

/// [`update_application`] at the reference's path.
#[utoipa::path(post, path = "/metrics/applications/{app}", tag = "metrics",
    params(ApplicationPath),
    request_body = MetadataBody,
    responses((status = 202, description = "Stored"))
)]
async fn update_application_at_metrics_path(
    usage: State<Arc<UsageRecorder>>,
    app: AppPath<ApplicationPath>,
    body: AppJson<MetadataBody>,
) -> ApiResult<StatusCode> {
    update_application(usage, app, body).await
}

/// [`delete_application`] at the reference's path.
#[utoipa::path(delete, path = "/metrics/applications/{app}", tag = "metrics",
    params(ApplicationPath),
    responses((status = 200, description = "Removed from the registry"))
)]
async fn delete_application_at_metrics_path(
    usage: State<Arc<UsageRecorder>>,
    app: AppPath<ApplicationPath>,
) -> ApiResult<StatusCode> {
    delete_application(usage, app).await
}

/// [`list_seen_apps`] at the reference's path.
#[utoipa::path(get, path = "/metrics/seen-apps", tag = "metrics",
    responses((status = 200, description = "Per toggle name, the applications that reported it", body = std::collections::BTreeMap<String, Vec<views::ApplicationItem>>))
)]
async fn list_seen_apps_at_metrics_path(state: State<AppState>) -> ApiResult<Json<SeenApps>> {
    list_seen_apps(state).await
}
