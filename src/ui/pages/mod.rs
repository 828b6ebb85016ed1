//! The UI's pages, one module per page or group of pages.

pub mod addons;
pub mod applications;
pub mod archive;
mod constraint_form;
pub mod events;
pub mod new_toggle;
pub mod playground;
pub mod settings;
pub mod settings_edit;
pub mod sign_in;
pub(super) mod sparkline;
pub mod state;
pub mod strategy_edit;
mod strategy_form;
pub mod toggle;
pub mod toggle_dependency;
mod toggle_usage;
pub mod toggle_variants;
pub mod toggles;
pub mod tokens;

use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};

/// The answer to a form post that worked: back to a page (POST-redirect-GET), with a notice
/// that the next page shows once (`flash` in the query string).
pub fn see_other(to: &str) -> Response {
    let mut response = Redirect::to(to).into_response();
    // Not kept by browsers: the page after a write must be fetched again.
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// `path` with `?notice=…` (or `&notice=…`) added.
pub fn with_notice(path: &str, notice: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(notice.as_bytes()).collect();
    let glue = if path.contains('?') { '&' } else { '?' };
    format!("{path}{glue}notice={encoded}")
}

/// A toggle name as a path segment (names allow `!*'()` which paths keep as they are; the
/// rest of their characters are unreserved).
pub fn segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The page of the toggle `name`.
pub fn toggle_path(name: &str) -> String {
    format!("/ui/toggles/{}", segment(name))
}
