//! Index documents, health, authentication and the error contract of the HTTP edge.

use reqwest::Method;
use serde_json::json;

use crate::common::{send, Backend, TestApp};
use crate::conformance;

conformance!(
    index_documents_and_health,
    admin_requires_identity,
    error_contract,
    lenient_content_types
);

async fn index_documents_and_health(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let api = send(app.anonymous(Method::GET, "/api"))
        .await
        .expect(200)
        .json;
    assert_eq!(api["links"]["admin"]["uri"], "/api/admin");
    assert_eq!(
        api["links"]["client"]["links"]["feature-toggles"]["uri"],
        "/api/client/features"
    );
    let admin = app.get("/api/admin").await.expect(200).json;
    assert_eq!(
        admin["links"]["feature-toggles"]["uri"],
        "/api/admin/features"
    );
    let client = send(app.anonymous(Method::GET, "/api/client"))
        .await
        .expect(200)
        .json;
    assert_eq!(client["version"], 3);
    let health = send(app.anonymous(Method::GET, "/health"))
        .await
        .expect(200)
        .json;
    assert_eq!(health["health"], "GOOD");
}

async fn admin_requires_identity(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for (method, path) in [
        (Method::GET, "/api/admin/features"),
        (Method::POST, "/api/admin/features"),
        (Method::GET, "/api/admin/events"),
        (Method::DELETE, "/api/admin/features/x"),
    ] {
        let reply = send(app.anonymous(method, path)).await.expect(401);
        assert!(reply.error_message().contains("identify"));
        assert!(reply
            .header("www-authenticate")
            .expect("challenge")
            .starts_with("Basic"));
    }
    // An empty username is no identity.
    send(
        app.anonymous(Method::GET, "/api/admin/features")
            .basic_auth("", Some("pw")),
    )
    .await
    .expect(401);
    // Client endpoints need no credentials, with either header family.
    send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("SERVICE-APPNAME", "a")
            .header("SERVICE-INSTANCEID", "1"),
    )
    .await
    .expect(200);
    send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("UNLEASH-APPNAME", "a")
            .header("UNLEASH-INSTANCEID", "1"),
    )
    .await
    .expect(200);
}

async fn error_contract(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let reply = send(app.anonymous(Method::GET, "/no/such/route"))
        .await
        .expect(404);
    assert!(reply.error_message().contains("/no/such/route"));
    assert!(reply
        .header("content-type")
        .expect("type")
        .starts_with("application/json"));
    app.admin(Method::PATCH, "/api/admin/features")
        .send()
        .await
        .expect("sent");
    let reply = send(app.admin(Method::PATCH, "/api/admin/features"))
        .await
        .expect(405);
    reply.error_message();

    let malformed = send(
        app.admin(Method::POST, "/api/admin/features")
            .header("content-type", "application/json")
            .body("{\"name\": \"x\""),
    )
    .await
    .expect(400);
    assert!(malformed.error_message().contains("not valid JSON"));
    let trailing = send(
        app.admin(Method::POST, "/api/admin/features")
            .header("content-type", "application/json")
            .body("{\"name\": \"abc\", \"strategies\": [{\"name\": \"default\"}]} trailing"),
    )
    .await
    .expect(400);
    trailing.error_message();
    let missing = send(app.admin(Method::POST, "/api/admin/features"))
        .await
        .expect(400);
    assert!(missing.error_message().contains("required"));
    let wrong_shape = send(
        app.admin(Method::POST, "/api/admin/features")
            .json(&json!([1, 2])),
    )
    .await
    .expect(400);
    wrong_shape.error_message();
    let not_json = send(
        app.admin(Method::POST, "/api/admin/features")
            .header("content-type", "text/plain")
            .body("name=x"),
    )
    .await
    .expect(415);
    not_json.error_message();
    // Nothing was half-written by any of the above.
    assert_eq!(
        app.get("/api/admin/features").await.json["features"],
        json!([])
    );
}

async fn lenient_content_types(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    send(
        app.admin(Method::POST, "/api/admin/features/")
            .header("content-type", "application/json; charset=utf-8")
            .body(r#"{"name": "charset", "strategies": [{"name": "default"}]}"#),
    )
    .await
    .expect(200);
    // curl -d sends application/x-www-form-urlencoded; a JSON document is still accepted.
    send(
        app.admin(Method::POST, "/api/admin/features")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(r#"{"name": "curl", "strategies": [{"name": "default"}]}"#),
    )
    .await
    .expect(200);
    // Bodyless POSTs need no Content-Type.
    send(app.admin(Method::POST, "/api/admin/features/charset/toggle/on"))
        .await
        .expect(200);
    send(
        app.admin(Method::POST, "/api/admin/features/charset/toggle/off")
            .header("content-type", "application/json"),
    )
    .await
    .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_paths_get_a_json_400() {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    app.get("/api/admin/features/%FF%FE")
        .await
        .expect(400)
        .error_message();
    send(app.anonymous(Method::GET, "/api/client/features/%FF"))
        .await
        .expect(400)
        .error_message();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_on_client_routes_get_a_json_405() {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    send(app.anonymous(Method::POST, "/api/client/features"))
        .await
        .expect(405)
        .error_message();
    send(
        app.anonymous(Method::DELETE, "/api/admin/features/x")
            .basic_auth("a", Some("")),
    )
    .await
    .expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_metrics_are_exposed() {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    app.create_toggle("metered").await;
    let etag = app
        .client_features("", None)
        .await
        .expect(200)
        .header("etag")
        .expect("etag");
    app.client_features("", Some(&etag)).await.expect(304);
    app.get("/api/admin/features/metered").await.expect(200);
    let reply = send(app.anonymous(Method::GET, "/internal-backstage/prometheus"))
        .await
        .expect(200);
    // The Prometheus text format unless the scraper asks for OpenMetrics.
    assert_eq!(
        reply.header("content-type").expect("type"),
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = String::from_utf8(reply.bytes).expect("utf-8");
    for expected in [
        "flagpole_client_features_responses_total{response=\"200\"} 1",
        "flagpole_client_features_responses_total{response=\"304\"} 1",
        "flagpole_active_toggles 1",
        "flagpole_ready 1",
        "flagpole_store_reachable 1",
        "http_route=\"/api/admin/features/{name}\",http_response_status_code=\"200\"",
    ] {
        assert!(text.contains(expected), "missing {expected} in\n{text}");
    }
    assert!(!text.contains("/health"), "probes are not recorded");
}
