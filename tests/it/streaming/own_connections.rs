//! Streams asked for by a connection's first request are served outside hyper, on the
//! connection alone (`http::client::StreamsFirst`): the same answers, chunked, with
//! `connection: close`.

use flagpole::config::{AuthMode, ClientAuth};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{backends, create_on, WAIT};
use crate::common::TestApp;

/// Sends `head` on a new connection and reads what comes back until `enough` says so, the
/// connection ends, or `WAIT` passes.
async fn exchange(app: &TestApp, head: &str, enough: impl Fn(&str) -> bool) -> String {
    let address = app.base.trim_start_matches("http://");
    let mut tcp = TcpStream::connect(address).await.expect("connect");
    tcp.write_all(head.as_bytes()).await.expect("request sent");
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + WAIT;
    while !enough(&String::from_utf8_lossy(&got)) {
        match tokio::time::timeout_at(deadline, tcp.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The head and (still chunked) body of an answer.
fn split(answer: &str) -> (&str, &str) {
    answer.split_once("\r\n\r\n").expect("a head and a body")
}

/// The data of a body of one chunk.
fn dechunk(body: &str) -> &str {
    let (_, rest) = body.split_once("\r\n").expect("a chunk size");
    rest.split_once("\r\n").expect("a chunk").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_asking_for_a_stream_is_served_on_its_own() {
    for backend in backends() {
        let app = TestApp::spawn(&backend).await;
        create_on(&app, "streamed").await;
        let answer = exchange(
            &app,
            "GET /api/client/streaming?namePrefix=str HTTP/1.1\r\nHost: flagpole\r\nAccept: text/event-stream\r\n\r\n",
            |got| got.contains("\n\n") && got.contains("data: "),
        )
        .await;
        let (head, body) = split(&answer);
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        // hyper keeps a connection open after a stream; served on its own, it is closed.
        assert!(head.contains("connection: close"), "{head}");
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        let (size, body) = body.split_once("\r\n").expect("a chunk");
        assert!(
            usize::from_str_radix(size, 16).is_ok_and(|n| n > 0),
            "{size}"
        );
        assert!(body.starts_with("event: unleash-connected\nid: "), "{body}");
        let data = body
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .expect("data");
        let data: Value = serde_json::from_str(data).expect("JSON");
        assert_eq!(data["events"][0]["type"], "hydration");
        assert_eq!(data["events"][0]["features"][0]["name"], "streamed");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_malformed_heads_get_json_errors_on_their_own_connection() {
    let backend = crate::common::Backend::embedded();
    let settings = crate::auth::settings(&backend, AuthMode::Token, ClientAuth::Token);
    let app = TestApp::spawn_with(settings).await;
    let ended = |got: &str| got.ends_with("\r\n0\r\n\r\n");
    // No token: the handler's 401, as hyper would have sent it.
    let answer = exchange(
        &app,
        "GET /api/client/streaming HTTP/1.1\r\nHost: flagpole\r\n\r\n",
        ended,
    )
    .await;
    let (head, body) = split(&answer);
    assert!(head.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{head}");
    let body: Value = serde_json::from_str(dechunk(body)).expect("a JSON body");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    // A header value that is not one, from an HTTP/1.1 and an HTTP/1.0 client: the head
    // could not be read, so the answer is one every version reads (no chunks; the body ends
    // with the connection).
    for version in ["1.1", "1.0"] {
        let answer = exchange(
            &app,
            &format!(
                "GET /api/client/streaming HTTP/{version}\r\nHost: flag pole\r\nBad Header: x\r\n\r\n"
            ),
            |got| got.ends_with('}'),
        )
        .await;
        let (head, body) = split(&answer);
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(
            !head.to_ascii_lowercase().contains("transfer-encoding"),
            "{head}"
        );
        assert!(
            head.to_ascii_lowercase().contains("connection: close"),
            "{head}"
        );
        let body: Value = serde_json::from_str(body).expect("a JSON body");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("Malformed")),
            "{body}"
        );
    }
    // A head far over the limit, sent in one go: a 431 with its JSON body. (The bytes the
    // server did not read are drained before closing, so that the close is not a reset that
    // could overtake the answer on a real network; on loopback the answer wins either way, so
    // this does not show the drain.)
    let huge = format!(
        "GET /api/client/streaming HTTP/1.1\r\nHost: flagpole\r\nX-Filler: {}\r\n\r\n",
        "x".repeat(200 * 1024)
    );
    let answer = exchange(&app, &huge, |got| got.ends_with('}')).await;
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{answer}"
    );
    let (_, body) = split(&answer);
    let body: Value = serde_json::from_str(body).expect("a JSON body");
    assert!(
        body["message"].as_str().is_some_and(|m| m.contains("KiB")),
        "{body}"
    );
    // Other requests on new connections are hyper's, as ever.
    let answer = exchange(
        &app,
        "GET /api/client/streamingx HTTP/1.1\r\nHost: flagpole\r\n\r\n",
        |got| got.ends_with('}'),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("connection: close"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_shutdown_a_stream_on_its_own_connection_gets_its_farewell() {
    let backend = crate::common::Backend::embedded();
    let mut settings = backend.settings();
    settings.server.shutdown_drain_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    let address = app.base.trim_start_matches("http://").to_string();
    let mut tcp = TcpStream::connect(address).await.expect("connect");
    tcp.write_all(b"GET /api/client/streaming HTTP/1.1\r\nHost: flagpole\r\n\r\n")
        .await
        .expect("request sent");
    let mut chunk = [0u8; 4096];
    let n = tokio::time::timeout(WAIT, tcp.read(&mut chunk))
        .await
        .expect("an answer in time")
        .expect("read");
    assert!(String::from_utf8_lossy(&chunk[..n]).starts_with("HTTP/1.1 200 OK"));
    let stopping = tokio::spawn(app.stop());
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut rest))
        .await
        .expect("the stream ended")
        .expect("read");
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains(": shutting down; reconnect\n"), "{rest}");
    assert!(rest.ends_with("\r\n0\r\n\r\n"), "{rest}");
    tokio::time::timeout(WAIT, stopping)
        .await
        .expect("the replica stopped")
        .expect("stop task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_closes_its_own_connection_frees_its_place_at_once() {
    let backend = crate::common::Backend::embedded();
    let mut settings = backend.settings();
    settings.streaming.streaming_max_connections = 1;
    // No write would reveal the closed connection before the test gives up.
    settings.streaming.streaming_heartbeat_ms = 60_000;
    let app = TestApp::spawn_with(settings).await;
    let address = app.base.trim_start_matches("http://").to_string();
    let mut tcp = TcpStream::connect(address).await.expect("connect");
    tcp.write_all(b"GET /api/client/streaming HTTP/1.1\r\nHost: flagpole\r\n\r\n")
        .await
        .expect("request sent");
    let mut chunk = [0u8; 4096];
    tokio::time::timeout(WAIT, tcp.read(&mut chunk))
        .await
        .expect("an answer in time")
        .expect("read");
    drop(tcp);
    let freed = crate::common::eventually(WAIT, || async {
        super::sse::Sse::open(&app, "", None).await.is_ok()
    })
    .await;
    assert!(freed, "the closed stream still holds the only place");
    app.stop().await;
}
