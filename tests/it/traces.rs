//! OpenTelemetry traces from the real binary to an OTLP/HTTP (JSON) receiver on loopback: the
//! request spans and their attributes, a caller's `traceparent` continued, store commits under
//! their request, loads, refreshes and flushes, and a delivery linked to the write it comes
//! from; the client API is not traced.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::common::receiver::{free_port, Receiver};
use crate::common::{Backend, TestApp};

/// Spans received, as OTLP JSON `resourceSpans` documents.
type Exports = Arc<Mutex<Vec<Value>>>;

/// An OTLP/HTTP receiver; its base URL.
async fn otlp_receiver(exports: Exports) -> String {
    async fn collect(State(exports): State<Exports>, Json(body): Json<Value>) -> Json<Value> {
        if let Ok(mut all) = exports.lock() {
            all.push(body);
        }
        Json(json!({}))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind OTLP receiver");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let app = Router::new()
        .route("/v1/traces", post(collect))
        .with_state(exports);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

/// One received span: name, ids, attributes (values as text), links and resource.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: HashMap<String, String>,
    links: Vec<(String, String)>,
    service: String,
}

fn text(value: &Value) -> String {
    let inner = value
        .as_object()
        .and_then(|o| o.values().next())
        .unwrap_or(value);
    match inner {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn attributes(list: &Value) -> HashMap<String, String> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            (
                kv["key"].as_str().unwrap_or("").to_string(),
                text(&kv["value"]),
            )
        })
        .collect()
}

fn spans(exports: &Exports) -> Vec<Span> {
    let exports = exports.lock().expect("exports").clone();
    let mut out = Vec::new();
    for export in exports {
        for resource in export["resourceSpans"].as_array().into_iter().flatten() {
            let service = attributes(&resource["resource"]["attributes"])
                .remove("service.name")
                .unwrap_or_default();
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    out.push(Span {
                        name: span["name"].as_str().unwrap_or("").to_string(),
                        trace_id: span["traceId"].as_str().unwrap_or("").to_string(),
                        span_id: span["spanId"].as_str().unwrap_or("").to_string(),
                        parent_span_id: span["parentSpanId"].as_str().unwrap_or("").to_string(),
                        attributes: attributes(&span["attributes"]),
                        links: span["links"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|l| {
                                (
                                    l["traceId"].as_str().unwrap_or("").to_string(),
                                    l["spanId"].as_str().unwrap_or("").to_string(),
                                )
                            })
                            .collect(),
                        service: service.clone(),
                    });
                }
            }
        }
    }
    out
}

