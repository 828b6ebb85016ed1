//! Signing in and out. `none` and `insecure` modes: a name (as the API's insecure login);
//! `token` mode: an admin API token, checked as the API checks it, exchanged for the UI's
//! signed session cookie (the token itself is not kept in the browser).

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use crate::auth::Authenticator;
use crate::config::AuthMode;
use crate::domain::api_token::hash_secret;
use crate::state::AppState;
use crate::ui::form::{text_field, Errors};
use crate::ui::layout::{page, Section};
use crate::ui::session::{close_session, open_session, safe_next, Posted, SignInPost};

use super::see_other;

/// `?next=`: where to go once signed in.
#[derive(Deserialize, Default)]
pub struct Next {
    next: Option<String>,
}

/// The sign-in form's fields.
#[derive(Deserialize, Default)]
pub struct SignInForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: Option<String>,
}

fn render(
    status: StatusCode,
    auth: &Authenticator,
    form: &SignInForm,
    errors: &Errors,
) -> Response {
    let token_mode = auth.mode() == AuthMode::Token;
    page(
        status,
        "Sign in",
        None,
        Section::None,
        html! {
            (errors.summary())
            form method="post" action="/ui/sign-in" hx-boost="false" {
                @if let Some(next) = &form.next { input type="hidden" name="next" value=(next); }
                @if token_mode {
                    label for="f-token" { "Admin API token" }
                    input type="password" id="f-token" name="token" autocomplete="off"
                        aria-invalid=[errors.has("token").then_some("true")]
                        aria-describedby="f-token-error";
                    (errors.under("f-token", "token"))
                } @else {
                    (text_field("Your name", "name", &form.name, errors,
                        Some("Shown as who made each change in the event log.")))
                }
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// `GET /ui/sign-in`.
pub async fn form(State(state): State<AppState>, Query(next): Query<Next>) -> Response {
    let form = SignInForm {
        next: next.next,
        ..Default::default()
    };
    render(StatusCode::OK, &state.auth, &form, &Errors::default())
}

/// `POST /ui/sign-in`.
pub async fn submit(
    State(state): State<AppState>,
    SignInPost(form): SignInPost<SignInForm>,
) -> Response {
    let opened = if state.auth.mode() == AuthMode::Token {
        let hash = hash_secret(form.token.trim());
        match state.auth.admin_token_user(&hash) {
            Some(user) => Ok(open_session(&state, &user, Some(hash))),
            None => Err(Errors::field(
                "token",
                "This is not a valid admin token (client and frontend tokens cannot sign in).",
            )),
        }
    } else {
        let name = form.name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            Err(Errors::field(
                "name",
                "Enter a name of 1 to 100 characters.",
            ))
        } else {
            Ok(open_session(&state, name, None))
        }
    };
    match opened {
        Ok(cookie) => {
            let mut response = see_other(safe_next(form.next.as_deref()));
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(errors) => render(
            StatusCode::UNPROCESSABLE_ENTITY,
            &state.auth,
            &form,
            &errors,
        ),
    }
}

/// `POST /ui/sign-out`.
pub async fn sign_out(
    State(state): State<AppState>,
    _posted: Posted<serde::de::IgnoredAny>,
) -> Response {
    let mut response = see_other("/ui/sign-in");
    if let Ok(value) = HeaderValue::from_str(&close_session(&state)) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
