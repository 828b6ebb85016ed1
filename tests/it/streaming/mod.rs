//! `GET /api/client/streaming` and `GET /api/client/delta` over real HTTP, on both stores:
//! hydration, updates, resumption from `Last-Event-ID` (on another replica after a kill, with
//! Redis), the hydration cases, heartbeats, the connection cap, slow readers, lifetimes and
//! the drain at shutdown.

mod own_connections;
mod sdks;
mod sse;
mod stalled;
mod tokens;

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::common::{eventually, send, Backend, TestApp};
use sse::{delta, Sse};

const WAIT: Duration = Duration::from_secs(5);

/// Creates toggle `name`, switched on (toggles are created off).
async fn create_on(app: &TestApp, name: &str) {
    app.create_toggle(name).await;
    app.post_empty(&format!("/api/admin/features/{name}/toggle/on"))
        .await
        .expect(200);
}

/// Creates toggle `big`, whose frames are about 90 KB (a constraint of many long values), so
/// that a reader that stops reading fills the socket's buffers quickly.
async fn create_big(app: &TestApp) {
    let values: Vec<String> = (0..1000).map(|i| format!("{i:0>90}")).collect();
    app.post(
        "/api/admin/features",
        json!({"name": "big", "strategies": [{"name": "default",
            "constraints": [{"contextName": "userId", "operator": "IN", "values": values}]}]}),
    )
    .await
    .expect(200);
}

fn backends() -> [Backend; 2] {
    [Backend::redis(), Backend::embedded()]
}

