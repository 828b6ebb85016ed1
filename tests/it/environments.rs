//! Environments (MODERN-MODEL §5): the registry, the Unleash 5–7 per-project toggle routes,
//! and that the 3.x API and the client API keep acting on `default` meanwhile.

use serde_json::{json, Value};

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    the_registry_is_seeded_and_managed,
    an_environment_in_use_cannot_be_deleted,
    toggles_are_configured_per_environment,
    strategies_per_environment_are_validated_and_ordered,
    other_environments_leave_default_and_the_client_api_alone
);

/// The names of an environment listing, in order.
fn names(list: &Value) -> Vec<String> {
    list["environments"]
        .as_array()
        .expect("environments")
        .iter()
        .map(|e| e["name"].as_str().expect("name").to_string())
        .collect()
}

/// The paths of a 400's details.
fn paths(reply: &Value) -> Vec<String> {
    reply["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].as_str().expect("path").to_string())
        .collect()
}

/// The `environments` entry of a project feature named `name`.
fn environment<'a>(feature: &'a Value, name: &str) -> &'a Value {
    feature["environments"]
        .as_array()
        .expect("environments")
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {feature}"))
}

async fn the_registry_is_seeded_and_managed(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.get("/api/admin/environments").await.expect(200).json;
    assert_eq!(list["version"], 1);
    assert_eq!(names(&list), ["default", "development", "production"]);
    let default = &list["environments"][0];
    assert_eq!(default["type"], "production");
    assert_eq!(default["protected"], true);
    assert_eq!(default["enabled"], true);
    assert_eq!(default["sortOrder"], 1);
    assert_eq!(default["enabledToggleCount"], 0);
    assert!(default["createdAt"].is_string(), "{default}");

    // Create (no limit on their number), 409 on a taken name, 400 naming every problem.
    let created = app
        .post(
            "/api/admin/environments",
            json!({"name": "staging", "type": "preproduction", "sortOrder": 150}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(created["name"], "staging");
    assert_eq!(created["protected"], false);
    assert_eq!(created["enabled"], true);
    app.post(
        "/api/admin/environments",
        json!({"name": "staging", "type": "test"}),
    )
    .await
    .expect(409)
    .error_message();
    let bad = app
        .post(
            "/api/admin/environments",
            json!({"name": "a b", "colour": "red"}),
        )
        .await
        .expect(400)
        .json;
    assert_eq!(paths(&bad), ["colour", "name", "type"], "{bad}");
    for i in 0..4 {
        app.post(
            "/api/admin/environments",
            json!({"name": format!("extra-{i}"), "type": "test"}),
        )
        .await
        .expect(201);
    }
    let list = app.get("/api/admin/environments").await.expect(200).json;
    assert_eq!(
        names(&list),
        [
            "extra-0",
            "extra-1",
            "extra-2",
            "extra-3",
            "default",
            "development",
            "staging",
            "production"
        ]
    );

    // Update at Unleash enterprise's path and at the plain one; the name is the path's.
    let updated = app
        .put(
            "/api/admin/environments/update/staging",
            json!({"type": "test", "sortOrder": 300}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(updated["type"], "test");
    assert_eq!(updated["sortOrder"], 300);
    assert_eq!(updated["createdAt"], created["createdAt"]);
    app.put(
        "/api/admin/environments/staging",
        json!({"name": "staging", "type": "preproduction"}),
    )
    .await
    .expect(200);
    app.put(
        "/api/admin/environments/staging",
        json!({"name": "other", "type": "test"}),
    )
    .await
    .expect(400);
    app.put(
        "/api/admin/environments/update/nowhere",
        json!({"type": "test"}),
    )
    .await
    .expect(404)
    .error_message();
    let fetched = app
        .get("/api/admin/environments/staging")
        .await
        .expect(200)
        .json;
    assert_eq!(fetched["type"], "preproduction");
    assert_eq!(fetched["sortOrder"], 300);
    app.get("/api/admin/environments/nowhere")
        .await
        .expect(404)
        .error_message();

    // On and off: 204; `default` may be switched off too (Unleash 7 allows it).
    app.post_empty("/api/admin/environments/staging/off")
        .await
        .expect(204);
    let fetched = app
        .get("/api/admin/environments/staging")
        .await
        .expect(200)
        .json;
    assert_eq!(fetched["enabled"], false);
    app.post_empty("/api/admin/environments/staging/on")
        .await
        .expect(204);
    app.post_empty("/api/admin/environments/default/off")
        .await
        .expect(204);
    app.post_empty("/api/admin/environments/default/on")
        .await
        .expect(204);
    app.post_empty("/api/admin/environments/nowhere/on")
        .await
        .expect(404);

    // Sort order: `{name: order}`, the others keep theirs.
    app.put(
        "/api/admin/environments/sort-order",
        json!({"production": -1, "development": 400}),
    )
    .await
    .expect(200);
    let list = app.get("/api/admin/environments").await.expect(200).json;
    assert_eq!(names(&list)[0], "production");
    assert_eq!(names(&list).last().map(String::as_str), Some("development"));
    let bad = app
        .put(
            "/api/admin/environments/sort-order",
            json!({"production": "first"}),
        )
        .await
        .expect(400)
        .json;
    assert_eq!(paths(&bad), ["production"]);
    app.put("/api/admin/environments/sort-order", json!({"nowhere": 1}))
        .await
        .expect(404);

    // Delete: an unused one goes, `default` is protected.
    app.delete("/api/admin/environments/extra-0")
        .await
        .expect(200);
    app.get("/api/admin/environments/extra-0").await.expect(404);
    app.delete("/api/admin/environments/default")
        .await
        .expect(409)
        .error_message();
    app.delete("/api/admin/environments/nowhere")
        .await
        .expect(404);

    let events = app.get("/api/admin/events").await.expect(200).json;
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    for kind in [
        "environment-created",
        "environment-updated",
        "environment-deleted",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
}

async fn an_environment_in_use_cannot_be_deleted(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/environments",
        json!({"name": "qa", "type": "test"}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/projects/default/features",
        json!({"name": "uses.qa"}),
    )
    .await
    .expect(201);
    app.post_empty("/api/admin/projects/default/features/uses.qa/environments/qa/on")
        .await
        .expect(200);
    let message = app
        .delete("/api/admin/environments/qa")
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("uses.qa"), "{message}");
    // Still refused while the toggle is archived (it could be revived).
    app.delete("/api/admin/projects/default/features/uses.qa")
        .await
        .expect(202);
    app.delete("/api/admin/environments/qa").await.expect(409);
    app.get("/api/admin/environments/qa").await.expect(200);
    // So is one an API token is scoped to.
    app.post(
        "/api/admin/environments",
        json!({"name": "staging", "type": "test"}),
    )
    .await
    .expect(201);
    let token = app
        .post(
            "/api/admin/api-tokens",
            json!({"tokenName": "sdk", "type": "backend", "environment": "staging"}),
        )
        .await
        .expect(201)
        .json;
    let message = app
        .delete("/api/admin/environments/staging")
        .await
        .expect(409)
        .error_message();
    assert!(message.contains("API token"), "{message}");
    let id = token["id"].as_str().map(str::to_string).unwrap_or_default();
    app.delete(&format!("/api/admin/api-tokens/{id}"))
        .await
        .expect(200);
    app.delete("/api/admin/environments/staging")
        .await
        .expect(200);
}

async fn toggles_are_configured_per_environment(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post("/api/admin/projects", json!({"id": "web", "name": "Web"}))
        .await
        .expect(201);
    let base = "/api/admin/projects/web/features";
    let created = app
        .post(
            base,
            json!({"name": "checkout", "description": "new flow", "impressionData": true}),
        )
        .await
        .expect(201)
        .json;
    assert_eq!(created["name"], "checkout");
    assert_eq!(created["project"], "web");
    assert_eq!(created["type"], "release");
    assert_eq!(created["impressionData"], true);
    assert_eq!(created["stale"], false);
    let envs: Vec<&str> = created["environments"]
        .as_array()
        .expect("environments")
        .iter()
        .map(|e| e["name"].as_str().expect("name"))
        .collect();
    assert_eq!(envs, ["default", "development", "production"]);
    for env in created["environments"].as_array().expect("environments") {
        assert_eq!(env["enabled"], false, "{env}");
        assert_eq!(env["strategies"], json!([]), "{env}");
    }
    assert_eq!(environment(&created, "production")["type"], "production");
    assert_eq!(created["children"], json!([]));

    // Name taken (also by a toggle of another project), unknown project, bad body.
    app.post(base, json!({"name": "checkout"}))
        .await
        .expect(409);
    app.post(
        "/api/admin/projects/nowhere/features",
        json!({"name": "x-1"}),
    )
    .await
    .expect(404)
    .error_message();
    let bad = app
        .post(base, json!({"name": "a b", "type": " ", "owner": "me"}))
        .await
        .expect(400)
        .json;
    assert_eq!(paths(&bad), ["owner", "name", "type"], "{bad}");

    // Switch on in production: the default strategy appears there only.
    app.post_empty(&format!("{base}/checkout/environments/production/on"))
        .await
        .expect(200);
    let feature = app.get(&format!("{base}/checkout")).await.expect(200).json;
    let production = environment(&feature, "production");
    assert_eq!(production["enabled"], true);
    let strategy = &production["strategies"][0];
    assert_eq!(strategy["name"], "flexibleRollout");
    assert_eq!(
        strategy["parameters"],
        json!({"groupId": "checkout", "rollout": "100", "stickiness": "default"})
    );
    assert_eq!(strategy["featureName"], "checkout");
    assert_eq!(strategy["sortOrder"], 0);
    assert!(strategy["id"].is_string());
    assert_eq!(environment(&feature, "default")["enabled"], false);
    assert_eq!(
        environment(&feature, "development")["strategies"],
        json!([])
    );
    // Off keeps the strategies; on again adds none.
    app.post_empty(&format!("{base}/checkout/environments/production/off"))
        .await
        .expect(200);
    app.post_empty(&format!("{base}/checkout/environments/production/on"))
        .await
        .expect(200);
    let feature = app.get(&format!("{base}/checkout")).await.expect(200).json;
    assert_eq!(
        environment(&feature, "production")["strategies"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    // 404s: the toggle in another project, an unknown environment or toggle.
    app.get("/api/admin/projects/default/features/checkout")
        .await
        .expect(404)
        .error_message();
    app.post_empty(&format!("{base}/checkout/environments/nowhere/on"))
        .await
        .expect(404)
        .error_message();
    app.get(&format!("{base}/missing")).await.expect(404);

    // The listing, and the events naming the environment.
    let list = app.get(base).await.expect(200).json;
    assert_eq!(list["version"], 2);
    assert_eq!(list["features"][0]["name"], "checkout");
    let events = app.get("/api/admin/events/checkout").await.expect(200).json;
    let seen: Vec<(String, String)> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_string(),
                e["data"]["environment"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    for (kind, env) in [
        ("feature-environment-enabled", "production"),
        ("feature-environment-disabled", "production"),
        ("feature-strategy-add", "production"),
        ("feature-created", "default"),
    ] {
        assert!(
            seen.contains(&(kind.to_string(), env.to_string())),
            "{kind} in {env} missing: {seen:?}"
        );
    }

    // Archive through the project route: 202, then gone from it.
    app.delete(&format!("{base}/checkout")).await.expect(202);
    app.get(&format!("{base}/checkout")).await.expect(404);
    let archive = app
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json;
    assert!(
        crate::common::feature_names(archive).contains(&"checkout".to_string()),
        "archived"
    );
}

async fn strategies_per_environment_are_validated_and_ordered(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/projects/default/features",
        json!({"name": "search"}),
    )
    .await
    .expect(201);
    let strategies =
        "/api/admin/projects/default/features/search/environments/development/strategies";
    let first = app
        .post(
            strategies,
            json!({"name": "flexibleRollout", "title": "Beta", "parameters": {"rollout": 50, "stickiness": "userId"},
                "constraints": [{"contextName": "appName", "operator": "IN", "values": ["web"]}],
                "variants": [{"name": "blue", "weight": 1000, "weightType": "variable", "stickiness": "userId"}],
                "segments": []}),
        )
        .await
        .expect(200)
        .json;
    let first_id = first["id"].as_str().expect("id").to_string();
    assert_eq!(first["featureName"], "search");
    assert_eq!(first["title"], "Beta");
    assert_eq!(first["disabled"], false);
    assert_eq!(first["sortOrder"], 0);
    assert_eq!(first["parameters"]["rollout"], "50");
    // Strategy variants get the toggle's name as their group.
    assert_eq!(first["parameters"]["groupId"], "search");
    assert_eq!(first["variants"][0]["weight"], 1000);
    assert_eq!(first["segments"], json!([]));
    let second = app
        .post(strategies, json!({"name": "default", "sortOrder": 0}))
        .await
        .expect(200)
        .json;
    let second_id = second["id"].as_str().expect("id").to_string();
    assert_eq!(second["sortOrder"], 0, "sortOrder places it");
    let list = app.get(strategies).await.expect(200).json;
    let ids: Vec<&str> = list
        .as_array()
        .expect("list")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [second_id.as_str(), first_id.as_str()]);

    // Every problem with its path in one 400; unknown context field and segment included.
    let bad = app
        .post(
            strategies,
            json!({"name": "", "parameters": {"x": [1]}, "colour": "red",
                "constraints": [{"contextName": "nosuchfield", "operator": "IN", "values": ["a"]}],
                "segments": [77]}),
        )
        .await
        .expect(400)
        .json;
    let bad_paths = paths(&bad);
    for path in [
        "colour",
        "name",
        "parameters.x",
        "constraints[0]",
        "segments[0]",
    ] {
        assert!(
            bad_paths.iter().any(|p| p.starts_with(path)),
            "{path} missing in {bad_paths:?}"
        );
    }

    // Reorder, get, replace, delete.
    app.post(
        &format!("{strategies}/set-sort-order"),
        json!([{"id": first_id, "sortOrder": 0}, {"id": second_id, "sortOrder": 1}]),
    )
    .await
    .expect(200);
    let list = app.get(strategies).await.expect(200).json;
    assert_eq!(list[0]["id"], first_id.as_str());
    assert_eq!(list[1]["sortOrder"], 1);
    app.post(
        &format!("{strategies}/set-sort-order"),
        json!([{"id": "nope", "sortOrder": 0}]),
    )
    .await
    .expect(400);
    let one = app
        .get(&format!("{strategies}/{second_id}"))
        .await
        .expect(200)
        .json;
    assert_eq!(one["name"], "default");
    let replaced = app
        .put(
            &format!("{strategies}/{second_id}"),
            json!({"name": "userWithId", "parameters": {"userIds": "a,b"}, "disabled": true}),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(replaced["id"], second_id.as_str());
    assert_eq!(replaced["name"], "userWithId");
    assert_eq!(replaced["disabled"], true);
    assert_eq!(replaced["sortOrder"], 1);
    app.put(&format!("{strategies}/unknown"), json!({"name": "default"}))
        .await
        .expect(404)
        .error_message();
    app.get(&format!("{strategies}/unknown")).await.expect(404);
    app.delete(&format!("{strategies}/{second_id}"))
        .await
        .expect(200);
    app.delete(&format!("{strategies}/{second_id}"))
        .await
        .expect(404);
    let list = app.get(strategies).await.expect(200).json;
    assert_eq!(list.as_array().map(Vec::len), Some(1));

    let events = app.get("/api/admin/events/search").await.expect(200).json;
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["data"]["environment"] == "development")
        .filter_map(|e| e["type"].as_str())
        .collect();
    for kind in [
        "feature-strategy-add",
        "feature-strategy-update",
        "feature-strategy-remove",
        "strategy-order-changed",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
}

async fn other_environments_leave_default_and_the_client_api_alone(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    // A toggle made through the 3.x API shows its configuration as `default`'s.
    app.post(
        "/api/admin/features",
        json!({"name": "classic", "enabled": true, "strategies": [
            {"name": "userWithId", "parameters": {"userIds": "u1"}}]}),
    )
    .await
    .expect(200);
    let before = app.client_features("", None).await.expect(200);
    let feature = app
        .get("/api/admin/projects/default/features/classic")
        .await
        .expect(200)
        .json;
    let default = environment(&feature, "default");
    assert_eq!(default["enabled"], true);
    assert_eq!(default["strategies"][0]["name"], "userWithId");
    assert_eq!(environment(&feature, "production")["enabled"], false);

    // Configure production: the client document of `default` does not change.
    app.post_empty("/api/admin/projects/default/features/classic/environments/production/on")
        .await
        .expect(200);
    app.post(
        "/api/admin/projects/default/features/classic/environments/production/strategies",
        json!({"name": "default"}),
    )
    .await
    .expect(200);
    let after = app.client_features("", None).await.expect(200);
    assert_eq!(after.json["features"], before.json["features"]);
    assert_eq!(after.header("etag"), before.header("etag"));

    // A 3.x PUT replaces `default` and keeps production as it was.
    app.put(
        "/api/admin/features/classic",
        json!({"enabled": false, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let feature = app
        .get("/api/admin/projects/default/features/classic")
        .await
        .expect(200)
        .json;
    assert_eq!(environment(&feature, "default")["enabled"], false);
    let production = environment(&feature, "production");
    assert_eq!(production["enabled"], true);
    assert_eq!(
        production["strategies"]
            .as_array()
            .map(|s| s.iter().map(|s| s["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("flexibleRollout"), json!("default")])
    );
    let client = app.client_features("", None).await.expect(200).json;
    let classic = client["features"]
        .as_array()
        .expect("features")
        .iter()
        .find(|f| f["name"] == "classic")
        .expect("classic served");
    assert_eq!(classic["enabled"], false);
    assert_eq!(
        classic["strategies"],
        json!([{"name": "default", "parameters": {}, "variants": []}])
    );
}
