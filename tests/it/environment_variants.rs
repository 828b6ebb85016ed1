//! A toggle's variants per environment (Unleash 7's `PUT …/environments/:env/variants`):
//! validated and shared out as on the 3.x API, served in that environment's client document
//! only, recorded as `feature-environment-variants-updated` naming the environment.

use serde_json::{json, Value};

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(variants_are_set_per_environment);

const PRODUCTION: &str =
    "/api/admin/projects/default/features/checkout/environments/production/variants";

/// The toggle `name` of a client document.
fn served<'a>(document: &'a Value, name: &str) -> &'a Value {
    document["features"]
        .as_array()
        .expect("features")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {document}"))
}

/// The recorded events of `kind`.
async fn events_of(app: &TestApp, kind: &str) -> Vec<Value> {
    let events = app.get("/api/admin/events").await.expect(200).json;
    events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == kind)
        .cloned()
        .collect()
}

async fn variants_are_set_per_environment(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/features",
        json!({"name": "checkout", "enabled": true, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let variants = json!([
        {"name": "blue", "weight": 1, "weightType": "variable", "stickiness": "default"},
        {"name": "green", "weight": 1, "weightType": "variable", "stickiness": "default",
         "payload": {"type": "string", "value": "g"}},
    ]);
    let reply = app.put(PRODUCTION, variants.clone()).await.expect(200).json;
    assert_eq!(reply["version"], 1);
    let weights: Vec<Value> = reply["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|v| v["weight"].clone())
        .collect();
    assert_eq!(weights, [json!(500), json!(500)], "{reply}");

    // Production's, not default's: in the admin view and in each client document.
    let feature = app
        .get("/api/admin/projects/default/features/checkout")
        .await
        .expect(200)
        .json;
    let of = |env: &str| {
        feature["environments"]
            .as_array()
            .expect("environments")
            .iter()
            .find(|e| e["name"] == env)
            .map(|e| e["variants"].clone())
            .expect("environment")
    };
    assert_eq!(of("production"), reply["variants"]);
    assert_eq!(of("default"), json!([]));
    let production = app
        .client_features("?environment=production", None)
        .await
        .expect(200)
        .json;
    assert_eq!(
        served(&production, "checkout")["variants"],
        reply["variants"]
    );
    let default = app.client_features("", None).await.expect(200).json;
    let none = &served(&default, "checkout")["variants"];
    assert!(none.is_null() || *none == json!([]), "{default}");

    // One event, naming the environment; the same variants again change nothing.
    let events = events_of(&app, "feature-environment-variants-updated").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["data"]["environment"], "production");
    assert_eq!(events[0]["data"]["name"], "checkout");
    app.put(PRODUCTION, variants).await.expect(200);
    assert_eq!(
        events_of(&app, "feature-environment-variants-updated")
            .await
            .len(),
        1
    );

    // Bad variants: one 400 naming each problem, nothing written.
    let refused = app
        .put(
            PRODUCTION,
            json!([{"name": "", "weight": 2000, "weightType": "fix", "stickiness": "default"}]),
        )
        .await
        .expect(400)
        .json;
    let paths: Vec<&str> = refused["details"]
        .as_array()
        .expect("details")
        .iter()
        .filter_map(|d| d["path"].as_str())
        .collect();
    assert!(paths.contains(&"variants[0].name"), "{refused}");
    assert!(paths.contains(&"variants[0].weight"), "{refused}");
    let production = app
        .client_features("?environment=production", None)
        .await
        .expect(200)
        .json;
    assert_eq!(
        served(&production, "checkout")["variants"],
        reply["variants"]
    );
    app.put(PRODUCTION, json!({"name": "not a list"}))
        .await
        .expect(400);
    // Fixed weights over 1,000, or no variable variant: refused at `variants`.
    for variants in [
        json!([{"name": "a", "weight": 700, "weightType": "fix", "stickiness": "default"},
               {"name": "b", "weight": 400, "weightType": "fix", "stickiness": "default"},
               {"name": "c", "weight": 1, "weightType": "variable", "stickiness": "default"}]),
        json!([{"name": "a", "weight": 1000, "weightType": "fix", "stickiness": "default"}]),
    ] {
        let refused = app.put(PRODUCTION, variants).await.expect(400).json;
        assert_eq!(refused["details"][0]["path"], "variants", "{refused}");
    }
    // Fixed ones keep their weight, variable ones split the rest; sorted by name.
    let shared = app
        .put(
            PRODUCTION,
            json!([{"name": "z", "weight": 1, "weightType": "variable", "stickiness": "default"},
                   {"name": "m", "weight": 300, "weightType": "fix", "stickiness": "default"},
                   {"name": "a", "weight": 1, "weightType": "variable", "stickiness": "default"}]),
        )
        .await
        .expect(200)
        .json;
    let weights: Vec<(Value, Value)> = shared["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|v| (v["name"].clone(), v["weight"].clone()))
        .collect();
    assert_eq!(
        weights,
        [
            (json!("a"), json!(350)),
            (json!("m"), json!(300)),
            (json!("z"), json!(350))
        ]
    );

    // Unknown environment, toggle, or a toggle of another project: 404.
    for path in [
        "/api/admin/projects/default/features/checkout/environments/nowhere/variants",
        "/api/admin/projects/default/features/nothing/environments/production/variants",
        "/api/admin/projects/other/features/checkout/environments/production/variants",
    ] {
        app.put(path, json!([])).await.expect(404);
    }
    // An empty list removes them.
    let cleared = app.put(PRODUCTION, json!([])).await.expect(200).json;
    assert_eq!(cleared["variants"], json!([]));
}
