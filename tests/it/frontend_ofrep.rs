//! OFREP over real HTTP: one flag and all flags (values, variants, reasons, typed payloads,
//! the bulk ETag and 304), the token forms, and the error bodies. Against both store backends;
//! the replica and helpers are `frontend.rs`'.

use reqwest::Method;
use serde_json::{json, Value};

use crate::auth::create_token;
use crate::common::{send, Backend, Reply};
use crate::conformance;
use crate::frontend::{admin, get, post_raw, start};

conformance!(
    ofrep_evaluates_one_flag_and_all_flags,
    ofrep_errors_carry_key_code_and_details,
    unweighable_variants_answer_on_without_a_variant,
);

async fn ofrep_evaluates_one_flag_and_all_flags(backend: &Backend) {
    let (app, token) = start(backend).await;
    let bearer = format!("Bearer {token}");
    let flag = |key: &str, body: &str, auth: (&'static str, String)| {
        let path = format!("/ofrep/v1/evaluate/flags/{key}");
        let body = body.to_string();
        let app = &app;
        async move {
            send(
                app.anonymous(Method::POST, &path)
                    .header(auth.0, auth.1)
                    .header("Content-Type", "application/json; charset=utf-8")
                    .body(body),
            )
            .await
        }
    };
    let reply = flag(
        "fe.on",
        r#"{"context":{"targetingKey":"u1"}}"#,
        ("Authorization", bearer.clone()),
    )
    .await
    .expect(200);
    assert_eq!(reply.json["key"], "fe.on");
    assert_eq!(reply.json["value"], true);
    assert_eq!(reply.json["variant"], "disabled");
    assert_eq!(reply.json["reason"], "STATIC");
    assert_eq!(reply.json["metadata"]["enabled"], true);
    // targetingKey is the userId.
    let reply = flag(
        "fe.user",
        r#"{"context":{"targetingKey":"u1"}}"#,
        ("X-API-Key", token.clone()),
    )
    .await
    .expect(200);
    assert_eq!(
        (reply.json["value"].clone(), reply.json["reason"].clone()),
        (json!(true), json!("TARGETING_MATCH"))
    );
    let reply = flag("fe.user", "", ("Authorization", token.clone()))
        .await
        .expect(200);
    assert_eq!(reply.json["value"], false);
    let reply = flag("fe.off", "{}", ("Authorization", token.clone()))
        .await
        .expect(200);
    assert_eq!(
        (reply.json["value"].clone(), reply.json["reason"].clone()),
        (json!(false), json!("DISABLED"))
    );
    // Payloads typed.
    let reply = flag("fe.variant", "{}", ("Authorization", token.clone()))
        .await
        .expect(200);
    assert_eq!(reply.json["value"], json!({"color": "blue"}));
    assert_eq!(reply.json["variant"], "blue");
    assert_eq!(reply.json["reason"], "SPLIT");
    assert_eq!(reply.json["metadata"]["payloadType"], "json");
    let reply = flag("fe.number", "{}", ("Authorization", token.clone()))
        .await
        .expect(200);
    assert_eq!(reply.json["value"], 10);

    // Bulk, with its ETag.
    let bulk = |inm: Option<String>| {
        let mut request = app
            .anonymous(Method::POST, "/ofrep/v1/evaluate/flags")
            .header("Authorization", bearer.clone())
            .header("Content-Type", "application/json")
            .body(r#"{"context":{"targetingKey":"u1"}}"#);
        if let Some(inm) = inm {
            request = request.header("If-None-Match", inm);
        }
        send(request)
    };
    let reply = bulk(None).await.expect(200);
    let flags = reply.json["flags"].as_array().expect("flags");
    assert_eq!(flags.len(), 7, "every flag, on or off");
    assert!(flags
        .iter()
        .all(|f| f["variant"].is_string() && f["reason"].is_string()));
    let etag = reply.header("etag").expect("an ETag");
    bulk(Some(etag)).await.expect(304);
}

async fn ofrep_errors_carry_key_code_and_details(backend: &Backend) {
    let (app, token) = start(backend).await;
    let check = |reply: &Reply, status: u16, key: &str, code: &str| {
        assert_eq!(reply.status, status, "{}", reply.json);
        assert_eq!(reply.json["key"], key, "{}", reply.json);
        assert_eq!(reply.json["errorCode"], code, "{}", reply.json);
        assert!(reply.json["errorDetails"].is_string(), "{}", reply.json);
    };
    let path = "/ofrep/v1/evaluate/flags/nope";
    check(
        &post_raw(&app, path, Some(&token), "{}", &[]).await,
        404,
        "nope",
        "FLAG_NOT_FOUND",
    );
    let path = "/ofrep/v1/evaluate/flags/fe.on";
    check(
        &post_raw(&app, path, Some(&token), "{", &[]).await,
        400,
        "fe.on",
        "PARSE_ERROR",
    );
    check(
        &post_raw(&app, path, Some(&token), r#"{"context": 1}"#, &[]).await,
        400,
        "fe.on",
        "INVALID_CONTEXT",
    );
    check(
        &post_raw(&app, path, None, "{}", &[]).await,
        401,
        "fe.on",
        "GENERAL",
    );
    let development = create_token(
        &app,
        json!({"tokenName": "dev", "type": "frontend", "environment": "development"}),
    )
    .await;
    let reply = post_raw(&app, path, Some(&development), "{}", &[])
        .await
        .expect(200);
    assert_eq!(reply.json["reason"], "DISABLED", "off in development");
    let bulk = post_raw(&app, "/ofrep/v1/evaluate/flags", Some(&token), "[", &[]).await;
    check(&bulk, 400, "", "PARSE_ERROR");
}

/// Variants whose weights are all zero or overflow (a toggle's or a strategy's; negative ones
/// are refused on import)
/// answer the toggle on with no variant — on the frontend API, OFREP (one flag and bulk) and
/// the playground — where yggdrasil would panic and drop the connection.
async fn unweighable_variants_answer_on_without_a_variant(backend: &Backend) {
    let (app, token) = start(backend).await;
    let document = json!({"version": 2, "features": [
        {"name": "zw", "enabled": true, "strategies": [{"name": "default"}],
         "variants": [{"name": "a", "weight": 0, "stickiness": "default"}]},
        {"name": "zo", "enabled": true, "strategies": [{"name": "default"}],
         "variants": [{"name": "a", "weight": 2_147_483_647, "stickiness": "default"},
                      {"name": "b", "weight": 2_147_483_647, "stickiness": "default"},
                      {"name": "c", "weight": 2_147_483_647, "stickiness": "default"}]},
        {"name": "zs", "enabled": true, "strategies": [{"name": "flexibleRollout",
            "parameters": {"rollout": "100", "stickiness": "default", "groupId": "zs"},
            "variants": [{"name": "s", "weight": 0, "weightType": "variable",
                          "stickiness": "default"}]}]},
    ]});
    admin(
        &app,
        Method::POST,
        "/api/admin/state/import?environment=default&drop=true",
        Some(document),
    )
    .await
    .expect(202);
    let names = ["zw", "zo", "zs"];
    for context in ["userId=1", "sessionId=s1", "appName=web"] {
        let answer = get(&app, &format!("/api/frontend?{context}"), Some(&token), &[])
            .await
            .expect(200);
        let toggles = answer.json["toggles"].as_array().expect("toggles");
        assert_eq!(toggles.len(), names.len(), "{}", answer.json);
        for toggle in toggles {
            assert_eq!(toggle["enabled"], true, "{toggle}");
            assert_eq!(toggle["variant"]["name"], "disabled", "{toggle}");
            assert_eq!(toggle["variant"]["enabled"], false, "{toggle}");
        }
    }
    for name in names {
        let path = format!("/ofrep/v1/evaluate/flags/{name}");
        for body in [r#"{"context":{"targetingKey":"1"}}"#, r#"{"context":{}}"#] {
            let reply = post_raw(&app, &path, Some(&token), body, &[])
                .await
                .expect(200);
            assert_eq!(reply.json["value"], true, "{name}: {}", reply.json);
            assert_eq!(reply.json["variant"], "disabled", "{name}: {}", reply.json);
        }
    }
    let bulk = post_raw(
        &app,
        "/ofrep/v1/evaluate/flags",
        Some(&token),
        r#"{"context":{"targetingKey":"1"}}"#,
        &[],
    )
    .await
    .expect(200);
    // The first document's toggles stay, off in `default`.
    let ours = |entries: &[Value], key: &str| -> Vec<Value> {
        entries
            .iter()
            .filter(|e| e[key].as_str().is_some_and(|k| names.contains(&k)))
            .cloned()
            .collect()
    };
    let flags = ours(bulk.json["flags"].as_array().expect("flags"), "key");
    assert_eq!(flags.len(), names.len(), "{}", bulk.json);
    for flag in flags {
        assert_eq!(
            (flag["value"].clone(), flag["variant"].clone()),
            (json!(true), json!("disabled")),
            "{flag}"
        );
    }
    let played = admin(
        &app,
        Method::POST,
        "/api/admin/playground",
        Some(json!({"environment": "default", "context": {"userId": "1"}})),
    )
    .await
    .expect(200);
    let features = ours(
        played.json["features"].as_array().expect("features"),
        "name",
    );
    assert_eq!(features.len(), names.len(), "{}", played.json);
    for feature in features {
        assert_eq!(feature["isEnabled"], true, "{feature}");
        assert_eq!(feature["variant"]["name"], "disabled", "{feature}");
        assert_eq!(feature["variant"]["enabled"], false, "{feature}");
    }
}
