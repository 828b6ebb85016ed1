//! The client-shaped import and export of one environment
//! (`/api/admin/state/{import,export}?environment=E`): stored as written (what the admin API
//! refuses but SDKs evaluate), other environments untouched, idempotent, dry run, refused
//! whole with every problem's path.

use serde_json::{json, Value};

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    a_client_document_imports_into_one_environment_as_written,
    a_client_document_with_problems_is_refused_whole,
    drop_and_dry_run_act_on_the_environment_only
);

/// A client document with what Unleash's admin API would refuse.
fn document() -> Value {
    json!({"version": 2, "features": [
        {"name": "shared", "enabled": true, "strategies": [
            {"name": "flexibleRollout", "parameters": {"rollout": "50", "groupId": "g", "stickiness": "default"},
             "constraints": [{"contextName": "region", "operator": "NOT_A_VALID_OPERATOR", "values": []}],
             "segments": [1, 404],
             "variants": [{"name": "a", "weight": 1}, {"name": "b", "weight": 3, "payload": {"type": "string", "value": "x"}}]}],
         "variants": [{"name": "v", "weight": 33}],
         "dependencies": [{"feature": "Feature.UTF-8.Hellø_Wørld"}, {"feature": "missing", "enabled": false}]},
        {"name": "Feature.UTF-8.Hellø_Wørld", "enabled": true, "strategies": [],
         "dependencies": [{"feature": "shared"}]}],
     "segments": [{"id": 1, "name": "beta users", "constraints": [
         {"contextName": "userId", "operator": "IN", "values": ["1", "2"]}]}],
     "query": {"environment": "development"}, "meta": {"revisionId": 3}})
}

/// The environment's client document, from the export.
async fn exported(app: &TestApp, environment: &str) -> Value {
    app.get(&format!(
        "/api/admin/state/export?environment={environment}"
    ))
    .await
    .expect(200)
    .json
}

fn feature<'a>(document: &'a Value, name: &str) -> &'a Value {
    document["features"]
        .as_array()
        .and_then(|list| list.iter().find(|f| f["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {document}"))
}

