//! Who uses the UI: a signed session cookie of its own (`flagpole-ui`), issued by the sign-in
//! page (a name in the `none` and `insecure` modes, an admin token in `token` mode), and the
//! guard on every state-changing form: a CSRF token tied to the session, and a refusal of
//! requests the browser marks as coming from another site or origin.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{Duration, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::auth::session::LIFETIME_SECS;
use crate::service::Actor;
use crate::state::AppState;

use super::problem::problem_page;

/// The UI session cookie's name (not the API's `flagpole-session`: the API honours that one
/// only in the insecure mode, the UI's works in every mode).
pub const COOKIE: &str = "flagpole-ui";
/// The hidden field carrying the CSRF token in every form.
pub const CSRF_FIELD: &str = "_csrf";
/// Largest form body the UI reads (a state import is pasted into a form).
const FORM_LIMIT: usize = 16 << 20;

/// What a session cookie says: who, and the admin token it was opened with (token mode).
#[derive(Serialize, Deserialize)]
struct Claims {
    /// The name events are recorded under.
    n: String,
    /// SHA-256 of the admin token signed in with, checked again on every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<String>,
}

/// A signed-in person.
pub struct Viewer {
    pub actor: Actor,
    /// The CSRF token of this session, for the forms of the page.
    pub csrf: String,
}

/// The `Set-Cookie` value opening a session for `name` (and the token's hash in token mode).
pub fn open_session(state: &AppState, name: &str, token_hash: Option<String>) -> String {
    let claims = Claims {
        n: name.to_string(),
        t: token_hash,
    };
    let user = serde_json::to_string(&claims).unwrap_or_default();
    let value = state
        .auth
        .sessions
        .issue(&user, Utc::now() + Duration::seconds(LIFETIME_SECS));
    format!(
        "{COOKIE}={value}; Path=/ui; HttpOnly; SameSite=Lax; Max-Age={LIFETIME_SECS}{}",
        secure(state)
    )
}

/// The `Set-Cookie` value ending the session.
pub fn close_session(state: &AppState) -> String {
    format!(
        "{COOKIE}=; Path=/ui; HttpOnly; SameSite=Lax; Max-Age=0{}",
        secure(state)
    )
}

fn secure(state: &AppState) -> &'static str {
    if state.auth.secure_cookies {
        "; Secure"
    } else {
        ""
    }
}

/// The value of the UI's cookie, if sent.
fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    crate::auth::cookie(headers, COOKIE)
}

/// The viewer of a request, if its session is valid.
fn viewer(state: &AppState, headers: &HeaderMap) -> Option<Viewer> {
    let value = cookie_value(headers)?;
    let user = state.auth.sessions.verify(value, Utc::now())?;
    let claims: Claims = serde_json::from_str(&user).ok()?;
    match &claims.t {
        // A deleted or expired token ends the sessions it opened.
        Some(hash) => {
            state.auth.admin_token_user(hash)?;
        }
        // A session opened by a name (another mode, with the same session secret) opens
        // nothing where tokens are required.
        None if state.auth.mode() == crate::config::AuthMode::Token => return None,
        None => {}
    }
    Some(Viewer {
        actor: Actor(claims.n),
        csrf: state.auth.sessions.tag(&format!("csrf {value}")),
    })
}

/// Whether the request has a valid session: `Some` with the hash of the admin token it was
/// opened with (token mode), `None` without a session.
pub fn session_token(state: &AppState, headers: &HeaderMap) -> Option<Option<String>> {
    viewer(state, headers)?;
    let value = cookie_value(headers)?;
    let user = state.auth.sessions.verify(value, Utc::now())?;
    let claims: Claims = serde_json::from_str(&user).ok()?;
    Some(claims.t)
}

/// Where to go back to after signing in: only a page of the UI (no open redirect).
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path) if path.starts_with("/ui/") && !path.starts_with("/ui//") => path,
        _ => "/ui/toggles",
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        viewer(state, &parts.headers).ok_or_else(|| {
            let here = parts
                .uri
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/ui/toggles");
            let next: String =
                url::form_urlencoded::byte_serialize(safe_next(Some(here)).as_bytes()).collect();
            Redirect::to(&format!("/ui/sign-in?next={next}")).into_response()
        })
    }
}

