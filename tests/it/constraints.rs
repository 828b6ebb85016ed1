//! Strategy constraints with the full operator set (spec §2.3, plus `REGEX`, `SEMVER_GTE`,
//! `SEMVER_LTE` and `IN_CIDR`): stored and served exactly as written, validated on write
//! against the operator and the context field; and the rule that every field a client sends
//! is stored and served or refused by name.

use serde_json::{json, Value};

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    every_operator_is_served_exactly_as_written,
    constraint_operands_are_validated,
    constraints_must_name_known_fields_and_legal_values,
    unsupported_fields_are_refused_by_name,
    impression_data_is_stored_and_served
);

/// One constraint per operator, each with the optional fields in a different combination.
fn constraints_of_every_operator() -> Vec<Value> {
    vec![
        json!({"contextName": "userId", "operator": "IN", "values": ["1", "2"]}),
        json!({"contextName": "userId", "operator": "NOT_IN", "values": ["3"], "inverted": false}),
        json!({"contextName": "email", "operator": "STR_CONTAINS", "values": ["@example"], "caseInsensitive": true}),
        json!({"contextName": "email", "operator": "STR_STARTS_WITH", "values": ["admin", "root"]}),
        json!({"contextName": "email", "operator": "STR_ENDS_WITH", "values": [".com"], "inverted": true, "caseInsensitive": false}),
        json!({"contextName": "age", "operator": "NUM_EQ", "value": "42"}),
        json!({"contextName": "age", "operator": "NUM_GT", "value": "17.5", "values": []}),
        json!({"contextName": "age", "operator": "NUM_GTE", "value": "-3"}),
        json!({"contextName": "age", "operator": "NUM_LT", "value": "1e3", "inverted": true}),
        json!({"contextName": "age", "operator": "NUM_LTE", "value": "0"}),
        json!({"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2026-01-01T00:00:00Z"}),
        json!({"contextName": "currentTime", "operator": "DATE_BEFORE", "value": "2030-06-30T12:00:00.000+02:00"}),
        json!({"contextName": "appVersion", "operator": "SEMVER_EQ", "value": "1.2.3"}),
        json!({"contextName": "appVersion", "operator": "SEMVER_GT", "value": "2.0.0-beta.1"}),
        json!({"contextName": "appVersion", "operator": "SEMVER_LT", "value": "10.0.0", "inverted": true}),
        json!({"contextName": "appVersion", "operator": "SEMVER_GTE", "value": "1.2.3-rc.1"}),
        json!({"contextName": "appVersion", "operator": "SEMVER_LTE", "value": "2.0.0", "inverted": true}),
        json!({"contextName": "email", "operator": "REGEX", "value": "^[^@]+@example\\.com$", "caseInsensitive": true, "values": []}),
        json!({"contextName": "userId", "operator": "IN_CIDR", "values": ["10.0.0.0/8", "192.168.1.1", "2001:db8::/32"], "inverted": false}),
    ]
}

async fn create_fields(app: &TestApp, names: &[&str]) {
    for name in names {
        app.post("/api/admin/context", json!({"name": name}))
            .await
            .expect(201);
    }
}

async fn every_operator_is_served_exactly_as_written(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    create_fields(&app, &["email", "age", "appVersion"]).await;
    let constraints = constraints_of_every_operator();
    app.post(
        "/api/admin/features",
        json!({"name": "ops", "enabled": true, "strategies": [
            {"name": "default", "constraints": constraints}]}),
    )
    .await
    .expect(200);
    let admin = app.get("/api/admin/features/ops").await.expect(200).json;
    assert_eq!(admin["strategies"][0]["constraints"], json!(constraints));
    let client = app.client_features("", None).await.expect(200).json;
    assert_eq!(
        client["features"][0]["strategies"][0]["constraints"],
        json!(constraints)
    );
    let single = app.get("/api/client/features/ops").await.expect(200).json;
    assert_eq!(single["strategies"][0]["constraints"], json!(constraints));
    // A PUT replaces them, again as written.
    let replaced =
        json!([{"contextName": "age", "operator": "NUM_LTE", "value": "7", "inverted": true}]);
    app.put(
        "/api/admin/features/ops",
        json!({"enabled": true, "strategies": [{"name": "default", "constraints": replaced}]}),
    )
    .await
    .expect(200);
    let admin = app.get("/api/admin/features/ops").await.expect(200).json;
    assert_eq!(admin["strategies"][0]["constraints"], replaced);
}

