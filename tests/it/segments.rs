//! Segments (MODERN-MODEL §1): the admin routes with Unleash 7's statuses and shapes, the
//! limits, the project rule, who uses a segment, deleting one in use, and how the client
//! document serves them.

use serde_json::{json, Value};

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    segment_lifecycle,
    segment_bodies_are_validated_whole,
    limits_come_from_the_settings,
    project_segments_serve_only_their_project,
    a_segment_in_use_cannot_be_deleted,
    the_client_document_serves_segments_by_reference
);

fn beta(name: &str) -> Value {
    json!({"name": name, "description": "beta testers", "constraints": [
        {"contextName": "userId", "operator": "IN", "values": ["a", "b"]}]})
}

async fn create(app: &TestApp, body: Value) -> u64 {
    app.post("/api/admin/segments", body).await.expect(201).json["id"]
        .as_u64()
        .expect("id")
}

/// A 400 and the paths of its details.
fn paths(reply: &crate::common::Reply) -> Vec<String> {
    assert_eq!(reply.status.as_u16(), 400, "{}", reply.json);
    reply.json["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].as_str().expect("path").to_string())
        .collect()
}

async fn segment_lifecycle(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app
        .post("/api/admin/segments", beta("beta"))
        .await
        .expect(201);
    let id = created.json["id"].as_u64().expect("id");
    assert_eq!(created.header("location"), Some(format!("segments/{id}")));
    assert_eq!(created.json["name"], "beta");
    assert_eq!(created.json["description"], "beta testers");
    assert_eq!(created.json["project"], Value::Null);
    assert_eq!(created.json["usedInFeatures"], 0);
    assert_eq!(created.json["createdBy"], "admin");
    assert!(created.json["createdAt"].is_string());
    assert_eq!(
        created.json["constraints"],
        json!([{"contextName": "userId", "operator": "IN", "values": ["a", "b"]}])
    );

    // Names are unique; `validate` says so without writing.
    let taken = app
        .post("/api/admin/segments", beta("beta"))
        .await
        .expect(409);
    assert_eq!(taken.error_message(), "Segment name already exists");
    app.post("/api/admin/segments/validate", json!({"name": "beta"}))
        .await
        .expect(409);
    let free = app
        .post("/api/admin/segments/validate", json!({"name": "gamma"}))
        .await
        .expect(204);
    assert!(free.bytes.is_empty());
    app.post("/api/admin/segments/validate", json!({"name": ""}))
        .await
        .expect(400);
    app.post("/api/admin/segments/validate", json!({}))
        .await
        .expect(400);

    let other = create(&app, beta("other")).await;
    assert!(other > id, "ids come from a sequence");
    let list = app.get("/api/admin/segments").await.expect(200).json;
    let names: Vec<_> = list["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .map(|s| s["name"].clone())
        .collect();
    assert_eq!(names, [json!("beta"), json!("other")]);

    // PUT: 204; absent description keeps, project absent means global.
    let put = app
        .put(
            &format!("/api/admin/segments/{id}"),
            json!({"name": "beta2", "constraints": []}),
        )
        .await
        .expect(204);
    assert!(put.bytes.is_empty());
    let shown = app
        .get(&format!("/api/admin/segments/{id}"))
        .await
        .expect(200)
        .json;
    assert_eq!(shown["name"], "beta2");
    assert_eq!(shown["description"], "beta testers");
    assert_eq!(shown["constraints"], json!([]));
    // Another segment's name is taken.
    app.put(
        &format!("/api/admin/segments/{id}"),
        json!({"name": "other", "constraints": []}),
    )
    .await
    .expect(409);

    app.get("/api/admin/segments/999").await.expect(404);
    app.get("/api/admin/segments/abc").await.expect(400);
    app.put("/api/admin/segments/999", beta("x"))
        .await
        .expect(404);
    app.get("/api/admin/segments/999/strategies")
        .await
        .expect(404);

    app.delete(&format!("/api/admin/segments/{id}"))
        .await
        .expect(204);
    app.get(&format!("/api/admin/segments/{id}"))
        .await
        .expect(404);
    // Deleting what is gone is done already (as Unleash answers).
    app.delete(&format!("/api/admin/segments/{id}"))
        .await
        .expect(204);
    // A new segment never gets a deleted one's id.
    assert!(create(&app, beta("beta")).await > other);

    let events = app.get("/api/admin/events").await.expect(200).json;
    let kinds: Vec<_> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    for kind in ["segment-created", "segment-updated", "segment-deleted"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
}

async fn segment_bodies_are_validated_whole(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let reply = app.post("/api/admin/segments", json!({})).await;
    assert_eq!(paths(&reply), ["name", "constraints"]);
    let reply = app
        .post(
            "/api/admin/segments",
            json!({"name": "", "project": "nope", "icon": "x", "constraints": [
                {"contextName": "userId", "operator": "IN", "values": []},
                {"contextName": "unknownField", "operator": "IN", "values": ["a"]},
                {"contextName": "userId", "operator": "LIKE", "values": ["a"]}]}),
        )
        .await;
    assert_eq!(
        paths(&reply),
        [
            "icon",
            "name",
            "project",
            "constraints[0].values",
            "constraints[1].contextName",
            "constraints[2].operator"
        ]
    );
    // What the admin view carries may be sent back.
    let id = create(&app, beta("beta")).await;
    let mut shown = app
        .get(&format!("/api/admin/segments/{id}"))
        .await
        .expect(200)
        .json;
    shown["name"] = json!("beta again");
    app.put(&format!("/api/admin/segments/{id}"), shown)
        .await
        .expect(204);
    // A PUT is validated the same way, and changes nothing when refused.
    let reply = app
        .put(
            &format!("/api/admin/segments/{id}"),
            json!({"name": "x", "constraints": [{"operator": "IN", "values": ["a"]}]}),
        )
        .await;
    assert_eq!(paths(&reply), ["constraints[0].contextName"]);
    let shown = app.get(&format!("/api/admin/segments/{id}")).await.json;
    assert_eq!(shown["name"], "beta again");
}

async fn limits_come_from_the_settings(backend: &Backend) {
    let mut settings = backend.settings();
    settings.segments.segments_limit = 2;
    settings.segments.strategy_segments_limit = 2;
    settings.segments.segment_values_limit = 3;
    let app = TestApp::spawn_with(settings).await;
    let values = |n: usize| -> Value {
        (0..n)
            .map(|i| json!(i.to_string()))
            .collect::<Vec<_>>()
            .into()
    };
    let too_many = app
        .post(
            "/api/admin/segments",
            json!({"name": "big", "constraints": [
                {"contextName": "userId", "operator": "IN", "values": values(2)},
                {"contextName": "appName", "operator": "IN", "values": values(2)}]}),
        )
        .await;
    assert_eq!(paths(&too_many), ["constraints"]);
    assert_eq!(
        too_many.error_message(),
        "Segments may not have more than 3 values"
    );
    let a = create(
        &app,
        json!({"name": "a", "constraints": [
            {"contextName": "userId", "operator": "IN", "values": values(3)}]}),
    )
    .await;
    let b = create(&app, beta("b")).await;
    let third = app.post("/api/admin/segments", beta("c")).await.expect(400);
    assert_eq!(
        third.error_message(),
        "Failed to create segment. You can't create more than the established limit of 2."
    );
    // The values limit holds on PUT too.
    app.put(
        &format!("/api/admin/segments/{a}"),
        json!({"name": "a", "constraints": [
            {"contextName": "userId", "operator": "IN", "values": values(4)}]}),
    )
    .await
    .expect(400);

    // Segments per strategy, on the 3.x toggle write path.
    app.delete(&format!("/api/admin/segments/{b}"))
        .await
        .expect(204);
    let c = create(&app, beta("c")).await;
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "limited", "strategies": [
                {"name": "default", "segments": [a, c]},
                {"name": "default", "segments": [a, c, 77]}]}),
        )
        .await;
    assert_eq!(
        paths(&reply),
        ["strategies[1].segments[2]", "strategies[1].segments"]
    );
    assert!(reply.json["details"][1]["message"]
        .as_str()
        .is_some_and(|m| m == "Strategies may not have more than 2 segments"));
    app.post(
        "/api/admin/features",
        json!({"name": "limited", "strategies": [{"name": "default", "segments": [a, c]}]}),
    )
    .await
    .expect(200);
}