/// The names of the toggles of the frame's hydration.
fn hydrated_names(frame: &sse::Frame) -> Vec<String> {
    let events = frame.events();
    assert_eq!(frame.types(), ["hydration"], "{:?}", frame.data);
    events[0]["features"]
        .as_array()
        .expect("features")
        .iter()
        .map(|f| f["name"].as_str().expect("name").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_hydrates_then_carries_each_change() {
    for backend in backends() {
        let app = TestApp::spawn(&backend).await;
        create_on(&app, "streamed").await;
        let mut stream = Sse::connect(&app, None).await;
        let first = stream.next_event(WAIT).await.expect("first event");
        assert_eq!(first.event.as_deref(), Some("unleash-connected"));
        assert_eq!(hydrated_names(&first), ["streamed"]);
        let id = first.id.expect("id");
        assert_eq!(first.events()[0]["eventId"], id);
        assert!(first.events()[0]["segments"].is_array());

        app.post_empty("/api/admin/features/streamed/toggle/off")
            .await
            .expect(200);
        let update = stream.next_event(WAIT).await.expect("update");
        assert_eq!(update.event.as_deref(), Some("unleash-updated"));
        assert_eq!(update.types(), ["feature-updated"]);
        let event = &update.events()[0];
        assert_eq!(event["feature"]["name"], "streamed");
        assert_eq!(event["feature"]["enabled"], false);
        let next_id = update.id.expect("id");
        assert!(next_id > id && event["eventId"] == next_id);

        // Archived: removed from the stream.
        app.delete("/api/admin/features/streamed").await.expect(200);
        let removal = stream.next_event(WAIT).await.expect("removal");
        assert_eq!(removal.types(), ["feature-removed"]);
        assert_eq!(removal.events()[0]["featureName"], "streamed");
        assert_eq!(removal.events()[0]["project"], "default");
        assert!(removal.id.expect("id") > next_id);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_replays_exactly_what_was_missed() {
    for backend in backends() {
        let app = TestApp::spawn(&backend).await;
        create_on(&app, "kept").await;
        app.create_toggle("gone").await;
        let mut stream = Sse::connect(&app, None).await;
        let id = stream
            .next_event(WAIT)
            .await
            .expect("hydration")
            .id
            .expect("id");
        drop(stream);
        app.post_empty("/api/admin/features/kept/toggle/off")
            .await
            .expect(200);
        app.delete("/api/admin/features/gone").await.expect(200);
        app.create_toggle("new").await;

        let mut stream = Sse::connect(&app, Some(&id.to_string())).await;
        let first = stream.next_event(WAIT).await.expect("replay");
        assert_eq!(first.event.as_deref(), Some("unleash-connected"));
        assert_eq!(
            first.types(),
            ["feature-updated", "feature-removed", "feature-updated"],
            "{:?}",
            first.data
        );
        let events = first.events();
        assert_eq!(events[0]["feature"]["name"], "kept");
        assert_eq!(events[0]["feature"]["enabled"], false);
        assert_eq!(events[1]["featureName"], "gone");
        assert_eq!(events[2]["feature"]["name"], "new");
        // Ids ascend and the frame's id is the newest version.
        let ids: Vec<u64> = events
            .iter()
            .map(|e| e["eventId"].as_u64().expect("id"))
            .collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]) && ids[0] > id,
            "{ids:?}"
        );
        let newest = first.id.expect("id");
        assert_eq!(newest, ids[2]);

        // Resuming at the newest id: nothing to send, and the stream goes on.
        let mut current = Sse::connect(&app, Some(&newest.to_string())).await;
        let first = current.next_event(WAIT).await.expect("connected");
        assert!(first.events().is_empty(), "{:?}", first.data);
        app.create_toggle("later").await;
        let update = current.next_event(WAIT).await.expect("update");
        assert_eq!(update.events()[0]["feature"]["name"], "later");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ahead_garbage_and_trimmed_ids_get_a_hydration() {
    for backend in backends() {
        let mut settings = backend.settings();
        settings.streaming.stream_log_max_age_secs = 1;
        let app = TestApp::spawn_with(settings).await;
        app.create_toggle("one").await;
        let mut stream = Sse::connect(&app, None).await;
        let id = stream
            .next_event(WAIT)
            .await
            .expect("hydration")
            .id
            .expect("id");
        for last in [
            format!("{}", id + 1000),
            "banana".into(),
            "-3".into(),
            String::new(),
        ] {
            let mut stream = Sse::connect(&app, Some(&last)).await;
            let first = stream.next_event(WAIT).await.expect("first");
            assert_eq!(hydrated_names(&first), ["one"], "Last-Event-ID {last:?}");
            assert_eq!(first.id, Some(id));
        }
        // A missed version older than the log keeps (one second; trimmed by the next
        // commit): a hydration.
        app.create_toggle("two").await;
        tokio::time::sleep(Duration::from_millis(1200)).await;
        app.create_toggle("three").await;
        let mut stream = Sse::connect(&app, Some(&id.to_string())).await;
        let first = stream.next_event(WAIT).await.expect("first");
        assert_eq!(hydrated_names(&first), ["one", "three", "two"]);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_keep_an_idle_stream_alive() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.streaming.streaming_heartbeat_ms = 100;
    let app = TestApp::spawn_with(settings).await;
    let mut stream = Sse::connect(&app, None).await;
    stream.next_event(WAIT).await.expect("hydration");
    let mut beats = 0;
    while beats < 3 {
        let frame = stream
            .next(Duration::from_secs(1))
            .await
            .expect("a heartbeat within 1 s");
        assert!(frame.event.is_none());
        assert_eq!(frame.comments, ["keep-alive"]);
        beats += 1;
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_answers_429_and_frees_with_closed_streams() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.streaming.streaming_max_connections = 2;
    // The server notices a closed connection when it next writes to it.
    settings.streaming.streaming_heartbeat_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    let mut first = Sse::connect(&app, None).await;
    first.next_event(WAIT).await.expect("hydration");
    let second = Sse::connect(&app, None).await;
    let refused = Sse::open(&app, "", None).await.err().expect("refused");
    let refused = refused.expect(429);
    assert!(refused.header("retry-after").is_some());
    assert!(!refused.error_message().is_empty());
    drop(second);
    let reopened = crate::common::eventually(Duration::from_secs(5), || async {
        Sse::open(&app, "", None).await.is_ok()
    })
    .await;
    assert!(reopened, "a closed stream's place was not freed");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_at_their_lifetime_and_at_shutdown_with_a_reconnect_hint() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.streaming.streaming_max_lifetime_ms = 1000;
    settings.streaming.streaming_heartbeat_ms = 100;
    settings.streaming.streaming_reconnect_ms = 250;
    let app = TestApp::spawn_with(settings).await;
    let mut stream = Sse::connect(&app, None).await;
    let started = tokio::time::Instant::now();
    stream.next_event(WAIT).await.expect("hydration");
    let mut last = None;
    while let Some(frame) = stream.next(WAIT).await {
        last = Some(frame);
    }
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_millis(700) && lasted < Duration::from_secs(3),
        "{lasted:?}"
    );
    let last = last.expect("a last frame");
    assert_eq!(last.comments, ["lifetime reached; reconnect"]);
    assert_eq!(last.retry, Some(250));
    app.stop().await;

    // At shutdown, after the drain: open streams end, the replica stops.
    let mut settings = backend.settings();
    settings.server.shutdown_drain_ms = 300;
    let app = TestApp::spawn_with(settings).await;
    let mut stream = Sse::connect(&app, None).await;
    stream.next_event(WAIT).await.expect("hydration");
    let stopping = tokio::spawn(app.stop());
    let mut last = None;
    while let Some(frame) = stream.next(WAIT).await {
        last = Some(frame);
    }
    assert_eq!(
        last.expect("farewell").comments,
        ["shutting down; reconnect"]
    );
    tokio::time::timeout(WAIT, stopping)
        .await
        .expect("the replica stopped with a stream open")
        .expect("stop task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_falls_behind_is_disconnected_and_resumes() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.streaming.streaming_queue_frames = 1;
    let app = TestApp::spawn_with(settings).await;
    create_big(&app).await;
    let mut stream = Sse::connect(&app, None).await;
    let id = stream
        .next_event(WAIT)
        .await
        .expect("hydration")
        .id
        .expect("id");
    // The reader stops reading while the toggle flips many times.
    for i in 0..120 {
        let state = if i % 2 == 0 { "off" } else { "on" };
        app.post_empty(&format!("/api/admin/features/big/toggle/{state}"))
            .await
            .expect(200);
    }
    let mut frames = 0;
    let mut last = None;
    while let Some(frame) = stream.next(WAIT).await {
        frames += 1;
        last = Some(frame);
    }
    assert!(frames < 120, "the slow reader got every frame");
    let last = last.expect("a last frame");
    assert_eq!(last.comments, ["too slow; reconnect"]);
    // It resumes: one event with the toggle as it is now.
    let mut stream = Sse::connect(&app, Some(&id.to_string())).await;
    let first = stream.next_event(WAIT).await.expect("replay");
    assert_eq!(first.types(), ["feature-updated"]);
    assert_eq!(first.events()[0]["feature"]["enabled"], true);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_resumes_on_another_replica_after_its_replica_is_killed() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    create_on(&a, "shared").await;
    // B learns of A's write a moment later (announcement or version check): its stream starts
    // from the same version once it has.
    let b_has_it = eventually(Duration::from_secs(5), || async {
        b.get("/api/admin/features/shared").await.status == reqwest::StatusCode::OK
    })
    .await;
    assert!(b_has_it, "replica B never saw A's write");
    let mut on_a = Sse::connect(&a, None).await;
    let mut on_b = Sse::connect(&b, None).await;
    let at_a = on_a
        .next_event(WAIT)
        .await
        .expect("hydration")
        .id
        .expect("id");
    let at_b = on_b
        .next_event(WAIT)
        .await
        .expect("hydration")
        .id
        .expect("id");
    // Ids are store versions: the same on every replica.
    assert_eq!(at_a, at_b);
    a.stop().await;
    assert!(on_a.next(WAIT).await.is_some_and(|f| f.event.is_none()));
    for i in 0..5 {
        b.create_toggle(&format!("while-down-{i}")).await;
    }
    b.post_empty("/api/admin/features/shared/toggle/off")
        .await
        .expect(200);
    // Replica b's own stream saw every write, in order.
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let frame = on_b.next_event(WAIT).await.expect("update on b");
        seen.push(frame.id.expect("id"));
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    // The client of the killed replica resumes on b: exactly the six missed writes.
    let mut resumed = Sse::connect(&b, Some(&at_a.to_string())).await;
    let first = resumed.next_event(WAIT).await.expect("replay");
    let names: Vec<String> = first
        .events()
        .iter()
        .map(|e| e["feature"]["name"].as_str().expect("name").to_string())
        .collect();
    assert_eq!(
        names,
        [
            "while-down-0",
            "while-down-1",
            "while-down-2",
            "while-down-3",
            "while-down-4",
            "shared"
        ]
    );
    assert_eq!(first.id, seen.last().copied());
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_narrow_a_stream_and_bad_ones_are_refused() {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    create_on(&app, "web.a").await;
    create_on(&app, "api.a").await;
    let mut stream = Sse::open(&app, "?namePrefix=web.", None)
        .await
        .expect("stream");
    let first = stream.next_event(WAIT).await.expect("hydration");
    assert_eq!(hydrated_names(&first), ["web.a"]);
    // A change outside the view is not sent; the next one inside is.
    app.post_empty("/api/admin/features/api.a/toggle/off")
        .await
        .expect(200);
    app.post_empty("/api/admin/features/web.a/toggle/off")
        .await
        .expect(200);
    let update = stream.next_event(WAIT).await.expect("update");
    assert_eq!(update.events()[0]["feature"]["name"], "web.a");
    // A write to another environment does not reach a `default` stream either.
    app.post_empty("/api/admin/projects/default/features/web.a/environments/development/on")
        .await
        .expect(200);
    app.post_empty("/api/admin/features/web.a/toggle/on")
        .await
        .expect(200);
    let update = stream.next_event(WAIT).await.expect("update");
    assert_eq!(update.events()[0]["feature"]["enabled"], true);
    let refused = Sse::open(&app, "?tag=nocolon", None)
        .await
        .err()
        .expect("refused");
    assert!(!refused.expect(400).error_message().is_empty());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_polls_the_same_events_with_the_version_as_etag() {
    for backend in backends() {
        let app = TestApp::spawn(&backend).await;
        create_on(&app, "polled").await;
        let first = delta(&app, "", None).await.expect(200);
        let etag = first.header("etag").expect("etag");
        assert_eq!(first.json["events"][0]["type"], "hydration");
        assert_eq!(first.json["events"][0]["features"][0]["name"], "polled");
        let version: u64 = etag.trim_matches('"').parse().expect("a version");
        assert_eq!(first.json["events"][0]["eventId"], version);
        // Current: 304, quoted or not.
        for tag in [etag.clone(), version.to_string(), format!("W/{etag}")] {
            let reply = delta(&app, "", Some(&tag)).await.expect(304);
            assert_eq!(reply.header("etag").as_deref(), Some(etag.as_str()));
        }
        app.post_empty("/api/admin/features/polled/toggle/off")
            .await
            .expect(200);
        let next = delta(&app, "", Some(&etag)).await.expect(200);
        assert_eq!(next.json["events"][0]["type"], "feature-updated");
        assert_eq!(next.json["events"][0]["feature"]["enabled"], false);
        assert_ne!(next.header("etag"), Some(etag.clone()));
        // Unknown or ahead: a hydration.
        for tag in ["\"nope\"", "\"999999\""] {
            let reply = delta(&app, "", Some(tag)).await.expect(200);
            assert_eq!(reply.json["events"][0]["type"], "hydration", "{tag}");
        }
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_mode_is_sent_only_when_the_operator_opts_in_and_the_replica_has_room() {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    let reply = app.client_features("", None).await.expect(200);
    assert_eq!(reply.header("fetch-mode"), None);
    app.stop().await;

    let mut settings = backend.settings();
    settings.streaming.fetch_mode_header = true;
    settings.streaming.streaming_max_connections = 1;
    // The server notices a closed connection when it next writes to it.
    settings.streaming.streaming_heartbeat_ms = 200;
    let app = TestApp::spawn_with(settings.clone()).await;
    let reply = app.client_features("", None).await.expect(200);
    assert_eq!(reply.header("fetch-mode").as_deref(), Some("streaming"));
    // A full replica does not send SDKs to streams it would refuse …
    let mut stream = Sse::connect(&app, None).await;
    stream.next_event(WAIT).await.expect("hydration");
    let reply = app.client_features("", None).await.expect(200);
    assert_eq!(reply.header("fetch-mode"), None);
    // … and does again once it has room.
    drop(stream);
    let advertised = crate::common::eventually(Duration::from_secs(5), || async {
        let reply = app.client_features("", None).await.expect(200);
        reply.header("fetch-mode").as_deref() == Some("streaming")
    })
    .await;
    assert!(advertised, "fetch-mode not sent again once a stream closed");
    app.stop().await;

    // Sending SDKs to streams this replica does not serve is refused at start …
    settings.streaming.enabled = false;
    let refused = settings
        .check()
        .expect_err("--fetch-mode-header without streams");
    assert!(refused.contains("--fetch-mode-header"), "{refused}");
    // … and without the header, streams off answer 501 (Node SDKs then poll).
    settings.streaming.fetch_mode_header = false;
    let app = TestApp::spawn_with(settings).await;
    let refused = send(app.anonymous(Method::GET, "/api/client/streaming")).await;
    assert!(!refused.expect(501).error_message().is_empty());
    app.stop().await;
}