/// Whether the browser says the request comes from another site or origin (`Sec-Fetch-Site`,
/// else `Origin` against `Host`). `SameSite=Lax` alone lets another port of the same host post.
fn cross_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return !matches!(site, "same-origin" | "none");
    }
    let (Some(origin), Some(host)) = (
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
        headers.get(header::HOST).and_then(|v| v.to_str().ok()),
    ) else {
        return false;
    };
    let bare = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    bare != host
}

/// A state-changing form post: its viewer and fields, after the origin and CSRF checks.
pub struct Posted<T> {
    pub viewer: Viewer,
    pub form: T,
}

/// 403, as a page: what a refused cross-site or stale form gets.
fn refused(message: &str) -> Response {
    problem_page(StatusCode::FORBIDDEN, message)
}

impl<T: DeserializeOwned> FromRequest<AppState> for Posted<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        if cross_origin(&parts.headers) {
            return Err(refused(
                "This form was sent from another site or origin; nothing was changed.",
            ));
        }
        let viewer = Viewer::from_request_parts(&mut parts, state).await?;
        let bytes = axum::body::to_bytes(body, FORM_LIMIT)
            .await
            .map_err(|_| problem_page(StatusCode::PAYLOAD_TOO_LARGE, "The form is too large."))?;
        let sent = url::form_urlencoded::parse(&bytes)
            .find(|(key, _)| key == CSRF_FIELD)
            .map(|(_, value)| value.into_owned());
        if sent.as_deref() != Some(viewer.csrf.as_str()) {
            return Err(refused(
                "This form is out of date (its security token does not match your session); \
                 reload the page and try again. Nothing was changed.",
            ));
        }
        let form = serde_html_form::from_bytes(&bytes).map_err(|e| {
            problem_page(
                StatusCode::BAD_REQUEST,
                &format!("The form could not be read: {e}"),
            )
        })?;
        Ok(Posted { viewer, form })
    }
}

/// The sign-in form's post: no session yet, so only the origin check applies.
pub struct SignInPost<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for SignInPost<T> {
    type Rejection = Response;

    async fn from_request(req: Request, _state: &AppState) -> Result<Self, Response> {
        if cross_origin(req.headers()) {
            return Err(refused("This form was sent from another site or origin."));
        }
        let bytes = axum::body::to_bytes(req.into_body(), 64 << 10)
            .await
            .map_err(|_| problem_page(StatusCode::PAYLOAD_TOO_LARGE, "The form is too large."))?;
        serde_html_form::from_bytes(&bytes)
            .map(SignInPost)
            .map_err(|e| {
                problem_page(
                    StatusCode::BAD_REQUEST,
                    &format!("The form could not be read: {e}"),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn other_sites_and_origins_are_told_apart_from_this_one() {
        assert!(cross_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(cross_origin(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(!cross_origin(&headers(&[(
            "sec-fetch-site",
            "same-origin"
        )])));
        assert!(cross_origin(&headers(&[
            ("origin", "http://127.0.0.1:9999"),
            ("host", "127.0.0.1:4242")
        ])));
        assert!(!cross_origin(&headers(&[
            ("origin", "http://127.0.0.1:4242"),
            ("host", "127.0.0.1:4242")
        ])));
        assert!(!cross_origin(&headers(&[])));
    }

    #[test]
    fn only_pages_of_the_ui_are_returned_to() {
        assert_eq!(safe_next(Some("/ui/events?x=1")), "/ui/events?x=1");
        assert_eq!(safe_next(Some("//evil.example/ui/")), "/ui/toggles");
        assert_eq!(safe_next(Some("/ui//evil.example")), "/ui/toggles");
        assert_eq!(safe_next(Some("https://evil.example/ui/")), "/ui/toggles");
        assert_eq!(safe_next(None), "/ui/toggles");
    }
}
