//! Tag types, tags and tags on toggles (spec §3, §4.2, §7; API-FACTS §4).

use serde_json::json;

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    tagging_a_toggle,
    tag_errors_are_404_and_409,
    tag_types_crud,
    tags_crud_and_cascade,
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

async fn tagging_a_toggle(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("tagged").await;
    let tag = app
        .post(
            "/api/admin/features/tagged/tags",
            json!({"type": "simple", "value": "team-x"}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(
        (tag["type"].clone(), tag["value"].clone()),
        (json!("simple"), json!("team-x"))
    );
    assert!(tag["id"].as_u64().is_some());

    // The tag (type, value) was created on the fly.
    app.get("/api/admin/tags/simple/team-x").await.expect(200);
    let toggle = app.get("/api/admin/features/tagged").await.expect(200).json;
    assert_eq!(
        toggle["tags"],
        json!([{"id": tag["id"], "type": "simple", "value": "team-x"}])
    );
    let listed = app
        .get("/api/admin/features/tagged/tags")
        .await
        .expect(200)
        .json;
    assert_eq!(listed["tags"][0]["value"], "team-x");

    // A second toggle reuses the same tag id.
    app.create_toggle("tagged2").await;
    let again = app
        .post(
            "/api/admin/features/tagged2/tags",
            json!({"type": "simple", "value": "team-x"}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(again["id"], tag["id"]);

    app.delete("/api/admin/features/tagged/tags/simple/team-x")
        .await
        .expect(200);
    let toggle = app.get("/api/admin/features/tagged").await.expect(200).json;
    assert_eq!(toggle["tags"], json!([]));
    // The tag itself stays.
    app.get("/api/admin/tags/simple/team-x").await.expect(200);
}

async fn tag_errors_are_404_and_409(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("tg").await;
    // spec §7: unknown tag type → 404
    app.post(
        "/api/admin/features/tg/tags",
        json!({"type": "nosuchtype", "value": "x1"}),
    )
    .await
    .expect(404)
    .error_message();
    // spec §7: removing a tag the toggle does not have → 404
    app.delete("/api/admin/features/tg/tags/simple/absent")
        .await
        .expect(404)
        .error_message();
    // unknown toggle
    app.post(
        "/api/admin/features/none/tags",
        json!({"type": "simple", "value": "x1"}),
    )
    .await
    .expect(404);
    app.delete("/api/admin/features/none/tags/simple/x1")
        .await
        .expect(404);
    // tagging twice
    app.post(
        "/api/admin/features/tg/tags",
        json!({"type": "simple", "value": "x1"}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/features/tg/tags",
        json!({"type": "simple", "value": "x1"}),
    )
    .await
    .expect(409)
    .error_message();
    // invalid tag values
    app.post(
        "/api/admin/features/tg/tags",
        json!({"type": "simple", "value": "x"}),
    )
    .await
    .expect(400);
    app.post(
        "/api/admin/features/tg/tags",
        json!({"type": "a b", "value": "xy"}),
    )
    .await
    .expect(400);
    app.post("/api/admin/features/tg/tags", json!({"type": "simple"}))
        .await
        .expect(400);
}

async fn tag_types_crud(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.get("/api/admin/tag-types").await.expect(200).json;
    assert_eq!(list["version"], 1);
    assert_eq!(
        list["tagTypes"],
        json!([{"name": "simple", "description": "Used to simplify filtering of features", "icon": "#"}])
    );
    let created = app
        .post(
            "/api/admin/tag-types",
            json!({"name": "team", "description": "Owning team", "icon": "T"}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(created["name"], "team");
    app.post("/api/admin/tag-types", json!({"name": "team"}))
        .await
        .expect(409);
    app.post("/api/admin/tag-types", json!({"name": "a b"}))
        .await
        .expect(400);
    app.post("/api/admin/tag-types/validate", json!({"name": "team"}))
        .await
        .expect(409);
    app.post("/api/admin/tag-types/validate", json!({"name": "other"}))
        .await
        .expect(200);
    let got = app.get("/api/admin/tag-types/team").await.expect(200).json;
    assert_eq!(got["tagType"]["description"], "Owning team");
    app.put(
        "/api/admin/tag-types/team",
        json!({"name": "team", "description": "New", "icon": "N"}),
    )
    .await
    .expect(200);
    assert_eq!(
        app.get("/api/admin/tag-types/team").await.json["tagType"]["description"],
        "New"
    );
    app.put("/api/admin/tag-types/ghost", json!({"description": "x"}))
        .await
        .expect(404);
    app.get("/api/admin/tag-types/ghost")
        .await
        .expect(404)
        .error_message();

    // Deleting a type removes its tags from toggles.
    app.create_toggle("owned").await;
    app.post(
        "/api/admin/features/owned/tags",
        json!({"type": "team", "value": "core"}),
    )
    .await
    .expect(201);
    app.delete("/api/admin/tag-types/team").await.expect(200);
    app.get("/api/admin/tag-types/team").await.expect(404);
    app.get("/api/admin/tags/team/core").await.expect(404);
    assert_eq!(
        app.get("/api/admin/features/owned").await.json["tags"],
        json!([])
    );
    app.delete("/api/admin/tag-types/team").await.expect(404);
}

async fn tags_crud_and_cascade(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app
        .post(
            "/api/admin/tags",
            json!({"type": "simple", "value": "Team-Red"}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(created["value"], "Team-Red");
    app.post(
        "/api/admin/tags",
        json!({"type": "simple", "value": "Team-Red"}),
    )
    .await
    .expect(409);
    app.post(
        "/api/admin/tags",
        json!({"type": "missing", "value": "Team-Red"}),
    )
    .await
    .expect(404);
    app.post("/api/admin/tags", json!({"type": "simple", "value": "x"}))
        .await
        .expect(400);
    let all = app.get("/api/admin/tags").await.expect(200).json;
    assert_eq!(all["tags"].as_array().expect("tags").len(), 1);
    let of_type = app.get("/api/admin/tags/simple").await.expect(200).json;
    assert_eq!(of_type["tags"][0]["value"], "Team-Red");
    assert_eq!(
        app.get("/api/admin/tags/other").await.expect(200).json["tags"],
        json!([])
    );

    app.create_toggle("red").await;
    app.post(
        "/api/admin/features/red/tags",
        json!({"type": "simple", "value": "Team-Red"}),
    )
    .await
    .expect(201);
    // Values travel percent-encoded in paths.
    app.delete("/api/admin/tags/simple/Team-Red")
        .await
        .expect(200);
    assert_eq!(
        app.get("/api/admin/features/red").await.json["tags"],
        json!([])
    );
    app.delete("/api/admin/tags/simple/Team-Red")
        .await
        .expect(404);
    app.post(
        "/api/admin/tags",
        json!({"type": "simple", "value": "with space"}),
    )
    .await
    .expect(201);
    app.get("/api/admin/tags/simple/with%20space")
        .await
        .expect(200);
}
