//! Projects (spec §4.5, API-FACTS §13.1): the endpoints, their statuses, the project rule on
//! toggles, moving toggles between projects, and the events.

use serde_json::{json, Value};

use crate::common::{feature_names, Backend, TestApp};
use crate::conformance;

conformance!(
    default_project_exists_and_cannot_be_deleted,
    project_lifecycle_at_both_paths,
    toggles_must_name_an_existing_project,
    deleting_a_project_is_refused_while_it_has_active_toggles,
    project_writes_record_events
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

/// A toggle may name a project another replica created a moment ago: references are checked
/// against the state the write is decided on, not this replica's snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_made_on_another_replica_can_be_used_at_once() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    for i in 0..30 {
        a.post(
            "/api/admin/projects",
            json!({"id": format!("p{i}"), "name": "P"}),
        )
        .await
        .expect(201);
        a.post("/api/admin/context", json!({"name": format!("f{i}")}))
            .await
            .expect(201);
        b.post(
            "/api/admin/features",
            json!({"name": format!("t{i}"), "project": format!("p{i}"), "strategies": [
                {"name": "default", "constraints": [
                    {"contextName": format!("f{i}"), "operator": "IN", "values": ["x"]}]}]}),
        )
        .await
        .expect(200);
    }
}

/// A store written before projects and context fields were checked: its toggles name a
/// project and a context field that have no records. A replica of this version adopts both
/// when it starts, so those toggles stay editable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_before_projects_adopts_what_its_toggles_name() {
    let backend = Backend::redis();
    let redis = backend.redis_server();
    let legacy = json!({"name": "legacy.one", "description": "", "type": "release",
        "project": "x", "enabled": true, "stale": false,
        "strategies": [{"name": "default", "parameters": {}, "constraints": [
            {"contextName": "my region", "operator": "IN", "values": ["eu"]}]}],
        "variants": [], "createdAt": "2020-01-01T00:00:00Z", "tags": []});
    // What the previous version left: generation 1 of the built-ins, no projects or fields.
    redis.cli(&["HSET", "{test}:counters", "seeded", "1"]);
    redis.cli(&["HSET", "{test}:features", "legacy.one", &legacy.to_string()]);
    redis.cli(&["SET", "{test}:version", "1"]);
    let app = TestApp::spawn(&backend).await;
    let projects = app.get("/api/admin/projects").await.expect(200).json;
    assert_eq!(project_ids(&projects), ["default", "x"]);
    app.get("/api/admin/context/my%20region").await.expect(200);
    // Adopted ids an earlier version allowed (one character, a space) can still be updated.
    app.put("/api/admin/projects/x", json!({"name": "The X project"}))
        .await
        .expect(200);
    app.put(
        "/api/admin/context/my%20region",
        json!({"legalValues": ["eu", "us"]}),
    )
    .await
    .expect(200);
    app.get("/api/admin/context/environment").await.expect(200);
    app.put(
        "/api/admin/features/legacy.one",
        json!({"project": "x", "enabled": true, "strategies": [{"name": "default",
            "constraints": [{"contextName": "my region", "operator": "IN", "values": ["us"]}]}]}),
    )
    .await
    .expect(200);
    // Generation 1 is not written again: no second set of built-in strategies' events.
    let events = app.get("/api/admin/events").await.expect(200).json;
    assert!(
        !events["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["type"] == "strategy-created"),
        "{events}"
    );
}

/// The ids of a project listing, in order.
fn project_ids(list: &Value) -> Vec<String> {
    list["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .map(|p| p["id"].as_str().expect("id").to_string())
        .collect()
}

async fn default_project_exists_and_cannot_be_deleted(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.get("/api/admin/projects").await.expect(200).json;
    assert_eq!(list["version"], 1);
    assert_eq!(project_ids(&list), ["default"]);
    let default = &list["projects"][0];
    assert_eq!(default["name"], "Default");
    assert_eq!(default["description"], "Default project");
    assert!(default["createdAt"].is_string(), "{default}");
    let message = app
        .delete("/api/admin/projects/default")
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("default"), "{message}");
    app.get("/api/admin/projects/default").await.expect(200);
}

