//! Backstage routes for operators and orchestrators: `/health`, the probes `/health/live` and
//! `/health/ready`, and `/internal-backstage/prometheus`. None needs credentials.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::FieldError;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::health::Readiness;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::telemetry::exposition;
use crate::usage::views;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(health))
        .routes(routes!(live))
        .routes(routes!(ready))
        .routes(routes!(prometheus))
}

/// The replica's health.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct Health {
    /// `GOOD` or `BAD`.
    health: &'static str,
    snapshot_loaded: bool,
    store_reachable: bool,
    /// The configuration version of the replica's snapshot.
    version: u64,
    /// The version the client API serves: behind `version` for at most one build.
    client_version: u64,
}

/// `GOOD` while the configuration is loaded and the store answered the last check; never
/// touches the store itself, so probes cannot overload it.
#[utoipa::path(
    get,
    path = "/health",
    tag = "service",
    responses(
        (status = 200, description = "Loaded and the store answered the last check", body = Health),
        (status = 500, description = "Not loaded yet, or the store did not answer", body = Health),
    )
)]
async fn health(State(snapshot): State<Arc<Snapshot>>) -> impl IntoResponse {
    let loaded = snapshot.is_ready();
    let reachable = snapshot.store_reachable();
    let body = Health {
        health: if loaded && reachable { "GOOD" } else { "BAD" },
        snapshot_loaded: loaded,
        store_reachable: reachable,
        version: snapshot.state().version,
        client_version: snapshot.client().settled_version(),
    };
    let status = if loaded && reachable {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (status, Json(body))
}

/// A probe's answer.
#[derive(Serialize, utoipa::ToSchema)]
struct ProbeStatus {
    /// `alive` or `ready`.
    status: &'static str,
}

/// Liveness: 200 while the process serves requests. Depends on nothing else (a store outage
/// must not get every replica restarted).
#[utoipa::path(
    get,
    path = "/health/live",
    tag = "service",
    responses((status = 200, description = "The process serves requests", body = ProbeStatus))
)]
async fn live() -> Json<ProbeStatus> {
    Json(ProbeStatus { status: "alive" })
}

/// Readiness: 200 once the configuration is loaded (and the start-up import applied) while
/// the store answers (within the grace period) and the replica is not shutting down; else 503
/// with the error body of `error.rs`, one detail per failing check.
#[utoipa::path(
    get,
    path = "/health/ready",
    tag = "service",
    responses(
        (status = 200, description = "Ready for traffic", body = ProbeStatus),
        (status = 503, description = "Not ready: `details` names each failing check (`snapshot`, `store`, `shutdown`)", body = ErrorBody),
    )
)]
async fn ready(State(readiness): State<Arc<Readiness>>) -> ApiResult<Json<ProbeStatus>> {
    let failing = readiness.check();
    if failing.is_empty() {
        return Ok(Json(ProbeStatus { status: "ready" }));
    }
    let message = format!(
        "not ready: {}",
        failing
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    );
    let details = failing
        .into_iter()
        .map(|f| FieldError {
            message: f.message,
            path: f.check.to_string(),
        })
        .collect();
    Err(ApiError::NotReady { message, details })
}

/// How long the configuration gauges of one scrape are reused (reading every instance from
/// the store per scrape would cost the store more than the gauges are worth).
const CONFIG_GAUGES_TTL: std::time::Duration = std::time::Duration::from_secs(15);

/// Prometheus metrics: the text format 0.0.4, or OpenMetrics when the scraper's `Accept` asks
/// for it (unauthenticated, like `/health`; keep it off the public ingress).
#[utoipa::path(
    get,
    path = "/internal-backstage/prometheus",
    tag = "service",
    responses((status = 200, description = "Prometheus text format 0.0.4, or OpenMetrics when `Accept` asks for it", content(
        (String = "text/plain"),
        (String = "application/openmetrics-text"),
    )))
)]
async fn prometheus(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    if state.usage.claim_gauge_refresh(CONFIG_GAUGES_TTL) {
        refresh_config_gauges(&state).await;
    }
    let text = state.metrics.render(&state.snapshot);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if exposition::wants_openmetrics(accept) {
        (
            [(header::CONTENT_TYPE, exposition::OPENMETRICS_CONTENT_TYPE)],
            text,
        )
    } else {
        (
            [(header::CONTENT_TYPE, exposition::TEXT_CONTENT_TYPE)],
            exposition::to_prometheus_text(&text),
        )
    }
}

/// Sets the configuration gauges (instances per application on the newest configuration,
/// behind it or not seen recently; the oldest version in use) from the summary the admin
/// API shows; on a store error they keep their values.
async fn refresh_config_gauges(state: &AppState) {
    let summary = views::current_config_versions(
        &state.usage,
        &state.snapshot,
        views::DEFAULT_STALE_AFTER_SECONDS,
    )
    .await;
    match summary {
        Ok(summary) => {
            let apps: Vec<(String, u64, u64, u64)> = summary
                .applications
                .iter()
                .map(|a| (a.app_name.clone(), a.current, a.behind, a.not_seen_recently))
                .collect();
            let oldest = summary
                .applications
                .iter()
                .filter_map(|a| a.oldest_version_in_use.as_ref().map(|o| o.version))
                .min();
            state.metrics.usage.set_instances(&apps, oldest);
        }
        Err(e) => tracing::debug!(error = %e, "configuration gauges not refreshed"),
    }
}