async fn project_segments_serve_only_their_project(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for id in ["p1", "p2"] {
        app.post("/api/admin/projects", json!({"id": id, "name": id}))
            .await
            .expect(201);
    }
    let mut body = beta("p1 only");
    body["project"] = json!("p1");
    let id = create(&app, body).await;
    let shown = app.get(&format!("/api/admin/segments/{id}")).await.json;
    assert_eq!(shown["project"], "p1");

    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "elsewhere", "strategies": [{"name": "default", "segments": [id]}]}),
        )
        .await;
    assert_eq!(paths(&reply), ["strategies[0].segments[0]"]);
    assert!(reply
        .error_message()
        .contains("does not belong to project \"default\""));
    app.post(
        "/api/admin/features",
        json!({"name": "inside", "project": "p1",
               "strategies": [{"name": "default", "segments": [id]}]}),
    )
    .await
    .expect(200);
    // Moving the toggle to another project is refused while it uses the segment.
    app.put(
        "/api/admin/features/inside",
        json!({"name": "inside", "project": "p2",
               "strategies": [{"name": "default", "segments": [id]}]}),
    )
    .await
    .expect(400);
    // The segment cannot move to a project its users are not in; global is fine.
    let moved = app
        .put(
            &format!("/api/admin/segments/{id}"),
            json!({"name": "p1 only", "project": "p2", "constraints": []}),
        )
        .await;
    assert_eq!(paths(&moved), ["project"]);
    assert_eq!(
        moved.error_message(),
        "Invalid project. Segment is being used by strategies in other projects: p1"
    );
    app.put(
        &format!("/api/admin/segments/{id}"),
        json!({"name": "p1 only", "constraints": []}),
    )
    .await
    .expect(204);
    let shown = app.get(&format!("/api/admin/segments/{id}")).await.json;
    assert_eq!(shown["project"], Value::Null);
}

