//! Tokens as Unleash 7 issues them (MODERN-MODEL §5): Unleash's body and secret shapes per
//! type, the environment a client or backend token is served (the 3.x API configures
//! `default` only, so another environment serves its toggles unconfigured: off, no
//! strategies), project scopes within an environment, an admin token's `?environment=`,
//! ETags and 304s per form, and frontend tokens refused off the frontend API.

use std::time::Duration;

use flagpole::config::{AuthMode, ClientAuth};
use reqwest::Method;
use serde_json::{json, Value};

use super::{create_token, settings, with_token, ADMIN_TOKEN};
use crate::common::{eventually, send, Backend, Reply, TestApp};
use crate::conformance;

conformance!(
    unleash_bodies_make_unleash_shaped_secrets,
    client_tokens_are_served_their_environment,
    an_environment_token_s_instances_hold_its_current_document,
    scoped_tokens_see_their_projects_in_their_environment,
    frontend_tokens_are_refused_on_the_client_and_admin_apis
);

fn token_mode(backend: &Backend) -> flagpole::config::Settings {
    settings(backend, AuthMode::Token, ClientAuth::Token)
}

/// Whether `secret` is `<scope>.<56 hex characters>`.
fn shaped(secret: &str, scope: &str) -> bool {
    secret
        .strip_prefix(scope)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|hex| hex.len() == 56 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

async fn admin_post(app: &TestApp, path: &str, body: Value) -> Reply {
    with_token(app, Method::POST, path, Some(ADMIN_TOKEN), Some(body)).await
}

/// `GET /api/client/features{query}` with `token`, once the documents are settled.
async fn poll(app: &TestApp, token: &str, query: &str, etag: Option<&str>) -> Reply {
    app.settle().await;
    let mut request = app
        .anonymous(Method::GET, &format!("/api/client/features{query}"))
        .header("Authorization", token);
    if let Some(etag) = etag {
        request = request.header("If-None-Match", etag);
    }
    send(request).await
}

/// The one toggle named `name` in a client document.
fn toggle<'a>(document: &'a Value, name: &str) -> &'a Value {
    document["features"]
        .as_array()
        .expect("features")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {document}"))
}