async fn a_client_document_imports_into_one_environment_as_written(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/features",
        json!({"name": "shared", "enabled": true, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let default_before = app.client_features("", None).await.expect(200).json;

    let report = app
        .post("/api/admin/state/import?environment=production", document())
        .await
        .expect(202)
        .json;
    assert_eq!(report["changed"], true, "{report}");
    assert_eq!(report["summary"]["environment"], "production");
    assert_eq!(report["summary"]["features"]["created"], 1, "{report}");
    assert_eq!(report["summary"]["features"]["updated"], 1, "{report}");
    assert_eq!(report["summary"]["segments"]["created"], 1, "{report}");

    // `default` keeps its configuration (toggle-wide fields — the new toggle, dependencies —
    // come along); production holds the document as written.
    let default_after = app.client_features("", None).await.expect(200).json;
    for key in ["enabled", "strategies"] {
        assert_eq!(
            feature(&default_after, "shared")[key],
            feature(&default_before, "shared")[key]
        );
    }
    assert_eq!(
        feature(&default_after, "Feature.UTF-8.Hellø_Wørld")["enabled"],
        false
    );
    let production = exported(&app, "production").await;
    let shared = feature(&production, "shared");
    assert_eq!(shared["enabled"], true);
    let strategy = &shared["strategies"][0];
    assert_eq!(strategy["segments"], json!([1, 404]));
    assert_eq!(
        strategy["constraints"],
        json!([{"contextName": "region", "operator": "NOT_A_VALID_OPERATOR", "values": []}])
    );
    assert_eq!(strategy["variants"][0], json!({"name": "a", "weight": 1}));
    assert_eq!(shared["variants"][0]["weight"], 33);
    assert_eq!(
        shared["dependencies"],
        json!([{"feature": "Feature.UTF-8.Hellø_Wørld", "enabled": true, "variants": []},
               {"feature": "missing", "enabled": false}])
    );
    let utf8 = feature(&production, "Feature.UTF-8.Hellø_Wørld");
    assert_eq!(utf8["strategies"], json!([]));
    assert_eq!(
        production["segments"],
        json!([{"id": 1, "name": "beta users", "constraints": [
            {"contextName": "userId", "operator": "IN", "values": ["1", "2"]}]}])
    );
    // Development knows the new toggle, unconfigured.
    let development = exported(&app, "development").await;
    assert_eq!(
        feature(&development, "Feature.UTF-8.Hellø_Wørld")["enabled"],
        false
    );
    // The 3.x view (default) keeps its strategy; the toggle-wide dependencies come along.
    let admin = app.get("/api/admin/features/shared").await.expect(200).json;
    assert_eq!(admin["strategies"][0]["name"], "default");
    assert_eq!(admin["dependencies"].as_array().map(Vec::len), Some(2));

    // The import event names the environment.
    let events = app.get("/api/admin/events/shared").await.expect(200).json;
    let imported = events["events"]
        .as_array()
        .and_then(|list| list.iter().find(|e| e["type"] == "feature-import"))
        .cloned()
        .unwrap_or_else(|| panic!("no feature-import in {events}"));
    assert_eq!(imported["data"]["environment"], "production");

    // The export imports back as it is: nothing changes, nothing is written.
    let again = app
        .post(
            "/api/admin/state/import?environment=production",
            production.clone(),
        )
        .await
        .expect(202)
        .json;
    assert_eq!(again["changed"], false, "{again}");
    assert_eq!(exported(&app, "production").await, production);
}

async fn a_client_document_with_problems_is_refused_whole(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let before = exported(&app, "production").await;
    let reply = app
        .post(
            "/api/admin/state/import?environment=production",
            json!({"features": [{"name": "ok", "enabled": true}, {"name": "", "enabled": true},
                {"name": "b", "enabled": "yes"}, {"name": "c", "colour": "red"}],
                "segments": [{"id": 1}, {"id": 1}], "owner": "x"}),
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
            "owner",
            "features[1].name",
            "features[2].enabled",
            "features[3].colour",
            "segments[1].id"
        ],
        "{}",
        reply.json
    );
    app.post(
        "/api/admin/state/import?environment=nowhere",
        json!({"features": []}),
    )
    .await
    .expect(400);
    app.get("/api/admin/state/export?environment=nowhere")
        .await
        .expect(400);
    assert_eq!(exported(&app, "production").await, before);
}

async fn drop_and_dry_run_act_on_the_environment_only(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let two = json!({"features": [{"name": "a", "enabled": true}, {"name": "b", "enabled": true}]});
    for environment in ["production", "development"] {
        app.post(
            &format!("/api/admin/state/import?environment={environment}"),
            two.clone(),
        )
        .await
        .expect(202);
    }
    let one = json!({"features": [{"name": "a", "enabled": false}]});
    let dry = app
        .post(
            "/api/admin/state/import?environment=production&drop=true&dryRun=true",
            one.clone(),
        )
        .await
        .expect(200)
        .json;
    assert_eq!(dry["dryRun"], true);
    assert_eq!(dry["summary"]["features"]["updated"], 1, "{dry}");
    assert_eq!(dry["summary"]["features"]["dropped"], 1, "{dry}");
    assert_eq!(
        feature(&exported(&app, "production").await, "b")["enabled"],
        true
    );

    app.post(
        "/api/admin/state/import?environment=production&drop=true",
        one,
    )
    .await
    .expect(202);
    let production = exported(&app, "production").await;
    assert_eq!(feature(&production, "a")["enabled"], false);
    // `b` stays a toggle, unconfigured in production, and as it was in development.
    assert_eq!(feature(&production, "b")["enabled"], false);
    assert_eq!(
        feature(&exported(&app, "development").await, "b")["enabled"],
        true
    );
}
