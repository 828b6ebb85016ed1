//! Index documents (`/api`, `/api/admin`, `/api/client`), `/health` and
//! `/internal-backstage/prometheus`.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::snapshot::Snapshot;
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api", get(api_index))
        .route("/api/admin", get(admin_index))
        .route("/api/client", get(client_index))
        .route("/health", get(health))
        .route("/internal-backstage/prometheus", get(prometheus))
}

fn admin_links() -> Value {
    json!({
        "feature-toggles": {"uri": "/api/admin/features"},
        "feature-archive": {"uri": "/api/admin/archive/features"},
        "strategies": {"uri": "/api/admin/strategies"},
        "events": {"uri": "/api/admin/events"},
        "feature-types": {"uri": "/api/admin/feature-types"},
        "tags": {"uri": "/api/admin/tags"},
        "tag-types": {"uri": "/api/admin/tag-types"},
    })
}

fn client_links() -> Value {
    json!({
        "feature-toggles": {"uri": "/api/client/features"},
    })
}

async fn api_index() -> Json<Value> {
    Json(json!({
        "name": "flagpole",
        "version": env!("CARGO_PKG_VERSION"),
        "uri": "/api",
        "links": {
            "admin": {"uri": "/api/admin", "links": admin_links()},
            "client": {"uri": "/api/client", "links": client_links()},
        },
    }))
}

async fn admin_index() -> Json<Value> {
    Json(json!({"version": 3, "links": admin_links()}))
}

async fn client_index() -> Json<Value> {
    Json(json!({"version": 3, "links": client_links()}))
}

/// `GOOD` while the configuration is loaded and the store answered the last check; never
/// touches the store itself, so probes cannot overload it.
async fn health(
    axum::extract::State(snapshot): axum::extract::State<Arc<Snapshot>>,
) -> impl IntoResponse {
    let loaded = snapshot.is_ready();
    let reachable = snapshot.store_reachable();
    let body = json!({
        "health": if loaded && reachable { "GOOD" } else { "BAD" },
        "snapshotLoaded": loaded,
        "storeReachable": reachable,
        "version": snapshot.state().version,
    });
    let status = if loaded && reachable {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (status, Json(body))
}

/// Prometheus metrics in the OpenMetrics text format (unauthenticated, like `/health`; keep it
/// off the public ingress).
async fn prometheus(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(&state.snapshot),
    )
}
