//! Authentication: the modes × route groups matrix (401 versus 403), API tokens (lifecycle,
//! expiry, revocation across replicas, project scopes), insecure-mode sessions, and no secret
//! in any log line.

mod environments;
mod hardening;
mod logs;
mod matrix;
mod rate_limits;
mod sessions;
mod tokens;

use flagpole::config::{AuthMode, ClientAuth, SecretString, Settings};
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{send, Backend, Reply, TestApp};

/// The bootstrap admin token of these tests.
pub const ADMIN_TOKEN: &str = "test-admin-token-0001";

/// Settings in `mode`, with the bootstrap admin token.
pub fn settings(backend: &Backend, mode: AuthMode, client_auth: ClientAuth) -> Settings {
    let mut settings = backend.settings();
    settings.auth.mode = mode;
    settings.auth.client_auth = client_auth;
    settings.auth.admin_token = Some(SecretString(ADMIN_TOKEN.into()));
    settings
}

/// A request with `Authorization: <token>` (none when `None`).
pub async fn with_token(
    app: &TestApp,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Reply {
    let mut request = app.anonymous(method, path);
    if let Some(token) = token {
        request = request.header("Authorization", token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    send(request).await
}

/// Creates a token with `body` using the bootstrap admin token; returns its secret.
pub async fn create_token(app: &TestApp, body: Value) -> String {
    let reply = with_token(
        app,
        Method::POST,
        "/api/admin/api-tokens",
        Some(ADMIN_TOKEN),
        Some(body),
    )
    .await
    .expect(201);
    reply.json["secret"].as_str().expect("secret").to_string()
}

/// A client token for every project.
pub async fn client_token(app: &TestApp) -> String {
    create_token(app, json!({"username": "sdk", "type": "client"})).await
}
