//! API tokens: shown once, stored as SHA-256 only, listed masked, events with the secret
//! masked, `createdBy` from the token; validation; expiry; revocation on every replica;
//! client tokens scoped to projects.

use std::time::Duration;

use flagpole::config::{AuthMode, ClientAuth};
use reqwest::Method;
use serde_json::json;

use super::{client_token, create_token, settings, with_token, ADMIN_TOKEN};
use crate::common::{eventually, Backend, TestApp};
use crate::conformance;

conformance!(
    tokens_are_shown_once_listed_masked_and_revocable,
    token_requests_are_validated,
    expired_tokens_are_refused,
    client_tokens_scoped_to_projects_see_only_theirs
);

fn token_mode(backend: &Backend) -> flagpole::config::Settings {
    settings(backend, AuthMode::Token, ClientAuth::Token)
}

async fn tokens_are_shown_once_listed_masked_and_revocable(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    let created = with_token(
        &app,
        Method::POST,
        "/api/admin/api-tokens",
        Some(ADMIN_TOKEN),
        Some(json!({"username": "ci-bot", "type": "admin"})),
    )
    .await
    .expect(201)
    .json;
    let secret = created["secret"].as_str().expect("secret").to_string();
    // Unleash's shape: `*:*.` and 28 random bytes in hex.
    let random = secret.strip_prefix("*:*.").expect("an admin token's shape");
    assert_eq!(random.len(), 56);
    assert!(random.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(created["username"], "ci-bot");
    assert_eq!(created["type"], "admin");
    let listed = with_token(
        &app,
        Method::GET,
        "/api/admin/api-tokens",
        Some(&secret),
        None,
    )
    .await
    .expect(200)
    .json;
    let shown = listed["tokens"][0]["secret"].as_str().expect("masked");
    assert_eq!(shown, format!("{}…", &secret[..10]));
    // A token whose secret was lost is revoked by its listed id.
    let lost = create_token(&app, json!({"username": "lost", "type": "client"})).await;
    let listed = with_token(
        &app,
        Method::GET,
        "/api/admin/api-tokens",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .json;
    let id = listed["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .find(|t| t["username"] == "lost")
        .and_then(|t| t["id"].as_str())
        .expect("id")
        .to_string();
    assert_eq!(id.len(), 16);
    // Used before it is revoked, so that the replica remembers it as checked.
    for _ in 0..2 {
        with_token(&app, Method::GET, "/api/client/features", Some(&lost), None)
            .await
            .expect(200);
    }
    with_token(
        &app,
        Method::DELETE,
        &format!("/api/admin/api-tokens/{id}"),
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200);
    with_token(&app, Method::GET, "/api/client/features", Some(&lost), None)
        .await
        .expect(401);

    // The new token acts as its username.
    with_token(
        &app,
        Method::POST,
        "/api/admin/features",
        Some(&format!("Bearer {secret}")),
        Some(json!({"name": "by-bot", "strategies": [{"name": "default"}]})),
    )
    .await
    .expect(200);
    let events = with_token(
        &app,
        Method::GET,
        "/api/admin/events",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200)
    .json;
    let events = events["events"].as_array().expect("events").clone();
    let created_event = events
        .iter()
        .find(|e| e["type"] == "feature-created")
        .expect("feature-created");
    assert_eq!(created_event["createdBy"], "ci-bot");
    let token_event = events
        .iter()
        .find(|e| e["type"] == "api-token-created")
        .expect("api-token-created");
    assert_eq!(token_event["createdBy"], "admin-token");
    assert!(!token_event.to_string().contains(&secret), "{token_event}");

    // A new expiry, then revocation.
    let later = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let updated = with_token(
        &app,
        Method::PUT,
        &format!("/api/admin/api-tokens/{secret}"),
        Some(ADMIN_TOKEN),
        Some(json!({"expiresAt": later})),
    )
    .await
    .expect(200)
    .json;
    assert!(updated["expiresAt"].is_string());
    with_token(
        &app,
        Method::DELETE,
        &format!("/api/admin/api-tokens/{secret}"),
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200);
    with_token(
        &app,
        Method::GET,
        "/api/admin/features",
        Some(&secret),
        None,
    )
    .await
    .expect(401);
    with_token(
        &app,
        Method::DELETE,
        &format!("/api/admin/api-tokens/{secret}"),
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(404);
    let events = with_token(
        &app,
        Method::GET,
        "/api/admin/events",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .json
    .to_string();
    assert!(events.contains("api-token-updated") && events.contains("api-token-deleted"));
    assert!(!events.contains(&secret));
}

async fn token_requests_are_validated(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    for (body, path) in [
        (json!({"type": "client"}), "tokenName"),
        (json!({"username": "x", "type": "root"}), "type"),
        (json!({"username": "x"}), "type"),
        (
            json!({"username": "x", "type": "client", "projects": ["nope"]}),
            "projects[0]",
        ),
        (
            json!({"username": "x", "type": "admin", "projects": ["default"]}),
            "projects",
        ),
        (
            json!({"username": "x", "type": "client", "expiresAt": "2001-01-01T00:00:00Z"}),
            "expiresAt",
        ),
        (
            json!({"username": "x", "type": "client", "colour": "red"}),
            "colour",
        ),
    ] {
        let reply = with_token(
            &app,
            Method::POST,
            "/api/admin/api-tokens",
            Some(ADMIN_TOKEN),
            Some(body.clone()),
        )
        .await
        .expect(400);
        reply.error_message();
        assert_eq!(reply.json["details"][0]["path"], path, "{body}");
    }
    with_token(
        &app,
        Method::PUT,
        "/api/admin/api-tokens/unknown",
        Some(ADMIN_TOKEN),
        Some(json!({"expiresAt": null})),
    )
    .await
    .expect(404);
    let tokens = with_token(
        &app,
        Method::GET,
        "/api/admin/api-tokens",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .json;
    assert_eq!(tokens["tokens"], json!([]), "nothing half-written");
}

async fn expired_tokens_are_refused(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let secret = create_token(
        &app,
        json!({"username": "brief", "type": "client", "expiresAt": soon}),
    )
    .await;
    with_token(
        &app,
        Method::GET,
        "/api/client/features",
        Some(&secret),
        None,
    )
    .await
    .expect(200);
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let refused = with_token(
        &app,
        Method::GET,
        "/api/client/features",
        Some(&secret),
        None,
    )
    .await
    .expect(401);
    assert!(refused.error_message().contains("expired"));
    with_token(
        &app,
        Method::PUT,
        &format!("/api/admin/api-tokens/{secret}"),
        Some(ADMIN_TOKEN),
        Some(json!({"expiresAt": "2001-01-01T00:00:00Z"})),
    )
    .await
    .expect(400);
    // Cleared, it works again.
    with_token(
        &app,
        Method::PUT,
        &format!("/api/admin/api-tokens/{secret}"),
        Some(ADMIN_TOKEN),
        Some(json!({"expiresAt": null})),
    )
    .await
    .expect(200);
    with_token(
        &app,
        Method::GET,
        "/api/client/features",
        Some(&secret),
        None,
    )
    .await
    .expect(200);
}

async fn client_tokens_scoped_to_projects_see_only_theirs(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    let admin = Some(ADMIN_TOKEN);
    with_token(
        &app,
        Method::POST,
        "/api/admin/projects",
        admin,
        Some(json!({"id": "shop", "name": "Shop"})),
    )
    .await
    .expect(201);
    for (name, project) in [("in-shop", "shop"), ("in-default", "default")] {
        with_token(
            &app,
            Method::POST,
            "/api/admin/features",
            admin,
            Some(json!({"name": name, "project": project, "strategies": [{"name": "default"}]})),
        )
        .await
        .expect(200);
    }
    let scoped = create_token(
        &app,
        json!({"username": "shop-sdk", "type": "client", "projects": ["shop"]}),
    )
    .await;
    let everything = client_token(&app).await;
    app.settle().await;
    let names = |reply: &crate::common::Reply| -> Vec<String> {
        reply.json["features"]
            .as_array()
            .expect("features")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_string())
            .collect()
    };
    let seen = with_token(
        &app,
        Method::GET,
        "/api/client/features",
        Some(&scoped),
        None,
    )
    .await
    .expect(200);
    assert_eq!(names(&seen), ["in-shop"]);
    let all = with_token(
        &app,
        Method::GET,
        "/api/client/features",
        Some(&everything),
        None,
    )
    .await
    .expect(200);
    assert_eq!(names(&all), ["in-default", "in-shop"]);
    assert_ne!(
        seen.header("etag"),
        all.header("etag"),
        "the scope is in the ETag"
    );
    let outside = with_token(
        &app,
        Method::GET,
        "/api/client/features?project=default",
        Some(&scoped),
        None,
    )
    .await
    .expect(200);
    assert_eq!(names(&outside), Vec::<String>::new());
    with_token(
        &app,
        Method::GET,
        "/api/client/features/in-default",
        Some(&scoped),
        None,
    )
    .await
    .expect(404);
    with_token(
        &app,
        Method::GET,
        "/api/client/features/in-shop",
        Some(&scoped),
        None,
    )
    .await
    .expect(200);
    // A scoped 304 works like any other.
    let etag = seen.header("etag").expect("etag");
    let again = crate::common::send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("Authorization", &scoped)
            .header("If-None-Match", &etag),
    )
    .await;
    assert_eq!(again.status.as_u16(), 304);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_reaches_every_replica_within_a_second() {
    let backend = Backend::redis();
    let a = TestApp::spawn_with(token_mode(&backend)).await;
    let b = TestApp::spawn_with(token_mode(&backend)).await;
    let secret = client_token(&a).await;
    let known = eventually(Duration::from_secs(1), || async {
        with_token(&b, Method::GET, "/api/client/features", Some(&secret), None)
            .await
            .status
            == 200
    })
    .await;
    assert!(
        known,
        "a new token works on the other replica within a second"
    );
    with_token(
        &a,
        Method::DELETE,
        &format!("/api/admin/api-tokens/{secret}"),
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200);
    let revoked = eventually(Duration::from_secs(1), || async {
        with_token(&b, Method::GET, "/api/client/features", Some(&secret), None)
            .await
            .status
            == 401
    })
    .await;
    assert!(revoked, "revoked on the other replica within a second");
    // Only the SHA-256 of the secret is stored.
    let stored = backend
        .redis_server()
        .cli_output(&["HGETALL", "{test}:api_tokens"]);
    let dump = backend
        .redis_server()
        .cli_output(&["XRANGE", "{test}:events", "-", "+"]);
    assert!(!stored.contains(&secret) && !dump.contains(&secret));
}
