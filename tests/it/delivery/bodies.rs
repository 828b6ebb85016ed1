//! What receivers get: every event kind as the event record (or a rendered template), the
//! delivery and signature headers, Slack messages per channel; only subscribed, enabled addons.

use std::collections::BTreeSet;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use super::{deliveries, quick, touch, webhook};
use crate::common::receiver::Receiver;
use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    every_event_kind_is_delivered_as_its_event_record,
    templates_render_sections_missing_keys_and_odd_values,
    slack_posts_one_message_per_channel_tag,
    only_enabled_subscribed_addons_get_events
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

/// Every kind addons deliver (the providers' list).
const KINDS: [&str; 6] = flagpole::domain::addon::ADDON_EVENTS;

async fn every_event_kind_is_delivered_as_its_event_record(backend: &Backend) {
    let app = TestApp::spawn_with(quick(backend)).await;
    let receiver = Receiver::start().await;
    let id = webhook(
        &app,
        &receiver.url("/hook"),
        &KINDS,
        json!({"secret": "s3cret", "customHeaders": "{\"Authorization\": \"Bearer abc\"}"}),
    )
    .await;
    app.create_toggle("kinds").await;
    touch(&app, "kinds", "second").await;
    app.post_empty("/api/admin/features/kinds/stale/on")
        .await
        .expect(200);
    app.post_empty("/api/admin/features/kinds/stale/off")
        .await
        .expect(200);
    app.delete("/api/admin/features/kinds").await.expect(200);
    app.post_empty("/api/admin/archive/revive/kinds")
        .await
        .expect(200);
    assert!(receiver.wait_accepted(6, Duration::from_secs(15)).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let received = receiver.received();
    assert_eq!(received.len(), 6, "each event once");

    let events = app.get("/api/admin/events/kinds").await.expect(200).json;
    let events = events["events"].as_array().expect("events").clone();
    let kinds: BTreeSet<String> = received
        .iter()
        .map(|r| r.json()["type"].as_str().expect("type").to_string())
        .collect();
    assert_eq!(kinds, KINDS.iter().map(|k| k.to_string()).collect());
    for request in &received {
        let body = request.json();
        let event = events
            .iter()
            .find(|e| e["id"] == body["id"])
            .unwrap_or_else(|| panic!("no event {}", body["id"]));
        for field in ["id", "type", "createdBy", "createdAt", "data", "tags"] {
            assert_eq!(body[field], event[field], "{field} of {body}");
        }
        assert_eq!(request.path, "/hook");
        assert_eq!(request.delivery(), format!("{}.{id}", body["id"]));
        assert_eq!(request.headers["x-flagpole-event"], body["type"]);
        assert_eq!(request.headers["content-type"], "application/json");
        assert_eq!(request.headers["authorization"], "Bearer abc");
        let timestamp = &request.headers["x-flagpole-timestamp"];
        let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").expect("key");
        mac.update(format!("{timestamp}.").as_bytes());
        mac.update(&request.body);
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            request.headers["x-flagpole-signature"],
            format!("sha256={expected}")
        );
    }
    let log = deliveries(&app, id).await;
    assert_eq!(log.len(), 6);
    for record in &log {
        assert_eq!(record["status"], "delivered", "{record}");
        assert_eq!(record["attempts"], 1);
        assert!(record["latencyMs"].is_u64());
    }
}

