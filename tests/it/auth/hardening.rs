//! The edge's protections: security headers on admin responses, body limits (413 with the JSON
//! body), the admin time limit (503), CORS only for the configured origins.

use reqwest::Method;
use serde_json::json;

use crate::common::{send, without_auth, Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_responses_carry_security_headers_and_bodies_are_bounded() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.server.admin_body_limit_kib = 4;
    let app = TestApp::spawn_with(settings).await;
    let listed = app.get("/api/admin/features").await.expect(200);
    for (name, value) in [
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
    ] {
        assert_eq!(listed.header(name).as_deref(), Some(value), "{name}");
    }
    assert!(listed.header("content-security-policy").is_some());
    let refused = app.get("/api/admin/nothing-here").await.expect(404);
    assert_eq!(refused.header("x-frame-options").as_deref(), Some("DENY"));
    let client = app.client_features("", None).await.expect(200);
    assert_eq!(
        client.header("x-frame-options"),
        None,
        "the hot path stays bare"
    );

    let big = "x".repeat(5 * 1024);
    let too_large = app
        .post(
            "/api/admin/features",
            json!({"name": "big", "description": big, "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(413);
    too_large.error_message();
    // The state import keeps its own, larger limit.
    let toggles: Vec<_> = (0..100)
        .map(|i| json!({"name": format!("t{i}"), "description": "y".repeat(100), "strategies": [{"name": "default"}]}))
        .collect();
    app.post("/api/admin/state/import", json!({"features": toggles}))
        .await
        .expect(202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_admin_request_gets_a_504() {
    let backend = Backend::embedded();
    let mut settings = without_auth(backend.settings());
    settings.server.request_timeout_ms = 100;
    let app = TestApp::spawn_with(settings).await;
    let toggles: Vec<_> = (0..4000)
        .map(|i| json!({"name": format!("slow-{i}"), "strategies": [{"name": "default"}]}))
        .collect();
    let reply = app
        .post("/api/admin/state/import", json!({"features": toggles}))
        .await
        .expect(504);
    assert_eq!(
        reply.header("retry-after"),
        None,
        "a write may still complete"
    );
    assert!(reply.error_message().contains("longer than 100 ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_only_the_configured_origins() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.server.cors_origin = vec!["https://ui.example.com".parse().expect("origin")];
    let app = TestApp::spawn_with(settings).await;
    let preflight = |origin: &'static str| {
        send(
            app.anonymous(Method::OPTIONS, "/api/client/features")
                .header("Origin", origin)
                .header("Access-Control-Request-Method", "GET")
                .header("Access-Control-Request-Headers", "authorization"),
        )
    };
    let allowed = preflight("https://ui.example.com").await;
    assert_eq!(
        allowed.header("access-control-allow-origin").as_deref(),
        Some("https://ui.example.com")
    );
    let other = preflight("https://evil.example.com").await;
    assert_eq!(other.header("access-control-allow-origin"), None);
    // What SDKs poll gets the header too (it is then routed, not answered before routing).
    let polled = send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("Origin", "https://ui.example.com"),
    )
    .await
    .expect(200);
    assert_eq!(
        polled.header("access-control-allow-origin").as_deref(),
        Some("https://ui.example.com")
    );
    let plain = TestApp::spawn(&Backend::embedded()).await;
    let none = send(
        plain
            .anonymous(Method::GET, "/api/client/features")
            .header("Origin", "https://ui.example.com"),
    )
    .await;
    assert_eq!(
        none.header("access-control-allow-origin"),
        None,
        "off by default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_body_that_never_arrives_gets_a_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.server.request_timeout_ms = 300;
    let app = TestApp::spawn_with(settings).await;
    let address = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    // Promises 100 bytes, sends 10, then waits.
    stream
        .write_all(
            b"POST /api/client/metrics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"appName\"",
        )
        .await
        .expect("write");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    )
    .await;
    assert!(read.is_ok(), "the server hung up in time");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("did not arrive within 300 ms"), "{text}");
}
