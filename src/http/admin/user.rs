//! The caller: `POST /api/admin/login` (insecure mode: a session for an email, API-FACTS §9.1),
//! `GET /api/admin/user`, and `GET /logout`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use serde::Deserialize;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::session::{COOKIE, LIFETIME_SECS};
use crate::auth::Authenticator;
use crate::config::AuthMode;
use crate::domain::fields::{refuse_unsupported, ExtraFields};
use crate::domain::ValidationErrors;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::AppJson;
use crate::service::Actor;
use crate::state::AppState;

/// `GET /api/admin/user`, behind the admin authentication.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default().routes(routes!(current_user))
}

/// Login and logout, which need no identity.
pub fn open_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(login))
        .routes(routes!(logout))
}

/// The caller.
#[derive(Serialize, utoipa::ToSchema)]
struct User<'a> {
    username: &'a str,
    /// After a login: the email it was made with.
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<&'a str>,
}

/// `POST /api/admin/login`'s body.
#[derive(Deserialize, utoipa::ToSchema)]
struct Login {
    #[schema(required = true)]
    email: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    extra: ExtraFields,
}

/// Longest email accepted (RFC 5321's path limit).
const EMAIL_MAX: usize = 254;

/// Shows the caller.
#[utoipa::path(
    get,
    path = "/user",
    tag = "auth",
    responses((status = 200, description = "Who the caller is", body = User))
)]
async fn current_user(actor: Actor) -> Response {
    Json(User {
        username: &actor.0,
        email: None,
    })
    .into_response()
}

/// The `Set-Cookie` value of a session cookie with `value` that lasts `max_age` seconds.
fn session_cookie(auth: &Authenticator, value: &str, max_age: i64) -> ApiResult<HeaderValue> {
    let secure = if auth.secure_cookies { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"
    ))
    .map_err(|e| ApiError::Internal(format!("session cookie: {e}")))
}

/// Logs in by email (insecure mode): a session cookie.
#[utoipa::path(
    post,
    path = "/api/admin/login",
    tag = "auth",
    request_body = Login,
    responses(
        (status = 200, description = "Logged in: a session cookie (two days)", body = User,
            headers(("Set-Cookie" = String, description = "The session cookie"))),
        (status = 404, description = "Not in the insecure mode", body = ErrorBody),
    )
)]
async fn login(
    State(auth): State<Arc<Authenticator>>,
    AppJson(body): AppJson<Login>,
) -> ApiResult<Response> {
    if auth.mode() != AuthMode::Insecure {
        return Err(ApiError::NotFound(
            "Logging in by email is only offered with --auth insecure".into(),
        ));
    }
    let mut errors = ValidationErrors::default();
    refuse_unsupported(&body.extra, "", &[], &mut errors);
    let email = body.email.unwrap_or_default().trim().to_string();
    let plausible = email.len() <= EMAIL_MAX
        && email
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty())
        && !email
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == ';');
    if !plausible {
        errors.push("email", "\"email\" must be an email address");
    }
    errors.into_result(()).map_err(ApiError::from)?;
    let expires = Utc::now() + chrono::Duration::seconds(LIFETIME_SECS);
    let cookie = session_cookie(&auth, &auth.sessions.issue(&email, expires), LIFETIME_SECS)?;
    let user = User {
        username: &email,
        email: Some(&email),
    };
    let mut response = Json(user).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// Logs out: clears the session cookie.
#[utoipa::path(
    get,
    path = "/logout",
    tag = "auth",
    responses((status = 302, description = "The session cookie is cleared; redirected to `/`"))
)]
async fn logout(State(auth): State<Arc<Authenticator>>) -> ApiResult<Response> {
    let mut response = (StatusCode::FOUND, [(header::LOCATION, "/")]).into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session_cookie(&auth, "", 0)?);
    Ok(response)
}
