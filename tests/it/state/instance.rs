//! Version-2 state documents (issue 33): a whole instance — environments, each toggle's
//! configuration per environment, segments, archived names, API tokens, addons — exported,
//! imported into an empty store and served the same client documents in every environment,
//! with and without `Unleash-Client-Spec`; a token moved in with its secret works; addon
//! secrets leave only when asked for; problems of the new sections are reported with their
//! paths and nothing is written.

use reqwest::Method;
use serde_json::{json, Value};

use super::{export, import, populate, refused_paths, spawn_isolated, without_timestamps};
use crate::common::{send, Backend, TestApp};
use crate::conformance;

conformance!(
    a_whole_instance_round_trips_with_the_same_client_documents,
    a_token_moved_in_with_its_secret_is_served_its_environment,
    addon_secrets_are_exported_masked_unless_asked_for,
    problems_of_the_instance_sections_are_listed_and_nothing_is_written,
);

/// The environments compared.
const ENVIRONMENTS: [&str; 4] = ["default", "development", "production", "staging"];

/// `populate`'s 3.x configuration, plus what only a whole instance has: another
/// environment, per-environment strategies with segments, titles, a disabled one and
/// strategy variants, toggle variants in one environment, a dependency, a token, an addon.
async fn populate_instance(app: &TestApp) {
    populate(app).await;
    app.post(
        "/api/admin/environments",
        json!({"name": "staging", "type": "test"}),
    )
    .await
    .expect(201);
    let segment = app
        .post(
            "/api/admin/segments",
            json!({"name": "beta", "constraints": [
                {"contextName": "userId", "operator": "IN", "values": ["1", "2"]}]}),
        )
        .await
        .expect(201)
        .json;
    let id = segment["id"].as_u64().expect("segment id");
    let strategies = "/api/admin/projects/web/features/checkout/environments";
    app.post(
        &format!("{strategies}/production/strategies"),
        json!({"name": "flexibleRollout", "title": "half",
               "parameters": {"rollout": "50", "stickiness": "default", "groupId": "checkout"},
               "segments": [id],
               "variants": [{"name": "a", "weight": 500, "weightType": "variable", "stickiness": "default"},
                            {"name": "b", "weight": 500, "weightType": "variable", "stickiness": "default"}]}),
    )
    .await
    .expect(200);
    app.post(
        &format!("{strategies}/production/strategies"),
        json!({"name": "default", "disabled": true}),
    )
    .await
    .expect(200);
    app.post_empty(&format!("{strategies}/production/on"))
        .await
        .expect(200);
    app.post(
        &format!("{strategies}/staging/strategies"),
        json!({"name": "userWithId", "parameters": {"userIds": "7"}}),
    )
    .await
    .expect(200);
    app.post(
        "/api/admin/features",
        json!({"name": "checkout-banner", "project": "web", "enabled": true,
               "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    app.post(
        "/api/admin/projects/web/features/checkout-banner/dependencies",
        json!({"feature": "checkout"}),
    )
    .await
    .expect(200);
    app.post(
        "/api/admin/api-tokens",
        json!({"tokenName": "web-prod", "type": "backend", "projects": ["web"],
               "environment": "production"}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/addons",
        json!({"provider": "webhook", "enabled": true, "description": "audit",
               "parameters": {"url": "https://hooks.example.com/flagpole"},
               "events": ["feature-created"]}),
    )
    .await
    .expect(201);
}

/// The client document of `environment` (segments by reference with `spec`), less `meta`.
async fn client_document(app: &TestApp, environment: &str, spec: Option<&str>) -> Value {
    app.settle().await;
    let mut request = app.anonymous(
        Method::GET,
        &format!("/api/client/features?environment={environment}"),
    );
    if let Some(spec) = spec {
        request = request.header("Unleash-Client-Spec", spec);
    }
    let mut document = send(request).await.expect(200).json;
    document.as_object_mut().expect("a document").remove("meta");
    document
}

async fn a_whole_instance_round_trips_with_the_same_client_documents(backend: &Backend) {
    let source = spawn_isolated(backend, "instance-source").await;
    populate_instance(&source).await;
    let original = export(&source, "?addonSecrets=true").await;
    assert_eq!(original["version"], 2);
    for section in [
        "environments",
        "featureEnvironments",
        "segments",
        "archivedFeatures",
        "apiTokens",
        "addons",
    ] {
        let items = original[section].as_array().expect(section);
        assert!(!items.is_empty(), "{section} is empty: {original}");
    }
    // The toggle-wide fields only: the configuration is per environment.
    assert_eq!(original["features"][0].get("strategies"), None);
    assert_eq!(original["apiTokens"][0].get("secret"), None);
    assert!(original["apiTokens"][0]["secretSha256"].is_string());

    let target = spawn_isolated(backend, "instance-target").await;
    let report = import(&target, "", &original).await.expect(202).json;
    assert_eq!(report["changed"], true, "{report}");
    assert_eq!(report["summary"]["segments"]["created"], 1, "{report}");
    assert_eq!(report["summary"]["apiTokens"]["created"], 1, "{report}");
    assert_eq!(
        report["summary"]["archivedFeatures"]["created"], 1,
        "{report}"
    );
    for environment in ENVIRONMENTS {
        for spec in [Some("5.2.0"), None] {
            let expected = client_document(&source, environment, spec).await;
            assert!(expected["features"]
                .as_array()
                .is_some_and(|f| !f.is_empty()));
            let actual = client_document(&target, environment, spec).await;
            assert_eq!(actual, expected, "{environment}, spec {spec:?}");
        }
    }
    let production = client_document(&target, "production", Some("5.2.0")).await;
    let checkout = &production["features"][0];
    assert_eq!(checkout["name"], "checkout");
    assert_eq!(checkout["strategies"].as_array().map(Vec::len), Some(1));
    assert_eq!(checkout["strategies"][0]["variants"][1]["name"], "b");
    assert_eq!(
        without_timestamps(&export(&target, "?addonSecrets=true").await),
        without_timestamps(&original)
    );
    // The archived name stays taken; the token and the addon are there as they were.
    let archive = target
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json;
    assert_eq!(archive["features"][0]["name"], "old");
    assert_eq!(
        target.get("/api/admin/api-tokens").await.expect(200).json,
        source.get("/api/admin/api-tokens").await.expect(200).json
    );
    let addons = target.get("/api/admin/addons").await.expect(200).json;
    assert_eq!(addons["addons"][0]["enabled"], true);

    // Its own export again (the addon's secrets masked) changes nothing.
    let again = import(&target, "", &export(&target, "").await)
        .await
        .expect(202)
        .json;
    assert_eq!(again["changed"], false, "{again}");
}

async fn a_token_moved_in_with_its_secret_is_served_its_environment(backend: &Backend) {
    let app = spawn_isolated(backend, "instance-token").await;
    let secret = "web:production.0123456789abcdef0123456789abcdef0123456789abcdef01234567";
    let document = json!({"version": 2,
        "projects": [{"id": "web", "name": "Web"}],
        "features": [{"name": "checkout", "project": "web"}],
        "featureEnvironments": [
            {"featureName": "checkout", "environment": "production", "enabled": true,
             "strategies": [{"name": "default"}]},
            {"featureName": "checkout", "environment": "development", "enabled": false}],
        "apiTokens": [{"secret": secret, "tokenName": "moved", "type": "backend",
                       "projects": ["web"], "environment": "production"}]});
    import(&app, "", &document).await.expect(202);
    let listed = app.get("/api/admin/api-tokens").await.expect(200).json;
    let token = &listed["tokens"][0];
    assert_eq!(token["tokenName"], "moved");
    assert_eq!(token["environment"], "production");
    assert!(!token["secret"]
        .as_str()
        .expect("masked")
        .contains("0123456789abcdef0123"));
    // The secret is stored only as its SHA-256: the export names it so.
    let exported = export(&app, "").await;
    assert_eq!(exported["apiTokens"][0].get("secret"), None);
    let production = client_document(&app, "production", None).await;
    assert_eq!(production["features"][0]["enabled"], true);
    assert_eq!(
        production["features"][0]["strategies"][0]["name"],
        "default"
    );
    let development = client_document(&app, "development", None).await;
    assert_eq!(development["features"][0]["enabled"], false);
    // Again: nothing changes.
    let again = import(&app, "", &document).await.expect(202).json;
    assert_eq!(again["changed"], false, "{again}");
}

async fn addon_secrets_are_exported_masked_unless_asked_for(backend: &Backend) {
    let app = spawn_isolated(backend, "instance-addon-secrets").await;
    let url = "https://hooks.example.com/T0-private-path";
    app.post(
        "/api/admin/addons",
        json!({"provider": "webhook", "enabled": true,
               "parameters": {"url": url, "secret": "signing-key-1",
                              "contentType": "application/json"},
               "events": ["feature-created"]}),
    )
    .await
    .expect(201);
    let masked = export(&app, "").await;
    let text = masked.to_string();
    assert!(
        !text.contains("private-path") && !text.contains("signing-key-1"),
        "{masked}"
    );
    let parameters = &masked["addons"][0]["parameters"];
    assert_eq!(parameters["url"], "*****");
    assert_eq!(parameters["secret"], "*****");
    assert_eq!(parameters["contentType"], "application/json");
    let reply = super::export_reply(&app, "?addonSecrets=1").await;
    assert_eq!(reply.header("cache-control").as_deref(), Some("no-store"));
    let full = reply.json;
    assert_eq!(full["addons"][0]["parameters"]["url"], url);
    assert_eq!(full["addons"][0]["parameters"]["secret"], "signing-key-1");

    // Back into the same store, a masked secret keeps the stored one.
    let again = import(&app, "", &masked).await.expect(202).json;
    assert_eq!(again["changed"], false, "{again}");
    assert_eq!(export(&app, "?addonSecrets=true").await, full);

    // Into another store, there is nothing to keep: refused, nothing written.
    let other = spawn_isolated(backend, "instance-addon-secrets-other").await;
    let reply = import(&other, "", &masked).await.expect(400);
    assert_eq!(
        refused_paths(&reply),
        ["addons[0].parameters.secret", "addons[0].parameters.url"]
    );
    let addons = other.get("/api/admin/addons").await.expect(200).json;
    assert_eq!(addons["addons"], json!([]), "{addons}");
    let features = other.get("/api/admin/features").await.expect(200).json;
    assert_eq!(features["features"], json!([]), "{features}");
    import(&other, "", &full).await.expect(202);
    let moved = other.get("/api/admin/addons").await.expect(200).json;
    assert_eq!(moved["addons"][0]["parameters"]["url"], "*****");
    assert_eq!(
        export(&other, "?addonSecrets=true").await["addons"],
        full["addons"]
    );
}

async fn problems_of_the_instance_sections_are_listed_and_nothing_is_written(backend: &Backend) {
    let app = spawn_isolated(backend, "instance-invalid").await;
    let before = export(&app, "").await;
    let document = json!({"version": 2,
        "features": [{"name": "checkout"},
                     {"name": "configured-here", "enabled": true, "strategies": [{"name": "default"}]}],
        "featureEnvironments": [
            {"featureName": "checkout", "environment": "nowhere", "enabled": true},
            {"featureName": "checkout", "environment": "production", "enabled": true,
             "strategies": [{"name": "default", "segments": [99]}, {"name": "noSuchStrategy"}]},
            {"featureName": "unlisted", "environment": "production", "enabled": true}],
        "segments": [{"id": 1, "name": "s"}, {"id": 1, "name": "t"}],
        "apiTokens": [{"tokenName": "no-secret", "type": "backend", "projects": ["*"],
                       "environment": "production"},
                      {"secret": "x:y.z", "tokenName": "t", "type": "backend",
                       "projects": ["nope"], "environment": "production"}],
        "archivedFeatures": [{"name": "checkout"}],
        "addons": [{"provider": "webhook", "parameters": {"url": "https://a.example.com"}}]});
    let reply = import(&app, "", &document).await.expect(400);
    assert_eq!(
        refused_paths(&reply),
        [
            "addons[0].id",
            "apiTokens[0]",
            "apiTokens[1].projects",
            "archivedFeatures[0].name",
            "featureEnvironments[0].environment",
            "featureEnvironments[1].strategies[0].segments",
            "featureEnvironments[1].strategies[1].name",
            "featureEnvironments[2].featureName",
            "features[1].strategies",
            "segments[1].id",
        ]
    );
    // A version-1 document has none of these sections.
    let reply = import(&app, "", &json!({"version": 1, "segments": []}))
        .await
        .expect(400);
    assert_eq!(refused_paths(&reply), ["segments"]);
    assert_eq!(
        without_timestamps(&export(&app, "").await),
        without_timestamps(&before)
    );
}
