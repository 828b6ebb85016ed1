//! A client that stops reading altogether: once its stream is ended as a slow reader, the
//! server cannot even write the farewell; the write timeout closes the connection, so its
//! place under the stream cap is freed — on a connection of its own (served outside hyper)
//! and on one that carried another request first (served by hyper).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::sse::Sse;
use super::{create_big, WAIT};
use crate::common::{eventually, Backend, TestApp};

/// Reads one answer with a `content-length` from `tcp`.
async fn read_answer(tcp: &mut TcpStream) {
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length: "))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .expect("a content-length");
            if body.len() >= length {
                return;
            }
        }
        let n = tokio::time::timeout(WAIT, tcp.read(&mut chunk))
            .await
            .expect("an answer in time")
            .expect("read");
        assert!(n > 0, "the connection ended early");
        got.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_disconnected_after_the_write_timeout() {
    for asked_first in [false, true] {
        stalled_client_is_disconnected(asked_first).await;
    }
}

/// With `asked_first`, the stalled connection carries another request before its stream.
async fn stalled_client_is_disconnected(asked_first: bool) {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    // Enough frames queue up that the stream is ended only once the socket's buffers
    // (about 4 MiB here) are full and the server's writes wait for a reader.
    settings.streaming.streaming_queue_frames = 16;
    settings.streaming.streaming_max_connections = 1;
    settings.server.write_timeout_ms = 500;
    // The server notices the probes' closed connections when it next writes to them.
    settings.streaming.streaming_heartbeat_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    // 120 frames of `big` are more than the socket's buffers and the queue hold.
    create_big(&app).await;
    // A raw connection that asks for a stream and never reads a byte of it.
    let address = app.base.trim_start_matches("http://");
    let mut stalled = TcpStream::connect(address).await.expect("connect");
    if asked_first {
        stalled
            .write_all(b"GET /health/live HTTP/1.1\r\nHost: flagpole\r\n\r\n")
            .await
            .expect("request sent");
        read_answer(&mut stalled).await;
    }
    stalled
        .write_all(b"GET /api/client/streaming HTTP/1.1\r\nHost: flagpole\r\n\r\n")
        .await
        .expect("request sent");
    let held = eventually(WAIT, || async { Sse::open(&app, "", None).await.is_err() }).await;
    assert!(held, "the stalled stream never took the only place");
    for i in 0..120 {
        let state = if i % 2 == 0 { "off" } else { "on" };
        app.post_empty(&format!("/api/admin/features/big/toggle/{state}"))
            .await
            .expect(200);
    }
    let freed = eventually(Duration::from_secs(10), || async {
        Sse::open(&app, "", None).await.is_ok()
    })
    .await;
    assert!(
        freed,
        "a client that stopped reading kept its connection (asked first: {asked_first})"
    );
    drop(stalled);
    app.stop().await;
}
