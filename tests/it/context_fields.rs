//! Context fields (spec §4.6, API-FACTS §13.2): built-ins, the endpoints at both paths, their
//! statuses, the refusals that protect constraints, and the events.

use serde_json::{json, Value};

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    built_in_fields_are_listed_and_cannot_be_deleted,
    context_field_lifecycle_at_both_paths,
    fields_that_constraints_use_are_protected,
    context_field_writes_record_events
);

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("a bare array")
        .iter()
        .map(|f| f["name"].as_str().expect("name"))
        .collect()
}

async fn built_in_fields_are_listed_and_cannot_be_deleted(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.get("/api/admin/context").await.expect(200).json;
    assert_eq!(
        names(&list),
        [
            "appName",
            "currentTime",
            "environment",
            "remoteAddress",
            "sessionId",
            "tenantId",
            "userId"
        ]
    );
    let environment = app
        .get("/api/admin/context/environment")
        .await
        .expect(200)
        .json;
    assert_eq!(environment["sortOrder"], 0);
    assert_eq!(environment["stickiness"], false);
    assert_eq!(
        environment["description"],
        "Allows you to constrain on application environment"
    );
    assert!(environment["createdAt"].is_string());
    assert!(
        environment.get("legalValues").is_none(),
        "no legal values, no key: {environment}"
    );
    for name in ["appName", "environment", "userId", "currentTime"] {
        app.delete(&format!("/api/admin/context/{name}"))
            .await
            .expect(409)
            .error_message();
    }
    // Built-ins can be described and given legal values.
    app.put(
        "/api/admin/context/environment",
        json!({"name": "environment", "legalValues": ["production", "staging"]}),
    )
    .await
    .expect(200);
    let environment = app
        .get("/api/admin/context/environment")
        .await
        .expect(200)
        .json;
    assert_eq!(environment["legalValues"], json!(["production", "staging"]));
    assert_eq!(environment["sortOrder"], 0, "sort order kept");
}

