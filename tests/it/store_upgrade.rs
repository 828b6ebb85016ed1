//! The upgrade to seed generation 3 (environments): a store written before environments,
//! whose toggle records hold `enabled`, `strategies` and `variants` at the top, is adopted on
//! the first start — its toggles become `default`'s, SDKs get the same document, the seeded
//! environments appear and every strategy gets an id.

use serde_json::json;

use crate::common::{Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_before_environments_serves_its_toggles_as_defaults() {
    let backend = Backend::redis();
    let redis = backend.redis_server();
    let legacy = json!({"name": "legacy.one", "description": "kept", "type": "release",
        "project": "default", "enabled": true, "stale": false,
        "strategies": [{"name": "userWithId", "parameters": {"userIds": "1,2"}}],
        "variants": [{"name": "a", "weight": 1000, "weightType": "variable", "stickiness": "default",
            "overrides": []}],
        "createdAt": "2020-01-01T00:00:00Z", "tags": []});
    let archived = json!({"name": "legacy.gone", "description": "", "type": "release",
        "project": "default", "enabled": false, "stale": false,
        "strategies": [{"name": "default", "parameters": {}}], "variants": [],
        "createdAt": "2020-01-01T00:00:00Z", "tags": [], "archivedAt": "2021-01-01T00:00:00Z"});
    // What generation 2 left: its seeds marked, the toggles in the old form.
    redis.cli(&["HSET", "{test}:counters", "seeded", "2"]);
    redis.cli(&["HSET", "{test}:projects", "default",
        &json!({"id": "default", "name": "Default", "description": "", "createdAt": "2020-01-01T00:00:00Z"}).to_string()]);
    redis.cli(&["HSET", "{test}:features", "legacy.one", &legacy.to_string()]);
    redis.cli(&[
        "HSET",
        "{test}:archive",
        "legacy.gone",
        &archived.to_string(),
    ]);
    redis.cli(&["SET", "{test}:version", "1"]);

    let app = TestApp::spawn(&backend).await;
    // SDKs get what they got: on, its strategy and variants.
    let document = app.client_features("", None).await.expect(200).json;
    let served = &document["features"][0];
    assert_eq!(served["name"], "legacy.one");
    assert_eq!(served["enabled"], true);
    assert_eq!(
        served["strategies"],
        json!([{"name": "userWithId", "parameters": {"userIds": "1,2"}, "variants": []}])
    );
    assert_eq!(served["variants"][0]["name"], "a");
    // The 3.x view is the same toggle, now with a strategy id; the record is in the new form.
    let admin = app
        .get("/api/admin/features/legacy.one")
        .await
        .expect(200)
        .json;
    assert_eq!(admin["description"], "kept");
    assert!(admin["strategies"][0]["id"]
        .as_str()
        .is_some_and(|id| !id.is_empty()));
    let stored: serde_json::Value =
        serde_json::from_str(&redis.cli_output(&["HGET", "{test}:features", "legacy.one"]))
            .expect("a JSON record");
    assert_eq!(
        stored["environments"]["default"]["enabled"], true,
        "{stored}"
    );
    assert!(stored.get("strategies").is_none(), "{stored}");
    let stored: serde_json::Value =
        serde_json::from_str(&redis.cli_output(&["HGET", "{test}:archive", "legacy.gone"]))
            .expect("a JSON record");
    assert!(
        stored["environments"]["default"]["strategies"][0]["id"].is_string(),
        "{stored}"
    );
    // The seeded environments, and the generation.
    for name in ["default", "development", "production"] {
        let record = redis.cli_output(&["HGET", "{test}:environments", name]);
        assert!(
            record.contains(&format!("\"name\":\"{name}\"")),
            "{name}: {record}"
        );
    }
    assert_eq!(
        redis
            .cli_output(&["HGET", "{test}:counters", "seeded"])
            .trim(),
        "3"
    );
    // The archived toggle revives as it was.
    app.post_empty("/api/admin/archive/revive/legacy.gone")
        .await
        .expect(200);
}
