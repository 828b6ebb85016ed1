//! The metrics views (spec §4.3, API-FACTS §12), at the spec's paths and the reference's
//! `/api/admin/metrics/...` paths, plus the applications registry's writes and the
//! configuration summary (`/api/admin/metrics/config-versions`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::domain::filter::FeatureFilter;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{AppJson, AppPath, FilterQuery};
use crate::snapshot::{no_match, Snapshot};
use crate::state::AppState;
use crate::store::usage::AppMetadata;
use crate::store::StoreError;
use crate::usage::{now_ms, views, UsageRecorder};

/// Default of `staleAfterSeconds`: an instance that has not polled for this long is "not seen
/// recently" (SDKs poll every 15 s by default).
pub const DEFAULT_STALE_AFTER_SECONDS: u64 = 120;
/// Longest accepted metadata value.
const METADATA_MAX: usize = 2048;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/seen-toggles", get(list_seen_toggles))
        .route("/metrics/seen-toggles", get(list_seen_toggles))
        .route("/metrics/feature-toggles", get(list_toggle_metrics))
        .route("/metrics/feature-toggles/{name}", get(get_toggle_metrics))
        .route("/applications", get(list_applications))
        .route("/metrics/applications", get(list_applications))
        .route(
            "/applications/{app}",
            get(get_application)
                .post(update_application)
                .delete(delete_application),
        )
        .route(
            "/metrics/applications/{app}",
            get(get_application)
                .post(update_application)
                .delete(delete_application),
        )
        .route("/seen-apps", get(list_seen_apps))
        .route("/metrics/seen-apps", get(list_seen_apps))
        .route("/metrics/config-versions", get(get_config_versions))
}

/// The ETag each poll query is answered with now.
pub async fn current_etags(snapshot: &Snapshot, queries: Vec<String>) -> HashMap<String, String> {
    let mut out = HashMap::with_capacity(queries.len());
    for query in queries {
        let filter = if query.is_empty() {
            Some(FeatureFilter::default())
        } else {
            FilterQuery::parse(&query)
                .ok()
                .and_then(|f| f.filter().ok())
        };
        let response = match filter {
            Some(filter) => match snapshot.client().response(&filter).await {
                Some(response) => response,
                None => continue,
            },
            None => no_match(),
        };
        if let Ok(etag) = response.etag.to_str() {
            out.insert(query, etag.to_string());
        }
    }
    out
}

async fn list_seen_toggles(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let view = state
        .metrics
        .usage
        .timed("usage_read", views::seen_toggles(state.usage.store()))
        .await?;
    Ok(Json(json!(view)))
}

async fn list_toggle_metrics(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let config = state.service.state()?;
    let view = state
        .metrics
        .usage
        .timed(
            "usage_read",
            views::toggle_metrics(state.usage.store(), &config),
        )
        .await?;
    Ok(Json(json!(view)))
}

async fn get_toggle_metrics(
    State(state): State<AppState>,
    AppPath(name): AppPath<String>,
) -> ApiResult<Json<Value>> {
    let view = state
        .metrics
        .usage
        .timed(
            "usage_read",
            views::toggle_detail(state.usage.store(), &name),
        )
        .await?;
    Ok(Json(json!(view)))
}

#[derive(Deserialize)]
struct ApplicationsQuery {
    #[serde(rename = "strategyName")]
    strategy_name: Option<String>,
}

async fn list_applications(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let query: ApplicationsQuery = serde_html_form::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request("", format!("Invalid query string: {e}")))?;
    let apps = state
        .metrics
        .usage
        .timed(
            "usage_read",
            views::applications(state.usage.store(), query.strategy_name.as_deref()),
        )
        .await?;
    Ok(Json(json!({"applications": apps})))
}

async fn get_application(
    State(state): State<AppState>,
    AppPath(app): AppPath<String>,
) -> ApiResult<Json<Value>> {
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
    let etags = current_etags(&state.snapshot, views::poll_queries(&instances)).await;
    Ok(Json(json!(views::application_details(
        record, instances, toggles, &etags
    ))))
}

/// `POST /api/admin/metrics/applications/:app`: what people say about an application.
#[derive(Deserialize)]
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

async fn update_application(
    State(usage): State<Arc<UsageRecorder>>,
    AppPath(app): AppPath<String>,
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

async fn delete_application(
    State(usage): State<Arc<UsageRecorder>>,
    AppPath(app): AppPath<String>,
) -> ApiResult<StatusCode> {
    usage.store().delete_application(&app).await?;
    Ok(StatusCode::OK)
}

async fn list_seen_apps(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let view = state
        .metrics
        .usage
        .timed("usage_read", views::seen_apps(state.usage.store()))
        .await?;
    Ok(Json(json!(view)))
}

#[derive(Deserialize)]
struct ConfigVersionsQuery {
    #[serde(rename = "staleAfterSeconds")]
    stale_after_seconds: Option<String>,
}

/// The configuration summary of every application, also used for the Prometheus gauges.
pub async fn config_versions(
    state: &AppState,
    stale_after_seconds: u64,
) -> Result<views::ConfigVersions, StoreError> {
    let apps = state
        .metrics
        .usage
        .timed("usage_read", views::all_instances(state.usage.store()))
        .await?;
    let etags = current_etags(
        &state.snapshot,
        views::poll_queries(apps.iter().flat_map(|(_, i)| i.iter())),
    )
    .await;
    Ok(views::config_versions(
        &apps,
        &etags,
        state.snapshot.state().version,
        (stale_after_seconds * 1000) as i64,
    ))
}

async fn get_config_versions(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    let query: ConfigVersionsQuery = serde_html_form::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request("", format!("Invalid query string: {e}")))?;
    let stale_after = match query.stale_after_seconds {
        None => DEFAULT_STALE_AFTER_SECONDS,
        Some(raw) => match raw.parse::<u64>() {
            Ok(n) if (1..=172_800).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(
                    "staleAfterSeconds",
                    "\"staleAfterSeconds\" must be a whole number from 1 to 172800",
                ))
            }
        },
    };
    Ok(Json(json!(config_versions(&state, stale_after).await?)))
}
