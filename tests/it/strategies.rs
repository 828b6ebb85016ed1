//! Strategy definitions (API-FACTS §2).

use serde_json::json;

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    a_strategy_in_use_stays,
    built_in_strategies_are_listed,
    custom_strategy_lifecycle,
    feature_types_are_listed
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

async fn built_in_strategies_are_listed(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.get("/api/admin/strategies").await.expect(200).json;
    assert_eq!(list["version"], 1);
    let names: Vec<_> = list["strategies"]
        .as_array()
        .expect("strategies")
        .iter()
        .map(|s| s["name"].as_str().expect("name").to_string())
        .collect();
    for name in [
        "applicationHostname",
        "default",
        "flexibleRollout",
        "gradualRolloutRandom",
        "gradualRolloutSessionId",
        "gradualRolloutUserId",
        "remoteAddress",
        "userWithId",
    ] {
        assert!(
            names.contains(&name.to_string()),
            "{name} missing from {names:?}"
        );
    }
    let default = app
        .get("/api/admin/strategies/default")
        .await
        .expect(200)
        .json;
    assert_eq!(
        default,
        json!({"name": "default", "editable": false, "description": "Default on/off strategy.", "parameters": [], "deprecated": false})
    );
    app.get("/api/admin/strategies/nope")
        .await
        .expect(404)
        .error_message();
    // Built-ins are read-only; `default` cannot be deprecated.
    app.put(
        "/api/admin/strategies/default",
        json!({"name": "default", "parameters": []}),
    )
    .await
    .expect(403);
    app.delete("/api/admin/strategies/userWithId")
        .await
        .expect(403);
    app.post_empty("/api/admin/strategies/default/deprecate")
        .await
        .expect(403);
    let deprecated = app
        .post_empty("/api/admin/strategies/userWithId/deprecate")
        .await
        .expect(200)
        .json;
    assert_eq!(deprecated["deprecated"], true);
    app.post_empty("/api/admin/strategies/userWithId/reactivate")
        .await
        .expect(200);
    assert_eq!(
        app.get("/api/admin/strategies/userWithId").await.json["deprecated"],
        false
    );
}

async fn custom_strategy_lifecycle(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let body = json!({"name": "country", "description": "Enable for countries",
        "parameters": [{"name": "countries", "type": "list", "description": "List of countries", "required": true}]});
    let created = app
        .post("/api/admin/strategies", body.clone())
        .await
        .expect(201)
        .json;
    assert_eq!(created["editable"], true);
    app.post("/api/admin/strategies", body)
        .await
        .expect(409)
        .error_message();
    app.post(
        "/api/admin/strategies",
        json!({"name": "x y", "parameters": []}),
    )
    .await
    .expect(400);
    app.post("/api/admin/strategies", json!({"name": "noparams"}))
        .await
        .expect(400);
    app.post(
        "/api/admin/strategies",
        json!({"name": "badparam", "parameters": [{"name": "p"}]}),
    )
    .await
    .expect(400);

    let updated = app
        .put(
            "/api/admin/strategies/country",
            json!({"name": "country", "description": "Countries", "parameters": []}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(updated["description"], "Countries");
    app.put(
        "/api/admin/strategies/country",
        json!({"name": "other", "parameters": []}),
    )
    .await
    .expect(400);
    app.put("/api/admin/strategies/ghost", json!({"parameters": []}))
        .await
        .expect(404);

    app.post_empty("/api/admin/strategies/country/deprecate")
        .await
        .expect(200);
    app.post_empty("/api/admin/strategies/ghost/deprecate")
        .await
        .expect(404);
    app.post_empty("/api/admin/strategies/ghost/reactivate")
        .await
        .expect(404);
    app.delete("/api/admin/strategies/country")
        .await
        .expect(200);
    app.get("/api/admin/strategies/country").await.expect(404);
    app.delete("/api/admin/strategies/country")
        .await
        .expect(404);
}

async fn feature_types_are_listed(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let types = app.get("/api/admin/feature-types").await.expect(200).json;
    assert_eq!(types["version"], 1);
    let ids: Vec<_> = types["types"]
        .as_array()
        .expect("types")
        .iter()
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(
        ids,
        [
            json!("release"),
            json!("experiment"),
            json!("operational"),
            json!("kill-switch"),
            json!("permission")
        ]
    );
    assert_eq!(types["types"][2]["lifetimeDays"], 7);
    assert_eq!(types["types"][3]["lifetimeDays"], json!(null));
}

/// A definition active toggles use cannot be deleted, neither directly nor by a `drop`
/// import; once they are archived it can.
async fn a_strategy_in_use_stays(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/strategies",
        json!({"name": "custom", "parameters": []}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/features",
        json!({"name": "uses.custom", "strategies": [{"name": "custom"}]}),
    )
    .await
    .expect(200);
    let message = app
        .delete("/api/admin/strategies/custom")
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("uses.custom"), "{message}");
    let reply = app
        .post(
            "/api/admin/state/import?drop=true",
            json!({"strategies": []}),
        )
        .await
        .expect(400);
    assert_eq!(
        reply.json["details"][0]["path"], "strategies",
        "{}",
        reply.json
    );
    app.delete("/api/admin/features/uses.custom")
        .await
        .expect(200);
    app.delete("/api/admin/strategies/custom").await.expect(200);
}
