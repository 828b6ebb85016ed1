//! `/api/admin/feature-types`: the read-only list of toggle types (API-FACTS §4.1).

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::domain::feature_type::FEATURE_TYPES;
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/feature-types", get(list_feature_types))
}

async fn list_feature_types() -> Json<Value> {
    Json(json!({"version": 1, "types": FEATURE_TYPES}))
}
