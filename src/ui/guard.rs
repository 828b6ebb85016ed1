//! The admin API's limits on the UI's routes: a signed-in person's requests count against the
//! admin rate limit (by the admin token the session was opened with, else by address, as
//! `http::extract::authenticate_admin` counts API callers), and every request has the admin
//! request time limit. Both answer with a page (429 with `Retry-After`, 504).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::auth::rate_limit::LimitGroup;
use crate::state::AppState;

use super::problem::problem_page;
use super::session::session_token;

/// Whether a request to `path` counts against the admin rate limit: pages and form posts do;
/// the assets a page loads and the as-you-type name check (a request a keystroke) do not, or
/// a page and its typing would use up the limit (the session cookie is sent with both).
fn counted(path: &str) -> bool {
    !path.starts_with("/ui/assets/") && path != "/ui/new-toggle/name-check"
}

/// Middleware on every UI route.
pub async fn limits(State(state): State<AppState>, req: Request, next: Next) -> Response {
    // Requests of no session (the sign-in page, API clients asking for `/`) are not counted:
    // the admin API's open routes (login) are not either.
    if state.limiter.limits(LimitGroup::Admin) && counted(req.uri().path()) {
        if let Some(token_hash) = session_token(&state, req.headers()) {
            let checked = state
                .limiter
                .check_admin(token_hash.as_deref(), &req, state.trust_proxy);
            if let Err(wait) = checked {
                let mut response = problem_page(
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!(
                        "Too many requests: try again in {} s.",
                        wait.as_secs().max(1)
                    ),
                );
                if let Ok(value) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
                return response;
            }
        }
    }
    let limit = state.edge.request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        // A write may still complete or not as a whole: the page asks for a check.
        Err(_) => problem_page(
            StatusCode::GATEWAY_TIMEOUT,
            &format!(
                "The request took longer than {} ms; it may still complete. Check before trying again.",
                limit.as_millis()
            ),
        ),
    }
}