async fn wait_healthy(base: &str) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(r) = http.get(format!("{base}/health")).send().await {
            if r.status() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "binary did not become healthy");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn stop(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            assert!(exit.success(), "exit status {exit}");
            return;
        }
        assert!(Instant::now() < deadline, "binary did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_receiver_with_their_parents_and_links() {
    let exports: Exports = Arc::default();
    let otlp = otlp_receiver(exports.clone()).await;
    let webhook = Receiver::start().await;
    let backend = Backend::redis();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("OTEL_SERVICE_NAME", "flagpole-under-test")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("FLAGPOLE_SHUTDOWN_DRAIN_MS", "0")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--redis-url", &backend.redis_server().url()])
        .args(["--key-prefix", "test"])
        .args(["--metrics-flush-interval-ms", "200"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn flagpole");
    wait_healthy(&base).await;
    let http = reqwest::Client::new();

    let addon = http
        .post(format!("{base}/api/admin/addons"))
        .basic_auth("ops", Some(""))
        .json(
            &json!({"provider": "webhook", "events": ["feature-created"],
            "parameters": {"url": webhook.url("/hook")}}),
        )
        .send()
        .await
        .expect("create addon");
    assert_eq!(addon.status(), 201);
    let created = http
        .post(format!("{base}/api/admin/features"))
        .basic_auth("ops", Some(""))
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"name": "traced", "strategies": [{"name": "default"}]}))
        .send()
        .await
        .expect("create toggle");
    assert_eq!(created.status(), 200);
    assert!(
        webhook.wait_accepted(1, Duration::from_secs(10)).await,
        "the webhook was not delivered"
    );
    let polled = http
        .get(format!("{base}/api/client/features"))
        .send()
        .await
        .expect("poll");
    assert_eq!(polled.status(), 200);
    let reported = http
        .post(format!("{base}/api/client/metrics"))
        .json(
            &json!({"appName": "traced-app", "instanceId": "i-1", "bucket": {
            "start": "2026-11-24T10:00:00Z", "stop": "2026-11-24T10:01:00Z",
            "toggles": {"traced": {"yes": 3, "no": 1}}}}),
        )
        .send()
        .await
        .expect("report");
    assert_eq!(reported.status(), 202);
    // A write through another replica reaches this one as a snapshot refresh.
    let other = TestApp::spawn(&backend).await;
    other.create_toggle("from-elsewhere").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !spans(&exports).iter().any(|s| s.name == "snapshot.refresh")
        || !spans(&exports).iter().any(|s| s.name == "usage.flush")
    {
        assert!(
            Instant::now() < deadline,
            "no refresh or flush span: {:?}",
            spans(&exports).iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    other.stop().await;
    // A graceful stop exports what is still buffered.
    stop(&mut child);
    let spans = spans(&exports);

    let request = spans
        .iter()
        .find(|s| s.name == "POST /api/admin/features")
        .unwrap_or_else(|| panic!("no request span: {spans:#?}"));
    assert_eq!(request.service, "flagpole-under-test");
    assert_eq!(request.trace_id, CALLER_TRACE, "traceparent not continued");
    assert_eq!(request.parent_span_id, CALLER_SPAN);
    assert_eq!(request.attributes["http.route"], "/api/admin/features");
    assert_eq!(request.attributes["http.request.method"], "POST");
    assert_eq!(request.attributes["http.response.status_code"], "200");

    let commit = spans
        .iter()
        .find(|s| s.name == "store.commit" && s.parent_span_id == request.span_id)
        .unwrap_or_else(|| panic!("no commit span under the request: {spans:#?}"));
    assert_eq!(commit.trace_id, CALLER_TRACE);
    assert_eq!(commit.attributes["outcome"], "committed");

    let delivery = spans
        .iter()
        .find(|s| s.name == "delivery.attempt")
        .unwrap_or_else(|| panic!("no delivery span: {spans:#?}"));
    assert_eq!(delivery.attributes["outcome"], "delivered");
    assert!(
        delivery
            .links
            .contains(&(CALLER_TRACE.to_string(), request.span_id.clone())),
        "the delivery is not linked to its write: {delivery:?}"
    );
    assert_ne!(
        delivery.trace_id, CALLER_TRACE,
        "a delivery has a trace of its own"
    );

    assert!(spans.iter().any(|s| s.name == "store.load"));
    assert!(
        !spans.iter().any(|s| s
            .attributes
            .get("http.route")
            .is_some_and(|r| r.starts_with("/health"))),
        "probes are traced"
    );
    assert!(
        !spans.iter().any(|s| s
            .attributes
            .get("http.route")
            .is_some_and(|r| r.starts_with("/api/client"))),
        "the client API is traced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_of_client_requests_is_traced_when_asked() {
    let exports: Exports = Arc::default();
    let otlp = otlp_receiver(exports.clone()).await;
    let data = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("FLAGPOLE_SHUTDOWN_DRAIN_MS", "0")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(data.path())
        .args(["--trace-client-one-in", "4"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn flagpole");
    wait_healthy(&base).await;
    let http = reqwest::Client::new();
    for _ in 0..8 {
        let polled = http
            .get(format!("{base}/api/client/features"))
            .send()
            .await
            .expect("poll");
        assert_eq!(polled.status(), 200);
    }
    stop(&mut child);
    let client: Vec<Span> = spans(&exports)
        .into_iter()
        .filter(|s| {
            s.attributes.get("http.route").map(String::as_str) == Some("/api/client/features")
        })
        .collect();
    assert_eq!(client.len(), 2, "one poll in four: {client:#?}");
    assert!(client.iter().all(|s| s.name == "GET /api/client/features"
        && s.attributes["http.response.status_code"] == "200"));
    // The service's own name when OTEL_SERVICE_NAME is not set.
    assert!(client.iter().all(|s| s.service == "flagpole"));
}

#[test]
fn an_unsupported_otlp_protocol_stops_the_binary_with_a_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .expect("run flagpole");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        "{stderr}"
    );
}