async fn unleash_bodies_make_unleash_shaped_secrets(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    admin_post(
        &app,
        "/api/admin/projects",
        json!({"id": "shop", "name": "Shop"}),
    )
    .await
    .expect(201);
    let cases = [
        (
            json!({"tokenName": "ops", "type": "admin"}),
            "*:*",
            "admin",
            "*",
        ),
        (
            json!({"tokenName": "api", "type": "client", "environment": "production", "project": "default"}),
            "default:production",
            "client",
            "production",
        ),
        (
            json!({"tokenName": "svc", "type": "BACKEND", "projects": ["shop", "default"]}),
            "[]:default",
            "backend",
            "default",
        ),
        (
            json!({"tokenName": "web", "type": "frontend", "environment": "development"}),
            "*:development",
            "frontend",
            "development",
        ),
        // Flagpole's first body still works, and now makes an Unleash-shaped secret too.
        (
            json!({"username": "old", "type": "client"}),
            "*:default",
            "client",
            "default",
        ),
    ];
    for (body, scope, kind, environment) in cases {
        let created = admin_post(&app, "/api/admin/api-tokens", body.clone())
            .await
            .expect(201)
            .json;
        let secret = created["secret"].as_str().expect("secret");
        assert!(shaped(secret, scope), "{body}: {secret}");
        assert_eq!(created["type"], kind, "{body}");
        assert_eq!(created["environment"], environment, "{body}");
        assert_eq!(created["tokenName"], created["username"], "{body}");
    }
    let listed = with_token(
        &app,
        Method::GET,
        "/api/admin/api-tokens",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200)
    .json;
    let api = listed["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .find(|t| t["tokenName"] == "api")
        .expect("listed");
    assert_eq!(api["project"], "default");
    assert_eq!(api["projects"], json!(["default"]));
    assert_eq!(api["environment"], "production");
    let masked = api["secret"].as_str().expect("masked");
    assert!(
        masked.starts_with("default:production.") && masked.ends_with('…'),
        "{masked}"
    );
    assert_eq!(masked.chars().count(), "default:production.".len() + 7);
    for (body, path) in [
        (
            json!({"tokenName": "x", "type": "client", "environment": "staging"}),
            "environment",
        ),
        (
            json!({"tokenName": "x", "type": "backend", "environment": "*"}),
            "environment",
        ),
        (
            json!({"tokenName": "x", "type": "admin", "environment": "production"}),
            "environment",
        ),
        (
            json!({"tokenName": "x", "type": "client", "project": "default", "projects": ["default"]}),
            "project",
        ),
        (json!({"type": "client"}), "tokenName"),
        (json!({"tokenName": "x", "type": "proxy"}), "type"),
    ] {
        let reply = admin_post(&app, "/api/admin/api-tokens", body.clone())
            .await
            .expect(400);
        assert_eq!(
            reply.json["details"][0]["path"], path,
            "{body}: {}",
            reply.json
        );
    }
}

async fn client_tokens_are_served_their_environment(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    admin_post(
        &app,
        "/api/admin/features",
        json!({"name": "checkout", "enabled": true, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let default = create_token(&app, json!({"tokenName": "d", "type": "client"})).await;
    let production = create_token(
        &app,
        json!({"tokenName": "p", "type": "backend", "environment": "production"}),
    )
    .await;
    // What the 3.x API wrote is `default`'s.
    let served = poll(&app, &default, "", None).await.expect(200);
    let on = toggle(&served.json, "checkout");
    assert_eq!(on["enabled"], true);
    assert_eq!(on["strategies"][0]["name"], "default");
    let default_etag = served.header("etag").expect("etag");
    // `production` holds no configuration for it: off, no strategies.
    let served = poll(&app, &production, "", None).await.expect(200);
    let off = toggle(&served.json, "checkout");
    assert_eq!(off["enabled"], false);
    assert_eq!(off["strategies"], json!([]));
    let production_etag = served.header("etag").expect("etag");
    assert_ne!(production_etag, default_etag);
    // ETags per form: each form's own gives a 304, the other's a 200.
    poll(&app, &production, "", Some(&production_etag))
        .await
        .expect(304);
    poll(&app, &production, "", Some(&default_etag))
        .await
        .expect(200);
    poll(&app, &default, "", Some(&default_etag))
        .await
        .expect(304);
    // A client token's environment is its own, whatever the query asks.
    let asked = poll(&app, &production, "?environment=default", None)
        .await
        .expect(200);
    assert_eq!(toggle(&asked.json, "checkout")["enabled"], false);
    // An admin token picks one with `?environment=`, `default` without.
    let admin = poll(&app, ADMIN_TOKEN, "?environment=production", None)
        .await
        .expect(200);
    assert_eq!(admin.header("etag"), Some(production_etag.clone()));
    let admin = poll(&app, ADMIN_TOKEN, "", None).await.expect(200);
    assert_eq!(admin.header("etag"), Some(default_etag.clone()));
    // An environment the registry does not hold: every toggle off, as Unleash serves it.
    let unknown = poll(&app, ADMIN_TOKEN, "?environment=nowhere", None)
        .await
        .expect(200);
    assert_eq!(toggle(&unknown.json, "checkout")["enabled"], false);
    // One toggle, in the token's environment.
    let one = with_token(
        &app,
        Method::GET,
        "/api/client/features/checkout",
        Some(&production),
        None,
    )
    .await
    .expect(200);
    assert_eq!(one.json["enabled"], false);
    let one = with_token(
        &app,
        Method::GET,
        "/api/client/features/checkout",
        Some(&default),
        None,
    )
    .await
    .expect(200);
    assert_eq!(one.json["enabled"], true);
    // Without segments, every `Unleash-Client-Spec` (or none, or garbage) is one document.
    for spec in ["4.2.0", "3.0.0", "v5", "nonsense"] {
        app.settle().await;
        let reply = send(
            app.anonymous(Method::GET, "/api/client/features")
                .header("Authorization", default.as_str())
                .header("Unleash-Client-Spec", spec),
        )
        .await
        .expect(200);
        assert_eq!(reply.header("etag"), Some(default_etag.clone()), "{spec}");
    }
    // A write is served in every environment's document once it is answered.
    admin_post(
        &app,
        "/api/admin/features",
        json!({"name": "search", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let served = send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("Authorization", production.as_str()),
    )
    .await
    .expect(200);
    assert_eq!(toggle(&served.json, "search")["enabled"], false);
}

/// Polls of an environment token (the first makes its form, the next are answered from the
/// built document at once) are recorded under that environment's document, so its instances
/// count as holding the current configuration, not as behind `default`'s.
async fn an_environment_token_s_instances_hold_its_current_document(backend: &Backend) {
    let mut settings = token_mode(backend);
    settings.usage.metrics_flush_interval_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    admin_post(
        &app,
        "/api/admin/features",
        json!({"name": "checkout", "enabled": true, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let production = create_token(
        &app,
        json!({"tokenName": "p", "type": "client", "environment": "production"}),
    )
    .await;
    for _ in 0..3 {
        app.settle().await;
        send(
            app.anonymous(Method::GET, "/api/client/features")
                .header("Authorization", production.as_str())
                .header("UNLEASH-APPNAME", "shop")
                .header("UNLEASH-INSTANCEID", "i-1"),
        )
        .await
        .expect(200);
    }
    let shop = || async {
        let versions = with_token(
            &app,
            Method::GET,
            "/api/admin/metrics/config-versions",
            Some(ADMIN_TOKEN),
            None,
        )
        .await
        .expect(200)
        .json;
        versions["applications"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["appName"] == "shop")
            .cloned()
            .unwrap_or(Value::Null)
    };
    let recorded = eventually(Duration::from_secs(10), || async {
        shop().await["instances"] == 1
    })
    .await;
    assert!(recorded, "the polls were not recorded: {}", shop().await);
    let shop = shop().await;
    assert_eq!(
        (&shop["current"], &shop["behind"]),
        (&json!(1), &json!(0)),
        "{shop}"
    );
}

async fn scoped_tokens_see_their_projects_in_their_environment(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    admin_post(
        &app,
        "/api/admin/projects",
        json!({"id": "shop", "name": "Shop"}),
    )
    .await
    .expect(201);
    for (name, project) in [("in-shop", "shop"), ("in-default", "default")] {
        admin_post(
            &app,
            "/api/admin/features",
            json!({"name": name, "project": project, "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(200);
    }
    let shop = create_token(
        &app,
        json!({"tokenName": "s", "type": "client", "project": "shop", "environment": "development"}),
    )
    .await;
    let served = poll(&app, &shop, "", None).await.expect(200);
    let names: Vec<&str> = served.json["features"]
        .as_array()
        .expect("features")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["in-shop"]);
    assert_eq!(toggle(&served.json, "in-shop")["enabled"], false);
    let etag = served.header("etag").expect("etag");
    poll(&app, &shop, "", Some(&etag)).await.expect(304);
    with_token(
        &app,
        Method::GET,
        "/api/client/features/in-default",
        Some(&shop),
        None,
    )
    .await
    .expect(404);
}

async fn frontend_tokens_are_refused_on_the_client_and_admin_apis(backend: &Backend) {
    let app = TestApp::spawn_with(token_mode(backend)).await;
    let frontend = create_token(&app, json!({"tokenName": "web", "type": "frontend"})).await;
    let message = "invalid token: expected a different token type for this endpoint";
    for path in ["/api/client/features", "/api/client/features/x"] {
        let reply = with_token(&app, Method::GET, path, Some(&frontend), None)
            .await
            .expect(403);
        assert_eq!(reply.error_message(), message, "{path}");
    }
    let reply = with_token(
        &app,
        Method::GET,
        "/api/admin/features",
        Some(&frontend),
        None,
    )
    .await
    .expect(403);
    assert_eq!(reply.error_message(), message);
}