async fn templates_render_sections_missing_keys_and_odd_values(backend: &Backend) {
    let app = TestApp::spawn_with(quick(backend)).await;
    let receiver = Receiver::start().await;
    let template = "{{event.type}}|{{event.createdBy}}|{{event.data.name}}|\
        {{#event.data.strategies}}[{{name}}]{{/event.data.strategies}}|\
        {{^event.data.enabled}}off{{/event.data.enabled}}|{{event.data.enabled}}|\
        {{event.data.nothing}}|{{event.data.description}}|{{{event.data.description}}}|\
        {{#event.tags}}{{type}}={{value}};{{/event.tags}}|{{event.data}}";
    webhook(
        &app,
        &receiver.url("/t"),
        &["feature-created"],
        json!({"bodyTemplate": template, "contentType": "text/plain"}),
    )
    .await;
    app.post(
        "/api/admin/features",
        json!({"name": "odd", "description": "<b>&\"x\"</b>",
               "strategies": [{"name": "default"}, {"name": "userWithId", "parameters": {"userIds": "1"}}]}),
    )
    .await
    .expect(200);
    assert!(receiver.wait_accepted(1, Duration::from_secs(15)).await);
    let request = &receiver.received()[0];
    assert_eq!(request.headers["content-type"], "text/plain");
    let body = String::from_utf8(request.body.clone()).expect("utf-8");
    let parts: Vec<&str> = body.split('|').collect();
    assert_eq!(
        parts[..4],
        ["feature-created", "admin", "odd", "[default][userWithId]"]
    );
    assert_eq!(parts[4], "off", "inverted section of false");
    assert_eq!(parts[5], "false");
    assert_eq!(parts[6], "", "a missing key renders empty");
    assert_eq!(parts[7], "&lt;b&gt;&amp;&quot;x&quot;&lt;/b&gt;", "escaped");
    assert_eq!(parts[8], "<b>&\"x\"</b>", "triple braces are raw");
    assert_eq!(parts[9], "", "no tags");
    assert!(
        !parts[10].is_empty(),
        "an object renders as something, not a failure"
    );
}

async fn slack_posts_one_message_per_channel_tag(backend: &Backend) {
    let mut settings = quick(backend);
    settings.server.public_url = Some("https://flags.example.com".parse().expect("url"));
    let app = TestApp::spawn_with(settings).await;
    let receiver = Receiver::start().await;
    app.post(
        "/api/admin/addons",
        json!({"provider": "slack", "parameters": {"url": receiver.url("/slack"),
               "defaultChannel": "general", "username": "flags"},
               "events": ["feature-created", "feature-archived"]}),
    )
    .await
    .expect(201);
    app.create_toggle("plain").await;
    assert!(receiver.wait_accepted(1, Duration::from_secs(15)).await);
    let message = receiver.received()[0].json();
    assert_eq!(message["channel"], "#general");
    assert_eq!(message["username"], "flags");
    let text = message["text"].as_str().expect("text");
    assert!(
        text.starts_with(
            "admin created feature toggle <https://flags.example.com/#/features/strategies/plain|plain>"
        ),
        "{text}"
    );
    for channel in ["team-a", "team-b"] {
        app.post(
            "/api/admin/features/plain/tags",
            json!({"type": "slack", "value": channel}),
        )
        .await
        .expect(201);
    }
    app.delete("/api/admin/features/plain").await.expect(200);
    assert!(receiver.wait_accepted(3, Duration::from_secs(15)).await);
    let mut channels: Vec<String> = receiver.received()[1..]
        .iter()
        .map(|r| r.json()["channel"].as_str().expect("channel").to_string())
        .collect();
    channels.sort();
    assert_eq!(channels, ["#team-a", "#team-b"]);
    let archived = receiver.received()[1].json();
    assert_eq!(
        archived["text"],
        "The feature toggle *<https://flags.example.com/#/archive/strategies/plain|plain>* was *archived* by admin."
    );
    let ids: BTreeSet<String> = receiver.received()[1..]
        .iter()
        .map(|r| r.delivery())
        .collect();
    assert_eq!(ids.len(), 2, "each message its own key");
}

async fn only_enabled_subscribed_addons_get_events(backend: &Backend) {
    let app = TestApp::spawn_with(quick(backend)).await;
    let created_only = Receiver::start().await;
    let disabled = Receiver::start().await;
    webhook(
        &app,
        &created_only.url("/"),
        &["feature-created"],
        json!({}),
    )
    .await;
    let off = webhook(&app, &disabled.url("/"), &KINDS, json!({})).await;
    let mut addon: Value = app
        .get(&format!("/api/admin/addons/{off}"))
        .await
        .expect(200)
        .json;
    addon["enabled"] = json!(false);
    app.put(&format!("/api/admin/addons/{off}"), addon)
        .await
        .expect(200);
    app.create_toggle("quiet").await;
    touch(&app, "quiet", "not subscribed").await;
    assert!(created_only.wait_accepted(1, Duration::from_secs(15)).await);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(created_only.received().len(), 1);
    assert_eq!(created_only.received()[0].json()["type"], "feature-created");
    assert!(disabled.received().is_empty());
    assert!(deliveries(&app, off).await.is_empty());
}
