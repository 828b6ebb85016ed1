//! Toggle lifecycle through the admin API (spec §3, §4.2, §7).

use serde_json::json;

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    create_returns_200_with_defaults,
    duplicate_names_are_refused_with_403,
    invalid_toggles_are_refused_with_400,
    update_replaces_the_toggle,
    toggle_and_stale_transitions,
    archive_and_revive,
    unknown_toggles_are_404,
    variants_are_validated,
    list_orders_by_name_and_filters,
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

async fn create_returns_200_with_defaults(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let body = app
        .post(
            "/api/admin/features/",
            json!({"name": "demo.a", "description": "d", "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(body["name"], "demo.a");
    assert_eq!(body["type"], "release");
    assert_eq!(body["project"], "default");
    assert_eq!(body["enabled"], false);
    assert_eq!(body["stale"], false);
    assert_eq!(body["variants"], json!([]));
    assert_eq!(body["tags"], json!([]));
    assert!(body["createdAt"].is_string());
    assert!(body.get("version").is_none());

    let fetched = app.get("/api/admin/features/demo.a").await.expect(200).json;
    assert_eq!(fetched["description"], "d");
    // Every strategy has an id (what the per-environment routes address it by).
    let strategy = &fetched["strategies"][0];
    assert!(
        strategy["id"].as_str().is_some_and(|id| !id.is_empty()),
        "{strategy}"
    );
    assert_eq!(strategy["name"], "default");
    assert_eq!(strategy["parameters"], json!({}));
    assert_eq!(strategy.as_object().map(|o| o.len()), Some(3), "{strategy}");

    // Explicit values are kept.
    let full = app
        .post(
            "/api/admin/features",
            json!({"name": "demo.b", "type": "killswitch", "enabled": true, "stale": true,
                   "strategies": [{"name": "userWithId", "parameters": {"userIds": "1,2"},
                                   "constraints": [{"contextName": "environment", "operator": "IN", "values": ["prod"]}]}]}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(full["type"], "killswitch");
    assert_eq!(full["enabled"], true);
    assert_eq!(full["stale"], true);
    assert_eq!(full["strategies"][0]["constraints"][0]["operator"], "IN");
}

async fn duplicate_names_are_refused_with_403(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("dup").await;
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "dup", "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(403);
    assert!(reply.error_message().contains("already exists"));

    // An archived toggle's name is not reusable either.
    app.delete("/api/admin/features/dup").await.expect(200);
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "dup", "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(403);
    assert!(reply.error_message().contains("archived"));

    // validate endpoint agrees
    app.post("/api/admin/features/validate", json!({"name": "dup"}))
        .await
        .expect(403);
    app.post("/api/admin/features/validate", json!({"name": "fresh"}))
        .await
        .expect(200);
    app.post("/api/admin/features/validate", json!({"name": "a b"}))
        .await
        .expect(400);
}

async fn invalid_toggles_are_refused_with_400(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["some example", "some$example", "me&me", "o2%ae", "x", ""] {
        let reply = app
            .post(
                "/api/admin/features",
                json!({"name": name, "strategies": [{"name": "default"}]}),
            )
            .await
            .expect(400);
        assert_eq!(reply.json["details"][0]["path"], "name", "{name}");
    }
    for ok in ["com.example", "com.example-company.someFeature.123", "123"] {
        app.post(
            "/api/admin/features",
            json!({"name": ok, "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(200);
    }
    // strategies are required, at least one
    let reply = app
        .post("/api/admin/features", json!({"name": "nostrat"}))
        .await
        .expect(400);
    assert_eq!(reply.json["details"][0]["path"], "strategies");
    app.post(
        "/api/admin/features",
        json!({"name": "nostrat", "strategies": []}),
    )
    .await
    .expect(400);
    // wrong types name their path
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "t", "enabled": "yes", "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(400);
    assert_eq!(reply.json["details"][0]["path"], "enabled");
    // constraint operator outside IN/NOT_IN
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "c1", "strategies": [{"name": "default", "constraints": [{"contextName": "userId", "operator": "LIKE", "values": ["1"]}]}]}),
        )
        .await
        .expect(400);
    assert_eq!(
        reply.json["details"][0]["path"],
        "strategies[0].constraints[0].operator"
    );
    // nothing half-written
    let list = app.get("/api/admin/features").await.expect(200).json;
    let names: Vec<_> = list["features"]
        .as_array()
        .expect("features")
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(
        names,
        vec![
            json!("123"),
            json!("com.example"),
            json!("com.example-company.someFeature.123")
        ]
    );
}

async fn update_replaces_the_toggle(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/features",
        json!({"name": "upd", "description": "before", "enabled": true, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let body = app
        .put(
            "/api/admin/features/upd",
            json!({"name": "upd", "type": "operational", "strategies": [{"name": "flexibleRollout", "parameters": {"rollout": 50}}],
                   "variants": [{"name": "blue", "weight": 1000, "payload": {"type": "string", "value": "b"}}]}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(
        body["description"], "before",
        "an omitted description is kept"
    );
    assert_eq!(
        body["enabled"], false,
        "PUT replaces: omitted enabled is false"
    );
    assert_eq!(body["type"], "operational");
    assert_eq!(body["strategies"][0]["parameters"]["rollout"], "50");
    assert_eq!(body["variants"][0]["weightType"], "variable");
    assert_eq!(body["variants"][0]["stickiness"], "default");
    assert_eq!(body["variants"][0]["overrides"], json!([]));

    // The body's name must match the path.
    app.put(
        "/api/admin/features/upd",
        json!({"name": "other", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(400);
    app.put(
        "/api/admin/features/missing",
        json!({"strategies": [{"name": "default"}]}),
    )
    .await
    .expect(404)
    .error_message();
    app.put("/api/admin/features/upd", json!({"strategies": []}))
        .await
        .expect(400);
}

async fn toggle_and_stale_transitions(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("flip").await;
    let on = app
        .post_empty("/api/admin/features/flip/toggle/on")
        .await
        .expect(200)
        .json;
    assert_eq!(on["enabled"], true);
    assert_eq!(on["name"], "flip");
    // idempotent
    app.post_empty("/api/admin/features/flip/toggle/on")
        .await
        .expect(200);
    let off = app
        .post_empty("/api/admin/features/flip/toggle/off")
        .await
        .expect(200)
        .json;
    assert_eq!(off["enabled"], false);
    let stale = app
        .post_empty("/api/admin/features/flip/stale/on")
        .await
        .expect(200)
        .json;
    assert_eq!(stale["stale"], true);
    let fresh = app
        .post_empty("/api/admin/features/flip/stale/off")
        .await
        .expect(200)
        .json;
    assert_eq!(fresh["stale"], false);
    let current = app.get("/api/admin/features/flip").await.expect(200).json;
    assert_eq!(
        (current["enabled"].clone(), current["stale"].clone()),
        (json!(false), json!(false))
    );
}

async fn archive_and_revive(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/features",
        json!({"name": "arch", "enabled": true, "strategies": [{"name": "userWithId", "parameters": {"userIds": "7"}}]}),
    )
    .await
    .expect(200);
    app.delete("/api/admin/features/arch").await.expect(200);
    app.get("/api/admin/features/arch").await.expect(404);
    app.delete("/api/admin/features/arch").await.expect(404);
    let active = app.get("/api/admin/features").await.expect(200).json;
    assert_eq!(active["features"], json!([]));
    let client = app.client_features("", None).await.expect(200).json;
    assert_eq!(client["features"], json!([]));

    let archive = app
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json;
    assert_eq!(archive["version"], 1);
    let item = &archive["features"][0];
    assert_eq!(item["name"], "arch");
    assert_eq!(item["enabled"], false);
    assert_eq!(
        item["strategy"], "userWithId",
        "legacy fields on archive listings"
    );
    assert_eq!(item["parameters"], json!({"userIds": "7"}));

    // Writes to an archived toggle are 404.
    app.post_empty("/api/admin/features/arch/toggle/on")
        .await
        .expect(404);

    // Revive by body (spec form).
    let revived = app
        .post("/api/admin/archive/revive", json!({"name": "arch"}))
        .await
        .expect(200)
        .json;
    assert_eq!(revived["name"], "arch");
    assert_eq!(revived["enabled"], false);
    app.get("/api/admin/features/arch").await.expect(200);
    assert_eq!(
        app.get("/api/admin/archive/features").await.json["features"],
        json!([])
    );
    // Reviving a toggle that is not archived.
    app.post("/api/admin/archive/revive", json!({"name": "arch"}))
        .await
        .expect(404);
    app.post("/api/admin/archive/revive", json!({}))
        .await
        .expect(400);

    // Revive by path (reference server form).
    app.delete("/api/admin/features/arch").await.expect(200);
    app.post_empty("/api/admin/archive/revive/arch")
        .await
        .expect(200);
    app.get("/api/admin/features/arch").await.expect(200);
}

async fn unknown_toggles_are_404(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for path in ["toggle/on", "toggle/off", "stale/on", "stale/off"] {
        app.post_empty(&format!("/api/admin/features/nope/{path}"))
            .await
            .expect(404)
            .error_message();
    }
    app.get("/api/admin/features/nope")
        .await
        .expect(404)
        .error_message();
    app.delete("/api/admin/features/nope")
        .await
        .expect(404)
        .error_message();
    app.get("/api/client/features/nope")
        .await
        .expect(404)
        .error_message();
}

async fn variants_are_validated(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("var").await;
    let put = |variants: serde_json::Value| {
        app.put(
            "/api/admin/features/var",
            json!({"strategies": [{"name": "default"}], "variants": variants}),
        )
    };
    put(json!([{"name": "a", "weight": 500}, {"name": "a", "weight": 500}]))
        .await
        .expect(400);
    let reply = put(json!([{"name": "a", "weight": 1000, "weightType": "odd"}]))
        .await
        .expect(400);
    assert_eq!(reply.json["details"][0]["path"], "variants[0].weightType");
    put(json!([{"name": "a", "weight": 1001}]))
        .await
        .expect(400);
    put(json!([{"name": "a"}])).await.expect(400);
    put(json!([{"name": "a", "weight": 10, "overrides": "x"}]))
        .await
        .expect(400);
    let ok = put(json!([
        {"name": "a", "weight": 500, "weightType": "fix", "stickiness": "userId",
         "overrides": [{"contextName": "userId", "values": ["1"]}]},
        {"name": "b", "weight": 500}
    ]))
    .await
    .expect(200)
    .json;
    assert_eq!(ok["variants"][0]["weightType"], "fix");
    assert_eq!(ok["variants"][0]["overrides"][0]["contextName"], "userId");
    let client = app.client_features("", None).await.expect(200).json;
    assert_eq!(client["features"][0]["variants"][1]["name"], "b");
}

async fn list_orders_by_name_and_filters(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["b.two", "a.one", "c.three"] {
        app.create_toggle(name).await;
    }
    app.post(
        "/api/admin/projects",
        json!({"id": "other", "name": "Other"}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/features",
        json!({"name": "p.four", "project": "other", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let list = app.get("/api/admin/features").await.expect(200).json;
    assert_eq!(list["version"], 2);
    let names: Vec<_> = list["features"]
        .as_array()
        .expect("list")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect();
    assert_eq!(names, ["a.one", "b.two", "c.three", "p.four"]);
    let by_project = app
        .get("/api/admin/features?project=other")
        .await
        .expect(200)
        .json;
    assert_eq!(by_project["features"].as_array().expect("list").len(), 1);
    let by_prefix = app
        .get("/api/admin/features?namePrefix=b.")
        .await
        .expect(200)
        .json;
    assert_eq!(by_prefix["features"][0]["name"], "b.two");
    app.get("/api/admin/features?tag[]=simple")
        .await
        .expect(400)
        .error_message();
    app.get("/api/admin/features?project=a%20b")
        .await
        .expect(400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toggle_named_validate_stays_addressable() {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    app.create_toggle("validate").await;
    app.get("/api/admin/features/validate").await.expect(200);
    app.post_empty("/api/admin/features/validate/toggle/on")
        .await
        .expect(200);
    app.put(
        "/api/admin/features/validate",
        json!({"strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    // The name check itself still answers at the same path.
    app.post("/api/admin/features/validate", json!({"name": "validate"}))
        .await
        .expect(403);
    app.post("/api/admin/features/other", json!({"name": "x"}))
        .await
        .expect(405);
    app.delete("/api/admin/features/validate").await.expect(200);
    app.post("/api/admin/tag-types", json!({"name": "validate"}))
        .await
        .expect(201);
    app.get("/api/admin/tag-types/validate").await.expect(200);
    app.delete("/api/admin/tag-types/validate")
        .await
        .expect(200);
    app.post(
        "/api/admin/features",
        json!({"name": "..", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(400);
}
