//! Every mode × route group × credential: who gets in, who gets 401 (not identified) and who
//! gets 403 (identified, not allowed).

use flagpole::config::{AuthMode, ClientAuth};
use reqwest::Method;
use serde_json::{json, Value};

use super::{client_token, settings, with_token, ADMIN_TOKEN};
use crate::common::{Backend, TestApp};

/// What a caller presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Credential {
    Nothing,
    UnknownToken,
    ClientToken,
    AdminToken,
    BasicAuth,
}

const CREDENTIALS: [Credential; 5] = [
    Credential::Nothing,
    Credential::UnknownToken,
    Credential::ClientToken,
    Credential::AdminToken,
    Credential::BasicAuth,
];

/// Which part of the API a route belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Admin,
    Client,
    Open,
}

/// One route of each group (and of each router: admin, the spec's admin paths, tokens,
/// client features and usage, operations).
fn routes() -> Vec<(Group, Method, &'static str, Option<Value>)> {
    vec![
        (Group::Admin, Method::GET, "/api/admin/features", None),
        (
            Group::Admin,
            Method::POST,
            "/api/admin/features/validate",
            Some(json!({"name": "free-name"})),
        ),
        (Group::Admin, Method::GET, "/api/admin/api-tokens", None),
        (Group::Admin, Method::GET, "/api/admin/state/export", None),
        (Group::Admin, Method::GET, "/api/admin/user", None),
        (
            Group::Admin,
            Method::PUT,
            "/api/projects/default",
            Some(json!({"name": "Default"})),
        ),
        (Group::Client, Method::GET, "/api/client/features", None),
        (
            Group::Client,
            Method::POST,
            "/api/client/register",
            Some(
                json!({"appName": "m", "instanceId": "i", "strategies": [], "started": "2026-11-23T00:00:00Z", "interval": 10000}),
            ),
        ),
        (
            Group::Client,
            Method::POST,
            "/api/client/metrics",
            Some(
                json!({"appName": "m", "instanceId": "i", "bucket": {"start": "2026-11-23T00:00:00Z", "stop": "2026-11-23T00:01:00Z", "toggles": {}}}),
            ),
        ),
        (Group::Open, Method::GET, "/health", None),
        (Group::Open, Method::GET, "/api", None),
        (
            Group::Open,
            Method::GET,
            "/internal-backstage/prometheus",
            None,
        ),
    ]
}

/// The status class a credential gets on a group in a mode: 2 (in), 401 or 403.
fn expected(mode: AuthMode, client_auth: ClientAuth, group: Group, who: Credential) -> u16 {
    use Credential::*;
    match (group, mode) {
        (Group::Open, _) | (Group::Admin, AuthMode::None) => 2,
        (Group::Client, AuthMode::Token) if client_auth == ClientAuth::Token => match who {
            ClientToken | AdminToken => 2,
            _ => 401,
        },
        (Group::Client, _) => 2,
        (Group::Admin, AuthMode::Insecure) => match who {
            AdminToken | BasicAuth => 2,
            ClientToken => 403,
            Nothing | UnknownToken => 401,
        },
        (Group::Admin, AuthMode::Token) => match who {
            AdminToken => 2,
            ClientToken => 403,
            Nothing | UnknownToken | BasicAuth => 401,
        },
    }
}

async fn check_mode(backend: &Backend, mode: AuthMode, client_auth: ClientAuth) {
    let app = TestApp::spawn_with(settings(backend, mode, client_auth)).await;
    let client = client_token(&app).await;
    for (group, method, path, body) in routes() {
        for who in CREDENTIALS {
            let mut request = app.anonymous(method.clone(), path);
            request = match who {
                Credential::Nothing => request,
                Credential::UnknownToken => request.header("Authorization", "not-a-known-token"),
                Credential::ClientToken => request.header("Authorization", client.as_str()),
                Credential::AdminToken => request.bearer_auth(ADMIN_TOKEN),
                Credential::BasicAuth => request.basic_auth("ann", Some("")),
            };
            if let Some(body) = &body {
                request = request.json(body);
            }
            let reply = crate::common::send(request).await;
            let status = reply.status.as_u16();
            let want = expected(mode, client_auth, group, who);
            let got = if status < 300 { 2 } else { status };
            assert_eq!(
                got,
                want,
                "{mode:?}/{client_auth:?} {method} {path} as {who:?}: {status} {}",
                String::from_utf8_lossy(&reply.bytes)
            );
            if status == 401 {
                let message = reply.error_message();
                let kind = if mode == AuthMode::Insecure && group == Group::Admin {
                    "unsecure"
                } else {
                    "token"
                };
                assert_eq!(reply.json["type"], kind, "{message}");
                assert!(reply.header("www-authenticate").is_some());
            }
            if status == 403 {
                reply.error_message();
            }
        }
    }
    // A token is sent raw or as Bearer, never taken from basic auth's password.
    let raw = with_token(
        &app,
        Method::GET,
        "/api/admin/features",
        Some(ADMIN_TOKEN),
        None,
    )
    .await;
    let hidden = crate::common::send(
        app.anonymous(Method::GET, "/api/admin/features")
            .basic_auth("x", Some(ADMIN_TOKEN)),
    )
    .await;
    if mode == AuthMode::Token {
        raw.expect(200);
        hidden.expect(401);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_and_route_group_redis() {
    let backend = Backend::redis();
    for (mode, client_auth) in [
        (AuthMode::Token, ClientAuth::Token),
        (AuthMode::Token, ClientAuth::Open),
        (AuthMode::Insecure, ClientAuth::Token),
        (AuthMode::None, ClientAuth::Token),
    ] {
        check_mode(&backend, mode, client_auth).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_and_route_group_embedded() {
    for (mode, client_auth) in [
        (AuthMode::Token, ClientAuth::Token),
        (AuthMode::Token, ClientAuth::Open),
        (AuthMode::Insecure, ClientAuth::Token),
        (AuthMode::None, ClientAuth::Token),
    ] {
        // One store per mode: the embedded file is locked by one replica at a time.
        check_mode(&Backend::embedded(), mode, client_auth).await;
    }
}