/// Creates `body` (a toggle named `bad`) and returns the paths of the 400's details, after
/// checking that nothing was written.
async fn refused_paths(app: &TestApp, body: Value) -> Vec<String> {
    let reply = app.post("/api/admin/features", body).await.expect(400);
    reply.error_message();
    app.get("/api/admin/features/bad").await.expect(404);
    reply.json["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].as_str().expect("path").to_string())
        .collect()
}

fn with_constraint(constraint: Value) -> Value {
    json!({"name": "bad", "strategies": [{"name": "default", "constraints": [constraint]}]})
}

async fn constraint_operands_are_validated(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    create_fields(&app, &["age", "appVersion"]).await;
    let at = |field: &str| vec![format!("strategies[0].constraints[0].{field}")];
    for (constraint, field) in [
        (
            json!({"contextName": "age", "operator": "NUM_GT", "value": "ten"}),
            "value",
        ),
        (
            json!({"contextName": "age", "operator": "NUM_EQ", "value": "NaN"}),
            "value",
        ),
        (json!({"contextName": "age", "operator": "NUM_EQ"}), "value"),
        // Forms a looser parser takes but the SDKs' rule grammar cannot read (the toggle
        // would evaluate false everywhere).
        (
            json!({"contextName": "age", "operator": "NUM_GT", "value": ".5"}),
            "value",
        ),
        (
            json!({"contextName": "currentTime", "operator": "DATE_AFTER",
                "value": "2000-01-01T00:00:00.123456Z"}),
            "value",
        ),
        (
            json!({"contextName": "currentTime", "operator": "DATE_AFTER",
                "value": "2000-01-01t00:00:00z"}),
            "value",
        ),
        (
            json!({"contextName": "currentTime", "operator": "DATE_AFTER",
                "value": "2000-01-01 00:00:00Z"}),
            "value",
        ),
        (
            json!({"contextName": "userId", "operator": "STR_ENDS_WITH", "values": ["a\\"]}),
            "values[0]",
        ),
        (
            json!({"contextName": "age", "operator": "NUM_EQ", "value": "1", "values": ["1"]}),
            "values",
        ),
        (
            json!({"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2026-01-01"}),
            "value",
        ),
        (
            json!({"contextName": "currentTime", "operator": "DATE_BEFORE", "value": "yesterday"}),
            "value",
        ),
        (
            json!({"contextName": "appVersion", "operator": "SEMVER_EQ", "value": "1.2"}),
            "value",
        ),
        (
            json!({"contextName": "appVersion", "operator": "SEMVER_GT", "value": "v1.2.3"}),
            "value",
        ),
        (
            json!({"contextName": "userId", "operator": "IN", "values": []}),
            "values",
        ),
        (json!({"contextName": "userId", "operator": "IN"}), "values"),
        (
            json!({"contextName": "userId", "operator": "IN", "values": ["a"], "value": "a"}),
            "value",
        ),
        (
            json!({"contextName": "userId", "operator": "NOT_A_VALID_OPERATOR", "values": ["a.*"]}),
            "operator",
        ),
        (
            json!({"contextName": "userId", "operator": "REGEX", "value": "(regex"}),
            "value",
        ),
        (
            json!({"contextName": "userId", "operator": "REGEX", "value": "^a", "inverted": true}),
            "inverted",
        ),
        (
            json!({"contextName": "userId", "operator": "REGEX"}),
            "value",
        ),
        (
            json!({"contextName": "appVersion", "operator": "SEMVER_GTE", "value": "1.2"}),
            "value",
        ),
        (
            json!({"contextName": "appVersion", "operator": "SEMVER_LTE", "value": "v2.0.0"}),
            "value",
        ),
        (
            json!({"contextName": "userId", "operator": "IN_CIDR", "values": ["10.0.0.0/8", "10.0.0.0/33"]}),
            "values[1]",
        ),
        (
            json!({"contextName": "userId", "operator": "IN_CIDR", "values": ["fe80::1%eth0"]}),
            "values[0]",
        ),
        (
            json!({"contextName": "userId", "operator": "IN_CIDR", "values": []}),
            "values",
        ),
        (
            json!({"contextName": "userId", "operator": "in", "values": ["a"]}),
            "operator",
        ),
        (json!({"operator": "IN", "values": ["a"]}), "contextName"),
    ] {
        assert_eq!(
            refused_paths(&app, with_constraint(constraint.clone())).await,
            at(field),
            "{constraint}"
        );
    }
    // A list operator given a single value: both halves are named.
    assert_eq!(
        refused_paths(
            &app,
            with_constraint(
                json!({"contextName": "userId", "operator": "STR_CONTAINS", "value": "a"})
            )
        )
        .await,
        [at("values"), at("value")].concat()
    );
    // The empty `value` the Unleash UI sends along with list operators is fine.
    app.post(
        "/api/admin/features",
        json!({"name": "ui", "strategies": [{"name": "default", "constraints": [
            {"contextName": "userId", "operator": "IN", "values": ["1"], "value": ""}]}]}),
    )
    .await
    .expect(200);
    // A value that is not a string is refused with its path, too.
    let reply = app
        .post(
            "/api/admin/features",
            with_constraint(json!({"contextName": "age", "operator": "NUM_EQ", "value": 5})),
        )
        .await
        .expect(400);
    assert!(reply.error_message().contains("value"), "{}", reply.json);
    // The message lists the operators.
    let reply = app
        .post(
            "/api/admin/features",
            with_constraint(json!({"contextName": "userId", "operator": "LIKE", "values": ["a"]})),
        )
        .await
        .expect(400);
    let message = reply.error_message();
    for known in [
        "NOT_IN",
        "SEMVER_LT",
        "SEMVER_GTE",
        "SEMVER_LTE",
        "REGEX",
        "IN_CIDR",
    ] {
        assert!(message.contains(known), "{message}");
    }
    // An inverted REGEX is refused as Unleash 7 refuses it, with a message that says so.
    let reply = app
        .post(
            "/api/admin/features",
            with_constraint(
                json!({"contextName": "userId", "operator": "REGEX", "value": "^a", "inverted": true}),
            ),
        )
        .await
        .expect(400);
    let message = reply.error_message();
    assert!(message.contains("cannot be inverted"), "{message}");
}

async fn constraints_must_name_known_fields_and_legal_values(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    assert_eq!(
        refused_paths(
            &app,
            with_constraint(json!({"contextName": "region", "operator": "IN", "values": ["eu"]}))
        )
        .await,
        ["strategies[0].constraints[0].contextName"]
    );
    app.post(
        "/api/admin/context",
        json!({"name": "region", "legalValues": ["eu", "us"]}),
    )
    .await
    .expect(201);
    let reply = app
        .post(
            "/api/admin/features",
            with_constraint(
                json!({"contextName": "region", "operator": "IN", "values": ["eu", "apac"]}),
            ),
        )
        .await
        .expect(400);
    let message = reply.error_message();
    assert!(
        message.contains("apac") && message.contains("legal"),
        "{message}"
    );
    assert_eq!(
        reply.json["details"][0]["path"],
        "strategies[0].constraints[0].values[1]"
    );
    // Legal values compare exactly, as the SDKs compare `IN`/`NOT_IN` (even with
    // `caseInsensitive`, which only `STR_*` honour); substrings are free.
    assert_eq!(
        refused_paths(
            &app,
            with_constraint(json!({"contextName": "region", "operator": "NOT_IN",
                "values": ["EU"], "caseInsensitive": true}))
        )
        .await,
        ["strategies[0].constraints[0].values[0]"]
    );
    for constraint in [
        json!({"contextName": "region", "operator": "NOT_IN", "values": ["us"]}),
        json!({"contextName": "region", "operator": "STR_STARTS_WITH", "values": ["e"]}),
    ] {
        app.post(
            "/api/admin/features",
            json!({"name": format!("ok.{}", constraint["operator"].as_str().expect("op")),
                   "strategies": [{"name": "default", "constraints": [constraint]}]}),
        )
        .await
        .expect(200);
    }
    // Several strategies and constraints: every problem in one 400.
    let body = json!({"name": "bad", "strategies": [
        {"name": "default", "constraints": [
            {"contextName": "region", "operator": "IN", "values": ["mars"]},
            {"contextName": "planet", "operator": "IN", "values": ["x"]}]},
        {"name": "default", "constraints": [
            {"contextName": "userId", "operator": "NUM_GT", "value": "x"}]}]});
    assert_eq!(
        refused_paths(&app, body).await,
        [
            "strategies[0].constraints[0].values[0]",
            "strategies[0].constraints[1].contextName",
            "strategies[1].constraints[0].value"
        ]
    );
}

async fn unsupported_fields_are_refused_by_name(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for (body, paths) in [
        (
            json!({"name": "bad", "owner": "team-a", "strategies": [{"name": "default"}]}),
            vec!["owner"],
        ),
        (
            json!({"name": "bad", "strategies": [{"name": "default", "shard": 2}]}),
            vec!["strategies[0].shard"],
        ),
        (
            json!({"name": "bad", "strategies": [{"name": "flexibleRollout",
                "variants": [{"name": "v", "weight": 1000, "colour": "red"}]}]}),
            vec!["strategies[0].variants[0].colour"],
        ),
        (
            json!({"name": "bad", "strategies": [{"name": "default", "constraints": [
                {"contextName": "userId", "operator": "IN", "values": ["1"], "negate": true}]}]}),
            vec!["strategies[0].constraints[0].negate"],
        ),
        (
            json!({"name": "bad", "strategies": [{"name": "default"}],
                   "variants": [{"name": "v", "weight": 1000, "colour": "red",
                                 "payload": {"type": "string", "value": "x", "encoding": "b64"}}]}),
            vec!["variants[0].colour", "variants[0].payload.encoding"],
        ),
    ] {
        let refused = refused_paths(&app, body.clone()).await;
        assert_eq!(refused, paths, "{body}");
    }
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "bad", "strategies": [{"name": "default", "shard": 1}]}),
        )
        .await
        .expect(400);
    assert_eq!(
        reply.error_message(),
        "\"strategies[0].shard\" is not supported"
    );
    // Read-only fields that tools echo back are ignored; empty newer-model fields pass.
    let echoed = json!({"name": "echo", "createdAt": "2020-01-01T00:00:00.000Z",
        "lastSeenAt": null, "tags": [{"type": "simple", "value": "x"}], "dependencies": [],
        "strategies": [{"name": "default", "segments": [], "variants": [], "disabled": false}]});
    let created = app
        .post("/api/admin/features", echoed)
        .await
        .expect(200)
        .json;
    assert_ne!(created["createdAt"], "2020-01-01T00:00:00.000Z");
    assert_eq!(created["tags"], json!([]));
    // A toggle fetched from the admin API can be PUT back as it is, and an archive listing's
    // item (with the legacy `strategy`/`parameters`) can be created again as it is.
    let fetched = app.get("/api/admin/features/echo").await.expect(200).json;
    app.put("/api/admin/features/echo", fetched)
        .await
        .expect(200);
    app.delete("/api/admin/features/echo").await.expect(200);
    let mut archived = app
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json["features"][0]
        .clone();
    assert!(archived.get("strategy").is_some(), "{archived}");
    archived["name"] = json!("echo.again");
    app.post("/api/admin/features", archived).await.expect(200);
    // The other admin bodies follow the same rule.
    for (path, body, field) in [
        (
            "/api/admin/strategies",
            json!({"name": "custom", "parameters": [], "title": "Custom"}),
            "title",
        ),
        (
            "/api/admin/strategies",
            json!({"name": "custom", "parameters": [{"name": "p", "type": "string", "min": 1}]}),
            "parameters[0].min",
        ),
        (
            "/api/admin/tag-types",
            json!({"name": "team", "colour": "red"}),
            "colour",
        ),
        (
            "/api/admin/tags",
            json!({"type": "simple", "value": "red", "weight": 2}),
            "weight",
        ),
    ] {
        let reply = app.post(path, body).await.expect(400);
        reply.error_message();
        assert_eq!(reply.json["details"][0]["path"], field, "{}", reply.json);
    }
    // A served strategy definition can be sent back as it is.
    let custom = json!({"name": "custom", "description": "", "parameters": [],
                        "editable": true, "deprecated": false});
    app.post("/api/admin/strategies", custom.clone())
        .await
        .expect(201);
    app.put("/api/admin/strategies/custom", custom)
        .await
        .expect(200);
    // Toggle names keep the URL-safe rule, and the 400 says which characters are allowed.
    let reply = app
        .post(
            "/api/admin/features",
            json!({"name": "a b", "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(400);
    let message = reply.error_message();
    assert!(
        message.contains("URL friendly") && message.contains("- _ ."),
        "{message}"
    );
}

async fn impression_data_is_stored_and_served(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/features",
        json!({"name": "seen", "enabled": true, "impressionData": true,
               "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    app.create_toggle("unseen").await;
    let admin = app.get("/api/admin/features/seen").await.expect(200).json;
    assert_eq!(admin["impressionData"], true);
    let unseen = app.get("/api/admin/features/unseen").await.expect(200).json;
    assert!(unseen.get("impressionData").is_none(), "{unseen}");
    let client = app.client_features("", None).await.expect(200).json;
    assert_eq!(client["features"][0]["name"], "seen");
    assert_eq!(client["features"][0]["impressionData"], true);
    assert!(client["features"][1].get("impressionData").is_none());
    // PUT replaces it like every other field.
    app.put(
        "/api/admin/features/seen",
        json!({"impressionData": false, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    let admin = app.get("/api/admin/features/seen").await.expect(200).json;
    assert_eq!(admin["impressionData"], false);
}
