//! A stream lasts no longer than the store token it was opened with: deleting the token or
//! reaching its expiry ends the stream (with a reconnect hint, which then gets a 401).

use std::time::Duration;

use flagpole::config::{AuthMode, ClientAuth};
use reqwest::Method;
use serde_json::json;

use super::sse::Sse;
use super::{backends, WAIT};
use crate::auth::{create_token, settings, with_token, ADMIN_TOKEN};
use crate::common::TestApp;

/// Opens a stream with `token`, which must open, and reads its hydration.
async fn stream_with(app: &TestApp, token: &str) -> Sse {
    let request = app
        .anonymous(Method::GET, "/api/client/streaming")
        .header("Authorization", token);
    let mut stream = match Sse::open_request(request).await {
        Ok(stream) => stream,
        Err(reply) => panic!("stream refused: {} {:?}", reply.status, reply.json),
    };
    stream.next_event(WAIT).await.expect("hydration");
    stream
}

/// The comments of the stream's last frame, once it ends within `wait`.
async fn farewell(stream: &mut Sse, wait: Duration) -> Vec<String> {
    let mut last = None;
    while let Some(frame) = stream.next(wait).await {
        last = Some(frame);
    }
    last.expect("a last frame").comments
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ends_when_its_token_is_deleted_or_expires() {
    for backend in backends() {
        let mut settings = settings(&backend, AuthMode::Token, ClientAuth::Token);
        // Expiry is checked at each heartbeat.
        settings.streaming.streaming_heartbeat_ms = 200;
        let app = TestApp::spawn_with(settings).await;
        let deleted = create_token(&app, json!({"username": "a", "type": "client"})).await;
        let kept = create_token(&app, json!({"username": "c", "type": "client"})).await;
        let mut deleted_stream = stream_with(&app, &deleted).await;
        let mut kept_stream = stream_with(&app, &kept).await;
        // Long enough to open its stream on a loaded machine.
        let soon = (chrono::Utc::now() + chrono::Duration::seconds(4)).to_rfc3339();
        let expiring = create_token(
            &app,
            json!({"username": "b", "type": "client", "expiresAt": soon}),
        )
        .await;
        let mut expiring_stream = stream_with(&app, &expiring).await;

        with_token(
            &app,
            Method::DELETE,
            &format!("/api/admin/api-tokens/{deleted}"),
            Some(ADMIN_TOKEN),
            None,
        )
        .await
        .expect(200);
        assert_eq!(
            farewell(&mut deleted_stream, WAIT).await,
            ["token deleted or expired; reconnect"]
        );
        assert_eq!(
            farewell(&mut expiring_stream, Duration::from_secs(10)).await,
            ["token deleted or expired; reconnect"]
        );
        // The reconnection is refused; the other stream goes on.
        for token in [&deleted, &expiring] {
            let request = app
                .anonymous(Method::GET, "/api/client/streaming")
                .header("Authorization", token.as_str());
            let refused = Sse::open_request(request).await.err().expect("refused");
            refused.expect(401);
        }
        let beat = kept_stream
            .next(WAIT)
            .await
            .expect("the kept stream goes on");
        assert_eq!(beat.comments, ["keep-alive"]);
        app.stop().await;
    }
}