async fn a_segment_in_use_cannot_be_deleted(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post("/api/admin/context", json!({"name": "region"}))
        .await
        .expect(201);
    let id = create(
        &app,
        json!({"name": "eu", "constraints": [
            {"contextName": "region", "operator": "IN", "values": ["eu"]}]}),
    )
    .await;
    let toggle = app
        .post(
            "/api/admin/features",
            json!({"name": "uses.eu", "strategies": [{"name": "default", "segments": [id]}]}),
        )
        .await
        .expect(200)
        .json;
    let strategy_id = toggle["strategies"][0]["id"]
        .as_str()
        .expect("strategy id")
        .to_string();

    let users = app
        .get(&format!("/api/admin/segments/{id}/strategies"))
        .await
        .expect(200)
        .json;
    assert_eq!(
        users,
        json!({"strategies": [{"id": strategy_id, "projectId": "default",
            "featureName": "uses.eu", "strategyName": "default", "environment": "default"}],
            "changeRequestStrategies": []})
    );
    let of_strategy = app
        .get(&format!("/api/admin/segments/strategies/{strategy_id}"))
        .await
        .expect(200)
        .json;
    assert_eq!(of_strategy["segments"][0]["id"], json!(id));
    assert_eq!(of_strategy["segments"][0]["usedInFeatures"], 1);
    let none = app
        .get("/api/admin/segments/strategies/no-such-strategy")
        .await
        .expect(200)
        .json;
    assert_eq!(none, json!({"segments": []}));

    let refused = app
        .delete(&format!("/api/admin/segments/{id}"))
        .await
        .expect(409);
    assert!(refused.error_message().contains("uses.eu"));
    // Its context field is in use too.
    let field = app.delete("/api/admin/context/region").await.expect(409);
    assert!(field.error_message().contains("segment"));

    // Archived toggles do not hold it; they lose it with the segment, and revive without it.
    app.delete("/api/admin/features/uses.eu").await.expect(200);
    app.delete(&format!("/api/admin/segments/{id}"))
        .await
        .expect(204);
    app.post_empty("/api/admin/archive/revive/uses.eu")
        .await
        .expect(200);
    let revived = app
        .get("/api/admin/features/uses.eu")
        .await
        .expect(200)
        .json;
    assert!(
        revived["strategies"][0].get("segments").is_none(),
        "{revived}"
    );
    app.delete("/api/admin/context/region").await.expect(200);
}

async fn the_client_document_serves_segments_by_reference(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let id = create(&app, beta("beta")).await;
    app.post(
        "/api/admin/features",
        json!({"name": "seg.toggle", "enabled": true,
               "strategies": [{"name": "default", "segments": [id]}]}),
    )
    .await
    .expect(200);
    app.settle().await;
    // What Node (5.2.0) and Python (6.1.0) SDKs send: segments by reference.
    let by_reference = |etag: Option<String>| {
        let mut request = app
            .anonymous(reqwest::Method::GET, "/api/client/features")
            .header("Unleash-Client-Spec", "5.2.0");
        if let Some(etag) = etag {
            request = request.header("If-None-Match", etag);
        }
        crate::common::send(request)
    };
    let first = by_reference(None).await.expect(200);
    let toggle = &first.json["features"][0];
    assert_eq!(toggle["strategies"][0]["segments"], json!([id]));
    assert!(toggle["strategies"][0].get("constraints").is_none());
    assert_eq!(
        first.json["segments"],
        json!([{"id": id, "name": "beta", "constraints": [
            {"contextName": "userId", "operator": "IN", "values": ["a", "b"]}]}])
    );
    // Without the header (older SDKs): the segment's constraints inlined, no `segments`.
    let inline = app.client_features("", None).await.expect(200).json;
    let strategy = &inline["features"][0]["strategies"][0];
    assert!(strategy.get("segments").is_none(), "{inline}");
    assert_eq!(
        strategy["constraints"],
        json!([{"contextName": "userId", "operator": "IN", "values": ["a", "b"]}])
    );
    assert!(inline.get("segments").is_none(), "{inline}");
    let etag = first.header("etag").expect("etag");

    app.put(
        &format!("/api/admin/segments/{id}"),
        json!({"name": "beta", "constraints": [
            {"contextName": "userId", "operator": "IN", "values": ["c"]}]}),
    )
    .await
    .expect(204);
    let second = by_reference(Some(etag.clone())).await.expect(200);
    assert_ne!(second.header("etag"), Some(etag));
    assert_eq!(
        second.json["segments"][0]["constraints"][0]["values"],
        json!(["c"])
    );
    let inline = app.client_features("", None).await.expect(200).json;
    assert_eq!(
        inline["features"][0]["strategies"][0]["constraints"][0]["values"],
        json!(["c"])
    );
    app.delete(&format!("/api/admin/segments/{id}"))
        .await
        .expect(409);
}
