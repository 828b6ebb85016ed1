//! The admin API. Every route requires an identified caller (see `extract::authenticate_admin`).

mod archive;
mod events;
mod feature_types;
mod features;
pub mod metrics;
mod strategies;
mod tag_types;
mod tags;

use axum::Router;

use crate::state::AppState;

/// The admin API: every resource router, merged.
pub fn router() -> Router<AppState> {
    Router::new()
        .merge(features::router())
        .merge(archive::router())
        .merge(tags::router())
        .merge(tag_types::router())
        .merge(strategies::router())
        .merge(events::router())
        .merge(feature_types::router())
        .merge(metrics::router())
}