async fn project_lifecycle_at_both_paths(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app
        .post(
            "/api/admin/projects",
            json!({"id": "web", "name": "Web shop", "description": "storefront"}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(created["id"], "web");
    assert_eq!(created["name"], "Web shop");
    assert!(created["createdAt"].is_string());
    // Duplicate id: 409 with the JSON error body.
    app.post("/api/admin/projects", json!({"id": "web", "name": "Again"}))
        .await
        .expect(409)
        .error_message();
    // The reference's validate route.
    app.post("/api/admin/projects/validate", json!({"id": "web"}))
        .await
        .expect(409);
    app.post("/api/admin/projects/validate", json!({"id": "fresh"}))
        .await
        .expect(200);
    app.post("/api/admin/projects/validate", json!({"id": "a b"}))
        .await
        .expect(400);
    // Bad input: every problem named, nothing written.
    let bad = app
        .post("/api/admin/projects", json!({"id": "a b", "owner": "me"}))
        .await
        .expect(400);
    bad.error_message();
    let paths: Vec<&str> = bad.json["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].as_str().expect("path"))
        .collect();
    assert_eq!(paths, ["owner", "id", "name"], "{}", bad.json);
    // Update at the reference path and at the spec's path (no `admin` segment).
    let updated = app
        .put(
            "/api/admin/projects/web",
            json!({"id": "web", "name": "Web", "createdAt": "2020-01-01T00:00:00Z"}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(updated["name"], "Web");
    assert_eq!(
        updated["description"], "storefront",
        "omitted description kept"
    );
    assert_eq!(updated["createdAt"], created["createdAt"]);
    app.put(
        "/api/projects/web",
        json!({"id": "web", "name": "Web store", "description": ""}),
    )
    .await
    .expect(200);
    let fetched = app.get("/api/admin/projects/web").await.expect(200).json;
    assert_eq!(fetched["name"], "Web store");
    assert_eq!(fetched["description"], "");
    // The body's id must match the path.
    app.put("/api/projects/web", json!({"id": "api", "name": "x"}))
        .await
        .expect(400);
    // The spec path needs the same identification as the admin API.
    let anonymous = crate::common::send(
        app.anonymous(reqwest::Method::PUT, "/api/projects/web")
            .json(&json!({"name": "x"})),
    )
    .await;
    assert_eq!(anonymous.status, 401);
    // Listed by name.
    app.post(
        "/api/admin/projects",
        json!({"id": "api", "name": "Backend API"}),
    )
    .await
    .expect(201);
    let list = app.get("/api/admin/projects").await.expect(200).json;
    assert_eq!(project_ids(&list), ["api", "default", "web"]);
    // Unknown ids: 404 everywhere.
    for reply in [
        app.get("/api/admin/projects/nope").await,
        app.put("/api/admin/projects/nope", json!({"name": "x"}))
            .await,
        app.put("/api/projects/nope", json!({"name": "x"})).await,
        app.delete("/api/admin/projects/nope").await,
    ] {
        reply.expect(404).error_message();
    }
    app.delete("/api/admin/projects/api").await.expect(200);
    app.get("/api/admin/projects/api").await.expect(404);
}

async fn toggles_must_name_an_existing_project(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "t.one", "project": "nope", "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(400);
    reply.error_message();
    assert_eq!(
        reply.json["details"][0]["path"], "project",
        "{}",
        reply.json
    );
    app.get("/api/admin/features/t.one").await.expect(404);
    // Without a project a toggle belongs to `default`.
    assert_eq!(app.create_toggle("t.one").await["project"], "default");
    app.put(
        "/api/admin/features/t.one",
        json!({"project": "nope", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(400);
    // Moving a toggle between projects is an update.
    app.post("/api/admin/projects", json!({"id": "web", "name": "Web"}))
        .await
        .expect(201);
    app.put(
        "/api/admin/features/t.one",
        json!({"project": "web", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let moved = app.get("/api/admin/features/t.one").await.expect(200).json;
    assert_eq!(moved["project"], "web");
    let events = app.get("/api/admin/events/t.one").await.expect(200).json;
    let latest = &events["events"][0];
    assert_eq!(latest["type"], "feature-updated");
    assert_eq!(latest["data"]["project"], "web");
    assert!(
        latest["diffs"]
            .as_array()
            .expect("diffs")
            .iter()
            .any(|d| d["path"] == json!(["project"]) && d["lhs"] == "default" && d["rhs"] == "web"),
        "{latest}"
    );
    // The project filter (OR over repeated values) on both lists.
    app.create_toggle("t.two").await;
    // The client documents lag a write by at most one build.
    app.settle().await;
    for path in ["/api/admin/features", "/api/client/features"] {
        let only_web = app.get(&format!("{path}?project=web")).await.expect(200);
        assert_eq!(feature_names(only_web.json), ["t.one"]);
        let both = app
            .get(&format!("{path}?project=web&project=default"))
            .await
            .expect(200);
        assert_eq!(feature_names(both.json), ["t.one", "t.two"]);
    }
}

async fn deleting_a_project_is_refused_while_it_has_active_toggles(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post("/api/admin/projects", json!({"id": "web", "name": "Web"}))
        .await
        .expect(201);
    for name in ["w.one", "w.two", "w.gone"] {
        app.post(
            "/api/admin/features",
            json!({"name": name, "project": "web", "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(200);
    }
    app.delete("/api/admin/features/w.gone").await.expect(200);
    let message = app
        .delete("/api/admin/projects/web")
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("2 active toggles"), "{message}");
    app.delete("/api/admin/features/w.one").await.expect(200);
    let message = app
        .delete("/api/admin/projects/web")
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("1 active toggle;"), "{message}");
    // A project called `validate` is as addressable as any other.
    app.post(
        "/api/admin/projects",
        json!({"id": "validate", "name": "V"}),
    )
    .await
    .expect(201);
    app.get("/api/admin/projects/validate").await.expect(200);
    app.put("/api/admin/projects/validate", json!({"name": "V2"}))
        .await
        .expect(200);
    app.delete("/api/admin/projects/validate").await.expect(200);
    app.delete("/api/admin/features/w.two").await.expect(200);
    // Only archived toggles are left: they move to `default` and can still be revived.
    app.delete("/api/admin/projects/web").await.expect(200);
    app.get("/api/admin/projects/web").await.expect(404);
    // Each moved toggle's history shows the move.
    let history = app.get("/api/admin/events/w.gone").await.expect(200).json;
    assert_eq!(history["events"][0]["type"], "feature-updated");
    assert_eq!(history["events"][0]["data"]["project"], "default");
    let archived = app
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json;
    for toggle in archived["features"].as_array().expect("archive") {
        assert_eq!(toggle["project"], "default", "{toggle}");
    }
    app.post_empty("/api/admin/archive/revive/w.gone")
        .await
        .expect(200);
    let revived = app.get("/api/admin/features/w.gone").await.expect(200).json;
    assert_eq!(revived["project"], "default");
    // The revived toggle can be edited: its project exists.
    app.put(
        "/api/admin/features/w.gone",
        json!({"project": "default", "description": "back", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
}

async fn project_writes_record_events(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/projects",
        json!({"id": "web", "name": "Web", "description": "d"}),
    )
    .await
    .expect(201);
    app.put("/api/projects/web", json!({"name": "Web 2"}))
        .await
        .expect(200);
    app.post(
        "/api/admin/features",
        json!({"name": "w.one", "project": "web", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    app.delete("/api/admin/features/w.one").await.expect(200);
    app.delete("/api/admin/projects/web").await.expect(200);
    // A refused write records nothing.
    app.delete("/api/admin/projects/default").await.expect(409);
    let events = app.get("/api/admin/events").await.expect(200).json;
    let project_events: Vec<(&str, &Value)> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("project-"))
        })
        .filter(|e| e["createdBy"] != "migration")
        .map(|e| (e["type"].as_str().expect("type"), &e["data"]))
        .collect();
    assert_eq!(
        project_events,
        [
            (
                "project-deleted",
                &json!({"id": "web", "archivedTogglesMovedToDefault": ["w.one"]})
            ),
            (
                "project-updated",
                &json!({"id": "web", "name": "Web 2", "description": "d"})
            ),
            (
                "project-created",
                &json!({"id": "web", "name": "Web", "description": "d"})
            ),
        ]
    );
    let updated = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["type"] == "project-updated")
        .expect("project-updated");
    assert_eq!(
        updated["diffs"],
        json!([{"kind": "E", "path": ["name"], "lhs": "Web", "rhs": "Web 2"}])
    );
}
