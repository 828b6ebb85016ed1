//! Strategy variants (Unleash 5.4+) and the other strategy fields of the newer model through
//! the 3.x API (which acts on `default`): weights shared as Unleash shares them on admin
//! writes, stickiness and `groupId` filled in, served to SDKs with `variants` on every
//! strategy, disabled strategies left out of the client document, every problem with its path.

use serde_json::{json, Value};

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    strategy_variants_are_shared_and_served,
    disabled_strategies_and_titles_stay_out_of_the_client_document,
    invalid_strategy_variants_are_refused_with_their_paths
);

fn client_toggle(document: &Value, name: &str) -> Value {
    document["features"]
        .as_array()
        .and_then(|list| list.iter().find(|f| f["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {document}"))
}

async fn strategy_variants_are_shared_and_served(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app
        .post(
            "/api/admin/features",
            json!({"name": "checkout", "enabled": true, "strategies": [{"name": "flexibleRollout",
                "parameters": {"rollout": "100", "stickiness": "userId"},
                "variants": [
                    {"name": "red", "weightType": "variable", "payload": {"type": "json", "value": "{\"a\":1}"}},
                    {"name": "blue", "weight": 100, "weightType": "fix"},
                    {"name": "green"}]}]}),
        )
        .await
        .expect(200)
        .json;
    let strategy = &created["strategies"][0];
    // Fixed keeps 100; the two variable ones share 900; sorted by name; the strategy's
    // stickiness; the toggle's name as groupId.
    assert_eq!(
        strategy["variants"],
        json!([
            {"name": "blue", "weight": 100, "weightType": "fix", "stickiness": "userId"},
            {"name": "green", "weight": 450, "weightType": "variable", "stickiness": "userId"},
            {"name": "red", "weight": 450, "weightType": "variable", "stickiness": "userId",
             "payload": {"type": "json", "value": "{\"a\":1}"}}
        ])
    );
    assert_eq!(strategy["parameters"]["groupId"], "checkout");
    let document = app.client_features("", None).await.expect(200).json;
    let served = client_toggle(&document, "checkout");
    assert_eq!(served["strategies"][0]["variants"], strategy["variants"]);
    assert!(served["strategies"][0].get("id").is_none(), "{served}");
    // A strategy without variants carries an empty list.
    app.put(
        "/api/admin/features/checkout",
        json!({"enabled": true, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let document = app.client_features("", None).await.expect(200).json;
    assert_eq!(
        client_toggle(&document, "checkout")["strategies"],
        json!([{"name": "default", "parameters": {}, "variants": []}])
    );
}

async fn disabled_strategies_and_titles_stay_out_of_the_client_document(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/features",
        json!({"name": "beta", "enabled": true, "strategies": [
            {"name": "userWithId", "title": "Testers", "disabled": true, "parameters": {"userIds": "1"}},
            {"name": "default", "title": "Everyone else"}]}),
    )
    .await
    .expect(200);
    let admin = app.get("/api/admin/features/beta").await.expect(200).json;
    assert_eq!(admin["strategies"][0]["title"], "Testers");
    assert_eq!(admin["strategies"][0]["disabled"], true);
    let ids: Vec<&str> = admin["strategies"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    let document = app.client_features("", None).await.expect(200).json;
    let served = client_toggle(&document, "beta");
    assert_eq!(
        served["strategies"],
        json!([{"name": "default", "parameters": {}, "variants": []}])
    );
    // The legacy pair names the first strategy SDKs get.
    assert_eq!(served["strategy"], "default");
    // The same list PUT back keeps the strategies' ids.
    app.put("/api/admin/features/beta", admin.clone())
        .await
        .expect(200);
    let again = app.get("/api/admin/features/beta").await.expect(200).json;
    assert_eq!(again["strategies"], admin["strategies"]);
}

async fn invalid_strategy_variants_are_refused_with_their_paths(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "bad", "strategies": [
                {"name": "default", "variants": [{"name": "a", "weight": 600, "weightType": "fix"},
                    {"name": "b", "weight": 600, "weightType": "fix"}, {"name": "c"}]},
                {"name": "default", "variants": [{"name": "x", "weight": 10, "weightType": "fix"}]},
                {"name": "default", "variants": [{"name": "y", "weightType": "odd",
                    "payload": {"type": "json", "value": "{"}}, {"name": "y"}]}]}),
        )
        .await
        .expect(400);
    let paths: Vec<String> = reply.json["details"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|e| e["path"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        paths,
        [
            "strategies[0].variants",
            "strategies[1].variants",
            "strategies[2].variants[0].weightType",
            "strategies[2].variants[0].payload.value",
            "strategies[2].variants[1].name"
        ],
        "{}",
        reply.json
    );
    app.get("/api/admin/features/bad").await.expect(404);
}
