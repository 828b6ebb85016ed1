//! The admin web UI: server-rendered pages (maud) over the same service layer and snapshot as
//! the admin API, progressively enhanced with htmx. Every form works without JavaScript
//! (POST, then a redirect to a GET); vendored assets are compiled in and served under
//! versioned URLs. See docs/ui.md.

mod assets;
mod form;
mod guard;
mod layout;
mod negotiate;
mod pages;
mod problem;
mod session;
mod toggle_query;

use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;

pub use toggle_query::{ListQuery, ToggleList};

/// The UI's routes: `/` for browsers, everything else under `/ui`; with the admin API's rate
/// limit and request time limit (`guard`).
pub fn router(app: &AppState) -> Router<AppState> {
    use pages::{
        addons, applications, archive, events, new_toggle, playground, settings, settings_edit,
        sign_in, state, strategy_edit, toggle, toggle_dependency, toggle_variants, toggles, tokens,
    };
    Router::new()
        .route("/", get(negotiate::index))
        .route("/ui", get(negotiate::home))
        .route("/ui/assets/{file}", get(assets::serve))
        .route("/ui/sign-in", get(sign_in::form).post(sign_in::submit))
        .route("/ui/sign-out", post(sign_in::sign_out))
        .route("/ui/toggles", get(toggles::list))
        .route("/ui/toggles/bulk", post(toggles::bulk))
        .route(
            "/ui/new-toggle",
            get(new_toggle::form).post(new_toggle::submit),
        )
        .route("/ui/new-toggle/name-check", get(new_toggle::name_check))
        .route("/ui/toggles/{name}", get(toggle::page_handler))
        .route(
            "/ui/toggles/{name}/environments/{env}",
            post(toggle::switch_handler),
        )
        .route(
            "/ui/toggles/{name}/environments/{env}/strategies",
            post(toggle::add_strategy),
        )
        .route(
            "/ui/toggles/{name}/environments/{env}/strategies/{id}",
            get(strategy_edit::form).post(strategy_edit::save),
        )
        .route(
            "/ui/toggles/{name}/environments/{env}/strategies/{id}/delete",
            post(toggle::delete_strategy),
        )
        .route(
            "/ui/toggles/{name}/dependency",
            post(toggle_dependency::set),
        )
        .route(
            "/ui/toggles/{name}/dependency/remove",
            post(toggle_dependency::remove),
        )
        .route(
            "/ui/toggles/{name}/variants",
            get(toggle_variants::form).post(toggle_variants::save),
        )
        .route("/ui/toggles/{name}/stale", post(toggle::stale))
        .route("/ui/toggles/{name}/archive", post(toggle::archive))
        .route("/ui/toggles/{name}/tags", post(toggle::add_tag))
        .route("/ui/toggles/{name}/tags/remove", post(toggle::remove_tag))
        .route("/ui/archive", get(archive::list))
        .route("/ui/archive/{name}/revive", post(archive::revive))
        .route("/ui/events", get(events::list))
        .route(
            "/ui/playground",
            get(playground::form).post(playground::run),
        )
        .route("/ui/tokens", get(tokens::list).post(tokens::create))
        .route("/ui/tokens/{id}/delete", post(tokens::delete))
        .route("/ui/state", get(state::form).post(state::submit))
        .route("/ui/addons", get(addons::list).post(addons::create))
        .route("/ui/addons/{id}", get(addons::detail))
        .route("/ui/addons/{id}/redeliver", post(addons::redeliver))
        .route(
            "/ui/addons/{id}/redeliver-dead",
            post(addons::redeliver_dead),
        )
        .route("/ui/settings", get(settings::list))
        .route(
            "/ui/settings/environments/{name}",
            post(settings::environment_enabled),
        )
        .route("/ui/settings/{kind}", post(settings::create))
        .route(
            "/ui/settings/{kind}/{key}",
            get(settings_edit::form).post(settings_edit::save),
        )
        .route(
            "/ui/settings/{kind}/{key}/delete",
            post(settings_edit::delete),
        )
        .route("/ui/applications", get(applications::list))
        .route("/ui/applications/{app}", get(applications::detail))
        .route("/ui/state/export", get(state::download))
        // The list's kept usage sums: this service's own (not a process-wide static).
        .layer(axum::Extension(std::sync::Arc::new(
            pages::sparkline::Sparklines::default(),
        )))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            guard::limits,
        ))
}