async fn context_field_lifecycle_at_both_paths(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app
        .post(
            "/api/admin/context",
            json!({"name": "region", "description": "where", "legalValues": ["eu", "us"],
                   "stickiness": true}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(created["name"], "region");
    assert_eq!(created["sortOrder"], 10, "the default sort order");
    assert_eq!(created["legalValues"], json!(["eu", "us"]));
    assert_eq!(created["stickiness"], true);
    // Duplicates: 409, also from the validate route.
    app.post("/api/admin/context", json!({"name": "region"}))
        .await
        .expect(409)
        .error_message();
    app.post("/api/admin/context/validate", json!({"name": "region"}))
        .await
        .expect(409);
    app.post("/api/admin/context/validate", json!({"name": "plan"}))
        .await
        .expect(200);
    // Bad input: every problem named, nothing written.
    let bad = app
        .post(
            "/api/admin/context",
            json!({"name": "a b", "legalValues": ["x", "x"], "description": "d".repeat(251)}),
        )
        .await
        .expect(400);
    bad.error_message();
    let paths: Vec<&str> = bad.json["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].as_str().expect("path"))
        .collect();
    assert_eq!(paths, ["name", "description", "legalValues[1]"]);
    app.post(
        "/api/admin/context",
        json!({"name": "plan", "legalValues": [{"value": "free"}]}),
    )
    .await
    .expect(400)
    .error_message();
    app.post(
        "/api/admin/context",
        json!({"name": "plan", "icon": "star"}),
    )
    .await
    .expect(400);
    app.get("/api/admin/context/plan").await.expect(404);
    // Update at the reference path and the spec's path.
    let updated = app
        .put(
            "/api/admin/context/region",
            json!({"name": "region", "legalValues": ["eu", "us", "apac"], "sortOrder": 3,
                   "createdAt": "2020-01-01T00:00:00Z"}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(updated["description"], "where", "omitted description kept");
    assert_eq!(updated["sortOrder"], 3);
    assert_eq!(updated["stickiness"], false, "PUT replaces stickiness");
    assert_eq!(updated["createdAt"], created["createdAt"]);
    app.put(
        "/api/context/region",
        json!({"description": "the customer's region", "legalValues": ["eu", "us", "apac"]}),
    )
    .await
    .expect(200);
    let fetched = app.get("/api/admin/context/region").await.expect(200).json;
    assert_eq!(fetched["description"], "the customer's region");
    assert_eq!(fetched["sortOrder"], 3);
    app.put("/api/context/region", json!({"name": "other"}))
        .await
        .expect(400);
    // Unknown names: 404 with the JSON body everywhere.
    for reply in [
        app.get("/api/admin/context/nope").await,
        app.put("/api/admin/context/nope", json!({})).await,
        app.put("/api/context/nope", json!({})).await,
        app.delete("/api/admin/context/nope").await,
    ] {
        reply.expect(404).error_message();
    }
    app.delete("/api/admin/context/region").await.expect(200);
    app.get("/api/admin/context/region").await.expect(404);
}

async fn fields_that_constraints_use_are_protected(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/context",
        json!({"name": "region", "legalValues": ["eu", "us"]}),
    )
    .await
    .expect(201);
    for name in ["r.one", "r.two"] {
        app.post(
            "/api/admin/features",
            json!({"name": name, "strategies": [{"name": "default", "constraints": [
                {"contextName": "region", "operator": "IN", "values": ["eu"]}]}]}),
        )
        .await
        .expect(200);
    }
    let message = app
        .delete("/api/admin/context/region")
        .await
        .expect(409)
        .error_message();
    assert!(
        message.contains("2 toggles") && message.contains("r.one") && message.contains("r.two"),
        "{message}"
    );
    // Legal values that would exclude a value in use are refused, naming the toggles.
    let message = app
        .put("/api/admin/context/region", json!({"legalValues": ["us"]}))
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("r.one"), "{message}");
    app.put(
        "/api/admin/context/region",
        json!({"legalValues": ["eu", "us", "apac"]}),
    )
    .await
    .expect(200);
    // Archiving the toggles frees the field; a toggle whose field is gone cannot be revived
    // until the field exists again.
    app.delete("/api/admin/features/r.one").await.expect(200);
    app.delete("/api/admin/features/r.two").await.expect(200);
    app.delete("/api/admin/context/region").await.expect(200);
    let message = app
        .post_empty("/api/admin/archive/revive/r.one")
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("region"), "{message}");
    app.post("/api/admin/context", json!({"name": "region"}))
        .await
        .expect(201);
    app.post_empty("/api/admin/archive/revive/r.one")
        .await
        .expect(200);
    // A field called `validate` is as addressable as any other.
    app.post("/api/admin/context", json!({"name": "validate"}))
        .await
        .expect(201);
    app.get("/api/admin/context/validate").await.expect(200);
    app.put("/api/admin/context/validate", json!({"description": "v"}))
        .await
        .expect(200);
    app.delete("/api/admin/context/validate").await.expect(200);
}

async fn context_field_writes_record_events(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/context",
        json!({"name": "region", "description": "d"}),
    )
    .await
    .expect(201);
    app.put("/api/context/region", json!({"legalValues": ["eu"]}))
        .await
        .expect(200);
    app.delete("/api/admin/context/region").await.expect(200);
    app.delete("/api/admin/context/userId").await.expect(409);
    let events = app.get("/api/admin/events").await.expect(200).json;
    let field_events: Vec<&Value> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("context-field-"))
                && e["createdBy"] != "migration"
        })
        .collect();
    let kinds: Vec<&str> = field_events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect();
    assert_eq!(
        kinds,
        [
            "context-field-deleted",
            "context-field-updated",
            "context-field-created"
        ]
    );
    assert_eq!(field_events[0]["data"], json!({"name": "region"}));
    assert_eq!(field_events[1]["data"]["legalValues"], json!(["eu"]));
    assert_eq!(field_events[1]["data"]["description"], "d");
    assert_eq!(
        field_events[1]["diffs"],
        json!([{"kind": "N", "path": ["legalValues"], "rhs": ["eu"]}])
    );
    assert_eq!(field_events[2]["data"]["name"], "region");
}
