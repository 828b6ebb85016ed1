//! The audit log (API-FACTS §3): every write records its event atomically with the write.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{send, without_auth, Backend, TestApp};
use crate::conformance;

conformance!(
    writes_record_events,
    events_filter_and_limit,
    created_by_follows_identity,
    a_toggles_history_is_found_behind_many_newer_events,
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

fn types(events: &Value) -> Vec<String> {
    events["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["type"].as_str().expect("type").to_string())
        .collect()
}

async fn writes_record_events(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("ev").await;
    app.put(
        "/api/admin/features/ev",
        json!({"strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    app.post_empty("/api/admin/features/ev/toggle/on")
        .await
        .expect(200);
    app.post_empty("/api/admin/features/ev/stale/on")
        .await
        .expect(200);
    app.post_empty("/api/admin/features/ev/stale/off")
        .await
        .expect(200);
    app.post(
        "/api/admin/features/ev/tags",
        json!({"type": "simple", "value": "ev-tag"}),
    )
    .await
    .expect(201);
    app.delete("/api/admin/features/ev/tags/simple/ev-tag")
        .await
        .expect(200);
    app.delete("/api/admin/features/ev").await.expect(200);
    app.post_empty("/api/admin/archive/revive/ev")
        .await
        .expect(200);
    app.post("/api/admin/tag-types", json!({"name": "kind"}))
        .await
        .expect(201);
    app.put("/api/admin/tag-types/kind", json!({"description": "d"}))
        .await
        .expect(200);
    app.post("/api/admin/tags", json!({"type": "kind", "value": "v1"}))
        .await
        .expect(201);
    app.delete("/api/admin/tags/kind/v1").await.expect(200);
    app.delete("/api/admin/tag-types/kind").await.expect(200);
    app.post(
        "/api/admin/strategies",
        json!({"name": "s1", "parameters": []}),
    )
    .await
    .expect(201);
    app.put("/api/admin/strategies/s1", json!({"parameters": []}))
        .await
        .expect(200);
    app.post_empty("/api/admin/strategies/s1/deprecate")
        .await
        .expect(200);
    app.post_empty("/api/admin/strategies/s1/reactivate")
        .await
        .expect(200);
    app.delete("/api/admin/strategies/s1").await.expect(200);
    // Refused writes record nothing.
    app.create_toggle_reply("ev").await.expect(403);

    let log = app
        .get("/api/admin/events?limit=1000")
        .await
        .expect(200)
        .json;
    assert_eq!(log["version"], 1);
    let mut seen = types(&log);
    seen.reverse();
    let expected = [
        "feature-created",
        "feature-updated",
        "feature-updated",
        "feature-stale-on",
        "feature-stale-off",
        "tag-created",
        "feature-tagged",
        "feature-untagged",
        "feature-archived",
        "feature-revived",
        "tag-type-created",
        "tag-type-updated",
        "tag-created",
        "tag-deleted",
        "tag-type-deleted",
        "strategy-created",
        "strategy-updated",
        "strategy-deprecated",
        "strategy-reactivated",
        "strategy-deleted",
    ];
    let tail: Vec<_> = seen[seen.len() - expected.len()..].to_vec();
    assert_eq!(tail, expected);

    let events = log["events"].as_array().expect("events");
    // Newest first, ids strictly decreasing.
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e["id"].as_u64().expect("id"))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    for e in events {
        assert!(e["createdAt"].is_string());
        assert!(e["tags"].is_array());
    }
    let created = events
        .iter()
        .find(|e| e["type"] == "feature-created")
        .expect("created");
    assert_eq!(created["createdBy"], "admin");
    assert_eq!(created["data"]["name"], "ev");
    assert_eq!(created["data"]["enabled"], false);
    let archived = events
        .iter()
        .find(|e| e["type"] == "feature-archived")
        .expect("archived");
    assert_eq!(archived["data"], json!({"name": "ev"}));
    let tagged = events
        .iter()
        .find(|e| e["type"] == "feature-tagged")
        .expect("tagged");
    assert_eq!(
        tagged["data"],
        json!({"featureName": "ev", "tag": {"type": "simple", "value": "ev-tag"}})
    );
    assert_eq!(
        tagged["tags"],
        json!([{"type": "simple", "value": "ev-tag"}])
    );
}

async fn events_filter_and_limit(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("one").await;
    app.create_toggle("two").await;
    app.post_empty("/api/admin/features/one/toggle/on")
        .await
        .expect(200);
    let limited = app.get("/api/admin/events?limit=2").await.expect(200).json;
    assert_eq!(types(&limited), ["feature-updated", "feature-created"]);
    let for_one = app.get("/api/admin/events/one").await.expect(200).json;
    assert_eq!(for_one["toggleName"], "one");
    assert_eq!(types(&for_one), ["feature-updated", "feature-created"]);
    // Each event shows what changed since the previous event of the same toggle.
    assert_eq!(
        for_one["events"][0]["diffs"],
        json!([{"kind": "E", "path": ["enabled"], "lhs": false, "rhs": true}])
    );
    assert_eq!(for_one["events"][1]["diffs"], Value::Null);
    let for_none = app.get("/api/admin/events/none").await.expect(200).json;
    assert_eq!(for_none["events"], json!([]));
    app.get("/api/admin/events?limit=0")
        .await
        .expect(400)
        .error_message();
    app.get("/api/admin/events?limit=abc").await.expect(400);
}

async fn created_by_follows_identity(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let reply = send(
        app.anonymous(Method::POST, "/api/admin/features")
            .basic_auth("alice@example.com", Some("ignored"))
            .json(&json!({"name": "who", "strategies": [{"name": "default"}]})),
    )
    .await
    .expect(200);
    assert_eq!(reply.json["name"], "who");
    let log = app.get("/api/admin/events?limit=1").await.expect(200).json;
    assert_eq!(log["events"][0]["createdBy"], "alice@example.com");
    app.stop().await;

    // --auth none: every caller is "unknown", no credentials needed.
    let app = TestApp::spawn_with(without_auth(backend.settings())).await;
    send(
        app.anonymous(Method::POST, "/api/admin/features")
            .json(&json!({"name": "anon", "strategies": [{"name": "default"}]})),
    )
    .await
    .expect(200);
    let log = send(app.anonymous(Method::GET, "/api/admin/events?limit=1"))
        .await
        .expect(200)
        .json;
    assert_eq!(log["events"][0]["createdBy"], "unknown");
}

async fn a_toggles_history_is_found_behind_many_newer_events(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("early").await;
    app.post(
        "/api/admin/features/early/tags",
        json!({"type": "simple", "value": "old-tag"}),
    )
    .await
    .expect(201);
    for i in 0..120 {
        app.create_toggle(&format!("later.{i}")).await;
    }
    let history = app.get("/api/admin/events/early").await.expect(200).json;
    assert_eq!(types(&history), ["feature-tagged", "feature-created"]);
    let limited = app
        .get("/api/admin/events/early?limit=1")
        .await
        .expect(200)
        .json;
    assert_eq!(types(&limited), ["feature-tagged"]);
    let recent = app.get("/api/admin/events?limit=5").await.expect(200).json;
    assert_eq!(recent["events"][0]["data"]["name"], "later.119");
}
