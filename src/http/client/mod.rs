//! The client API: what SDKs poll.

mod features;

use axum::routing::get;
use axum::Router;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/features", get(features::list_client_features))
        .route("/features/{name}", get(features::get_client_feature))
}
