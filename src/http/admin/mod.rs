//! The admin API. Every route requires an identified caller (see `extract::authenticate_admin`).

mod addons;
mod api_tokens;
mod archive;
mod context;
mod dependencies;
mod environments;
mod events;
mod feature_types;
mod features;
mod metrics;
mod playground;
mod project_features;
mod projects;
mod segments;
mod state;
mod strategies;
mod tag_types;
mod tags;
mod user;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// The admin API: every resource router, merged; a state import may be up to `import_limit`
/// bytes.
pub fn router(import_limit: usize) -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .merge(features::router())
        .merge(archive::router())
        .merge(tags::router())
        .merge(tag_types::router())
        .merge(strategies::router())
        .merge(events::router())
        .merge(feature_types::router())
        .merge(metrics::router())
        .merge(projects::router())
        .merge(environments::router())
        .merge(project_features::router())
        .merge(dependencies::router())
        .merge(context::router())
        .merge(state::router(import_limit))
        .merge(addons::router())
        .merge(api_tokens::router())
        .merge(user::router())
        .merge(segments::router())
        .merge(playground::router())
}

/// The admin routes that need no identity: login and logout.
pub fn open_router() -> OpenApiRouter<AppState> {
    user::open_router()
}

/// Admin operations the spec places outside `/api/admin` (its `PUT /api/projects/:id`,
/// `PUT /api/context/:name` and `POST /api/addons[/:id]`), with full paths.
pub fn spec_paths_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .merge(projects::spec_router())
        .merge(context::spec_router())
        .merge(addons::spec_router())
}
