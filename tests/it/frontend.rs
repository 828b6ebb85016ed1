//! Server-side evaluation over real HTTP: the frontend API (`/api/frontend`, `/api/proxy`),
//! its ETag and 304 before evaluating, its tokens, CORS and usage reports; OFREP (single and
//! bulk, its error bodies and token forms); the playground. Against both store backends.

use flagpole::config::{AuthMode, ClientAuth};
use reqwest::Method;
use serde_json::{json, Value};

use crate::auth::{create_token, settings, with_token, ADMIN_TOKEN};
use crate::common::{send, Backend, Reply, TestApp};
use crate::conformance;

conformance!(
    frontend_lists_the_toggles_on_for_the_context,
    frontend_etag_names_the_context_and_configuration,
    frontend_answers_left_to_chance_are_never_promised_unchanged,
    frontend_tokens_choose_environment_and_projects,
    frontend_refuses_bad_contexts_and_wrong_tokens,
    frontend_cors_preflight_and_usage_reports,
    frontend_polls_answered_before_routing_equal_routed_ones,
    playground_explains_each_strategy_constraint_and_segment,
    frontend_fills_remote_address_from_the_caller,
    frontend_leaves_the_address_out_where_no_answer_reads_it,
    frontend_and_ofrep_serve_a_write_once_it_is_answered,
);

/// Toggles for these tests, in the client format (imported as written into `default`).
fn document() -> Value {
    json!({
        "version": 2,
        "features": [
            {"name": "fe.on", "enabled": true, "strategies": [{"name": "default"}],
             "impressionData": true},
            {"name": "fe.off", "enabled": false, "strategies": [{"name": "default"}]},
            {"name": "fe.user", "enabled": true,
             "strategies": [{"name": "userWithId", "parameters": {"userIds": "u1,u2"}}]},
            {"name": "fe.plan", "enabled": true,
             "strategies": [{"name": "default", "constraints": [
                 {"contextName": "plan", "operator": "IN", "values": ["pro"]}]}]},
            {"name": "fe.segment", "enabled": true,
             "strategies": [{"name": "default", "segments": [7]}]},
            {"name": "fe.variant", "enabled": true, "strategies": [{"name": "default"}],
             "variants": [{"name": "blue", "weight": 1000, "stickiness": "default",
                           "payload": {"type": "json", "value": "{\"color\":\"blue\"}"}}]},
            {"name": "fe.number", "enabled": true, "strategies": [{"name": "default"}],
             "variants": [{"name": "ten", "weight": 1000, "stickiness": "default",
                           "payload": {"type": "number", "value": "10"}}]},
        ],
        "segments": [{"id": 7, "name": "beta", "constraints": [
            {"contextName": "region", "operator": "IN", "values": ["eu"]}]}]
    })
}

/// A replica in token mode holding `document()` in `default`, and a frontend token for it.
pub(crate) async fn start(backend: &Backend) -> (TestApp, String) {
    let app = TestApp::spawn_with(settings(backend, AuthMode::Token, ClientAuth::Token)).await;
    with_token(
        &app,
        Method::POST,
        "/api/admin/state/import?environment=default&drop=true",
        Some(ADMIN_TOKEN),
        Some(document()),
    )
    .await
    .expect(202);
    let token = create_token(&app, json!({"tokenName": "web", "type": "frontend"})).await;
    (app, token)
}

/// An admin request with the bootstrap admin token.
pub(crate) async fn admin(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Reply {
    with_token(app, method, path, Some(ADMIN_TOKEN), body).await
}

/// `GET {path}` with `token` and optional headers.
pub(crate) async fn get(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = app.anonymous(Method::GET, path);
    if let Some(token) = token {
        request = request.header("Authorization", token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(request).await
}

/// `POST {path}` with `token`, a raw body and optional headers.
pub(crate) async fn post_raw(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    body: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = app.anonymous(Method::POST, path).body(body.to_string());
    if let Some(token) = token {
        request = request.header("Authorization", token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(request).await
}

/// The names listed by a frontend answer.
pub(crate) fn names(answer: &Value) -> Vec<String> {
    answer["toggles"]
        .as_array()
        .unwrap_or_else(|| panic!("toggles in {answer}"))
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

async fn frontend_lists_the_toggles_on_for_the_context(backend: &Backend) {
    let (app, token) = start(backend).await;
    let reply = get(&app, "/api/frontend?userId=u9", Some(&token), &[])
        .await
        .expect(200);
    assert_eq!(
        names(&reply.json),
        ["fe.number", "fe.on", "fe.variant"],
        "only toggles on for the context, by name"
    );
    let on = &reply.json["toggles"][1];
    assert_eq!(on["enabled"], true);
    assert_eq!(on["impressionData"], true);
    assert_eq!(
        on["variant"],
        json!({"name": "disabled", "enabled": false,
        "feature_enabled": true, "featureEnabled": true})
    );
    let variant = &reply.json["toggles"][2]["variant"];
    assert_eq!(variant["name"], "blue");
    assert_eq!(
        variant["payload"],
        json!({"type": "json", "value": "{\"color\":\"blue\"}"})
    );

    let reply = get(
        &app,
        "/api/frontend?userId=u1&properties%5Bplan%5D=pro&properties[region]=eu",
        Some(&token),
        &[],
    )
    .await
    .expect(200);
    assert_eq!(
        names(&reply.json),
        [
            "fe.number",
            "fe.on",
            "fe.plan",
            "fe.segment",
            "fe.user",
            "fe.variant"
        ]
    );
    // The body, wrapped or bare; unknown top-level fields are properties.
    for body in [
        json!({"context": {"userId": "u2", "properties": {"plan": "pro"}}}),
        json!({"userId": "u2", "plan": "pro"}),
    ] {
        let reply = post_raw(
            &app,
            "/api/frontend",
            Some(&token),
            &body.to_string(),
            &[("Content-Type", "application/json")],
        )
        .await
        .expect(200);
        assert_eq!(
            names(&reply.json),
            ["fe.number", "fe.on", "fe.plan", "fe.user", "fe.variant"],
            "{body}"
        );
    }
    // The old proxy's path.
    let reply = get(&app, "/api/proxy?userId=u1", Some(&token), &[])
        .await
        .expect(200);
    assert!(names(&reply.json).contains(&"fe.user".to_string()));
    let reply = post_raw(&app, "/api/proxy", Some(&token), "", &[])
        .await
        .expect(200);
    assert_eq!(names(&reply.json), ["fe.number", "fe.on", "fe.variant"]);

    // A change reaches the answers within one engine build (writes do not wait for it).
    with_token(
        &app,
        Method::POST,
        "/api/admin/features/fe.off/toggle/on",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200);
    let reached = crate::common::eventually(std::time::Duration::from_secs(5), || async {
        let reply = get(&app, "/api/frontend", Some(&token), &[]).await;
        names(&reply.json).contains(&"fe.off".to_string())
    })
    .await;
    assert!(reached, "the change reaches the frontend answers");
}

async fn frontend_etag_names_the_context_and_configuration(backend: &Backend) {
    let (app, token) = start(backend).await;
    let first = get(&app, "/api/frontend?userId=u1", Some(&token), &[])
        .await
        .expect(200);
    let etag = first.header("etag").expect("an ETag");
    assert_eq!(first.header("cache-control").as_deref(), Some("no-cache"));
    let again = get(
        &app,
        "/api/frontend?userId=u1",
        Some(&token),
        &[("If-None-Match", &etag)],
    )
    .await
    .expect(304);
    assert_eq!(again.header("etag"), Some(etag.clone()));
    // A weak form, a list or `*` names it too; the 304 carries the tag itself.
    for sent in [
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_string(),
    ] {
        let listed = get(
            &app,
            "/api/frontend?userId=u1",
            Some(&token),
            &[("If-None-Match", &sent)],
        )
        .await
        .expect(304);
        assert_eq!(listed.header("etag"), Some(etag.clone()), "{sent}");
    }
    // The same context in another order or form is the same answer.
    let post = post_raw(
        &app,
        "/api/frontend",
        Some(&token),
        r#"{"context":{"userId":"u1"}}"#,
        &[("If-None-Match", &etag)],
    )
    .await;
    assert_eq!(post.status, 304);
    // Another context, another tag.
    let other = get(
        &app,
        "/api/frontend?userId=u2",
        Some(&token),
        &[("If-None-Match", &etag)],
    )
    .await
    .expect(200);
    assert_ne!(other.header("etag"), Some(etag.clone()));
    // A change of configuration, another tag.
    with_token(
        &app,
        Method::POST,
        "/api/admin/features/fe.off/toggle/on",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200);
    // Writes do not wait for the engines: the new tag comes within one build.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let changed = loop {
        let reply = get(
            &app,
            "/api/frontend?userId=u1",
            Some(&token),
            &[("If-None-Match", &etag)],
        )
        .await;
        if reply.status == 200 {
            break reply;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a change of configuration gives another tag"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_ne!(changed.header("etag"), Some(etag));
    // A write that changes nothing evaluated keeps the tag (a tag type).
    let etag = changed.header("etag").expect("an ETag");
    with_token(
        &app,
        Method::POST,
        "/api/admin/tag-types",
        Some(ADMIN_TOKEN),
        Some(json!({"name": "team"})),
    )
    .await
    .expect(201);
    get(
        &app,
        "/api/frontend?userId=u1",
        Some(&token),
        &[("If-None-Match", &etag)],
    )
    .await
    .expect(304);
    let counted = app
        .metric("flagpole_evaluation_responses_total{api=\"frontend\",response=\"304\"}")
        .await;
    assert!(counted.unwrap_or(0.0) >= 2.0, "304s counted: {counted:?}");
}

async fn frontend_answers_left_to_chance_are_never_promised_unchanged(backend: &Backend) {
    let (app, token) = start(backend).await;
    admin(
        &app,
        Method::POST,
        "/api/admin/features",
        Some(json!({"name": "fe.coin", "enabled": true, "strategies": [
            {"name": "gradualRolloutRandom", "parameters": {"percentage": "50"}}]})),
    )
    .await
    .expect(200);
    // Writes do not wait for the engines: OFREP knows the toggle once its engine has it.
    let built = crate::common::eventually(std::time::Duration::from_secs(5), || async {
        let path = "/ofrep/v1/evaluate/flags/fe.coin";
        let headers = [("Content-Type", "application/json")];
        post_raw(&app, path, Some(&token), "{}", &headers)
            .await
            .status
            == 200
    })
    .await;
    assert!(built);
    let first = get(&app, "/api/frontend?userId=u1", Some(&token), &[])
        .await
        .expect(200);
    let etag = first.header("etag").expect("an ETag");
    // Chance decides `fe.coin` at every evaluation: a tag made before evaluating would answer
    // every re-poll 304. Forty re-polls all drawing the first answer: one chance in 2^40.
    let mut fresh = 0;
    for _ in 0..40 {
        let reply = get(
            &app,
            "/api/frontend?userId=u1",
            Some(&token),
            &[("If-None-Match", &etag)],
        )
        .await;
        match reply.status.as_u16() {
            200 => fresh += 1,
            304 => {}
            status => panic!("unexpected status {status}"),
        }
    }
    assert!(
        fresh > 0,
        "every re-poll was told the coin fell the same way"
    );
}

async fn frontend_tokens_choose_environment_and_projects(backend: &Backend) {
    let (app, _) = start(backend).await;
    admin(
        &app,
        Method::POST,
        "/api/admin/projects",
        Some(json!({"id": "shop", "name": "Shop"})),
    )
    .await
    .expect(201);
    admin(
        &app,
        Method::POST,
        "/api/admin/projects/shop/features",
        Some(json!({"name": "shop.only"})),
    )
    .await
    .expect(201);
    admin(
        &app,
        Method::POST,
        "/api/admin/projects/shop/features/shop.only/environments/development/strategies",
        Some(json!({"name": "default"})),
    )
    .await
    .expect(200);
    admin(
        &app,
        Method::POST,
        "/api/admin/projects/shop/features/shop.only/environments/development/on",
        None,
    )
    .await
    .expect(200);
    let development = create_token(
        &app,
        json!({"tokenName": "dev", "type": "frontend", "environment": "development"}),
    )
    .await;
    let reply = get(&app, "/api/frontend", Some(&development), &[])
        .await
        .expect(200);
    assert_eq!(
        names(&reply.json),
        ["shop.only"],
        "development's toggles only"
    );
    let scoped = create_token(
        &app,
        json!({"tokenName": "dev-default", "type": "frontend", "environment": "development",
               "projects": ["default"]}),
    )
    .await;
    let reply = get(&app, "/api/frontend", Some(&scoped), &[])
        .await
        .expect(200);
    assert_eq!(
        names(&reply.json),
        Vec::<String>::new(),
        "its projects only"
    );
    // OFREP with the same token: the toggle of another project is not found.
    let reply = post_raw(
        &app,
        "/ofrep/v1/evaluate/flags/shop.only",
        Some(&scoped),
        "{}",
        &[],
    )
    .await;
    assert_eq!(reply.status, 404);
    let reply = post_raw(
        &app,
        "/ofrep/v1/evaluate/flags/shop.only",
        Some(&development),
        "{}",
        &[],
    )
    .await
    .expect(200);
    assert_eq!(reply.json["value"], true);
}

async fn frontend_refuses_bad_contexts_and_wrong_tokens(backend: &Backend) {
    let (app, token) = start(backend).await;
    for body in [
        "{",
        "[1]",
        r#"{"context": 3}"#,
        r#"{"userId": {"a": 1}}"#,
        r#"{"properties": [1]}"#,
    ] {
        let reply = post_raw(&app, "/api/frontend", Some(&token), body, &[])
            .await
            .expect(400);
        assert!(reply.json["message"].is_string(), "{body}: {}", reply.json);
    }
    get(&app, "/api/frontend", None, &[]).await.expect(401);
    get(&app, "/api/frontend", Some("nonsense"), &[])
        .await
        .expect(401);
    let client = create_token(&app, json!({"tokenName": "sdk", "type": "client"})).await;
    get(&app, "/api/frontend", Some(&client), &[])
        .await
        .expect(403);
    // An admin token is served `default`, every project (as on the client API).
    let reply = get(&app, "/api/frontend", Some(ADMIN_TOKEN), &[])
        .await
        .expect(200);
    assert_eq!(names(&reply.json), ["fe.number", "fe.on", "fe.variant"]);
    // OFREP takes server tokens too.
    post_raw(
        &app,
        "/ofrep/v1/evaluate/flags/fe.on",
        Some(&client),
        "",
        &[],
    )
    .await
    .expect(200);
}

/// A request of a comparison: query, token and headers.
type Case<'a> = (&'a str, Option<&'a str>, Vec<(&'a str, &'a str)>);

/// The status, body and headers (less `date`) of a reply.
fn answer_of(reply: &Reply) -> (u16, String, Vec<(String, String)>) {
    let mut headers: Vec<(String, String)> = reply
        .headers
        .iter()
        .filter(|(name, _)| *name != "date")
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.to_string(), value)
        })
        .collect();
    headers.sort();
    let body = String::from_utf8_lossy(&reply.bytes).into_owned();
    (reply.status.as_u16(), body, headers)
}

/// `GET /api/frontend` (and `/api/proxy`) is answered before routing (`http::PollsFirst`);
/// the same path with a trailing slash goes through the router: both answers are the same,
/// CORS included, for a 200, a 304, a refusal and a bad context.
async fn frontend_polls_answered_before_routing_equal_routed_ones(backend: &Backend) {
    let (app, token) = start(backend).await;
    let origin = ("Origin", "https://shop.example");
    let first = get(&app, "/api/frontend?userId=u1", Some(&token), &[origin])
        .await
        .expect(200);
    let etag = first.header("etag").expect("an ETag");
    let too_large = format!("?userId={}", "x".repeat(17 * 1024));
    let cases: [Case; 6] = [
        ("?userId=u1", Some(&token), vec![origin]),
        (&too_large, Some(&token), vec![origin]),
        (
            "?userId=u1",
            Some(&token),
            vec![origin, ("If-None-Match", &etag)],
        ),
        ("?userId=u1", Some(&token), vec![]),
        ("?userId=u1", Some("not-a-token"), vec![origin]),
        (
            "?properties[a]=1&a=2&remoteAddress=x",
            Some(&token),
            vec![origin],
        ),
    ];
    for base in ["/api/frontend", "/api/proxy"] {
        for (query, token, headers) in &cases {
            let first = get(&app, &format!("{base}{query}"), *token, headers).await;
            let routed = get(&app, &format!("{base}/{query}"), *token, headers).await;
            assert_eq!(
                answer_of(&first),
                answer_of(&routed),
                "{base}{query} {headers:?}"
            );
        }
    }
}

async fn frontend_cors_preflight_and_usage_reports(backend: &Backend) {
    let (app, token) = start(backend).await;
    let preflight = send(
        app.anonymous(Method::OPTIONS, "/api/frontend")
            .header("Origin", "https://shop.example")
            .header("Access-Control-Request-Method", "GET")
            .header(
                "Access-Control-Request-Headers",
                "authorization,unleash-sdk,if-none-match",
            ),
    )
    .await;
    assert!(
        preflight.status.as_u16() < 300,
        "preflight: {}",
        preflight.status
    );
    assert_eq!(
        preflight.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    let reply = get(
        &app,
        "/api/frontend",
        Some(&token),
        &[("Origin", "https://shop.example")],
    )
    .await
    .expect(200);
    assert!(reply
        .header("access-control-expose-headers")
        .is_some_and(|h| h.to_ascii_lowercase().contains("etag")));

    let report = json!({
        "appName": "web-shop", "instanceId": "browser",
        "bucket": {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z",
                   "toggles": {"fe.on": {"yes": 3, "no": 1, "variants": {}}}},
        "impactMetrics": []
    });
    post_raw(
        &app,
        "/api/frontend/client/metrics",
        Some(&token),
        &report.to_string(),
        &[("Content-Type", "application/json")],
    )
    .await
    .expect(200);
    post_raw(
        &app,
        "/api/frontend/client/metrics",
        Some(&token),
        "{}",
        &[],
    )
    .await
    .expect(400);
    post_raw(
        &app,
        "/api/proxy/client/register",
        Some(&token),
        &json!({"appName": "web-shop", "instanceId": "browser", "interval": 15000}).to_string(),
        &[],
    )
    .await
    .expect(200);
    let seen = crate::common::eventually(std::time::Duration::from_secs(10), || async {
        let view = with_token(
            &app,
            Method::GET,
            "/api/admin/metrics/applications/web-shop",
            Some(ADMIN_TOKEN),
            None,
        )
        .await;
        view.status == 200
    })
    .await;
    assert!(seen, "the frontend application shows in the usage views");
}

async fn playground_explains_each_strategy_constraint_and_segment(backend: &Backend) {
    let (app, _) = start(backend).await;
    let reply = with_token(
        &app,
        Method::POST,
        "/api/admin/playground",
        Some(ADMIN_TOKEN),
        Some(json!({"environment": "default", "projects": "*",
                    "context": {"appName": "web", "userId": "u1", "properties": {"plan": "pro"}}})),
    )
    .await
    .expect(200);
    assert_eq!(reply.json["input"]["environment"], "default");
    let features = reply.json["features"].as_array().expect("features");
    let feature = |name: &str| {
        features
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {}", reply.json))
    };
    assert_eq!(feature("fe.plan")["isEnabled"], true);
    let strategy = &feature("fe.plan")["strategies"]["data"][0];
    assert_eq!(strategy["result"]["enabled"], true);
    assert_eq!(strategy["constraints"][0]["contextName"], "plan");
    assert_eq!(strategy["constraints"][0]["result"], true);
    let segmented = feature("fe.segment");
    assert_eq!(segmented["isEnabled"], false);
    let segment = &segmented["strategies"]["data"][0]["segments"][0];
    assert_eq!(
        (segment["id"].clone(), segment["result"].clone()),
        (json!(7), json!(false))
    );
    assert_eq!(segment["constraints"][0]["result"], false);
    assert_eq!(feature("fe.off")["isEnabledInCurrentEnvironment"], false);
    assert_eq!(feature("fe.variant")["variant"]["name"], "blue");

    with_token(
        &app,
        Method::POST,
        "/api/admin/playground",
        Some(ADMIN_TOKEN),
        Some(json!({"environment": "nowhere"})),
    )
    .await
    .expect(404);
    with_token(
        &app,
        Method::POST,
        "/api/admin/playground",
        Some(ADMIN_TOKEN),
        Some(json!({"environment": "default", "context": {"userId": [1]}})),
    )
    .await
    .expect(400);
}

async fn frontend_fills_remote_address_from_the_caller(backend: &Backend) {
    let mut settings = settings(backend, AuthMode::Token, ClientAuth::Token);
    settings.server.trust_proxy = true;
    let app = TestApp::spawn_with(settings).await;
    let document = json!({"version": 2, "features": [
        {"name": "fe.local", "enabled": true,
         "strategies": [{"name": "remoteAddress", "parameters": {"IPs": "127.0.0.1"}}]}]});
    admin(
        &app,
        Method::POST,
        "/api/admin/state/import?environment=default&drop=true",
        Some(document),
    )
    .await
    .expect(202);
    let token = create_token(&app, json!({"tokenName": "web", "type": "frontend"})).await;
    let local = get(&app, "/api/frontend", Some(&token), &[])
        .await
        .expect(200);
    assert_eq!(names(&local.json), ["fe.local"], "the connection's address");
    let proxied = get(
        &app,
        "/api/frontend",
        Some(&token),
        &[("X-Forwarded-For", "10.1.2.3")],
    )
    .await
    .expect(200);
    assert_eq!(
        names(&proxied.json),
        Vec::<String>::new(),
        "the proxy's entry"
    );
    assert_ne!(local.header("etag"), proxied.header("etag"));
    let given = get(
        &app,
        "/api/frontend?remoteAddress=10.0.0.9",
        Some(&token),
        &[("X-Forwarded-For", "127.0.0.1")],
    )
    .await
    .expect(200);
    assert_eq!(
        names(&given.json),
        Vec::<String>::new(),
        "the context's own"
    );
    let bulk = post_raw(
        &app,
        "/ofrep/v1/evaluate/flags/fe.local",
        Some(&token),
        "{}",
        &[],
    )
    .await
    .expect(200);
    assert_eq!(bulk.json["value"], true);
}

async fn frontend_leaves_the_address_out_where_no_answer_reads_it(backend: &Backend) {
    let mut settings = settings(backend, AuthMode::Token, ClientAuth::Token);
    settings.server.trust_proxy = true;
    let app = TestApp::spawn_with(settings).await;
    let document = json!({"version": 2, "features": [
        {"name": "fe.all", "enabled": true, "strategies": [{"name": "default"}]}]});
    admin(
        &app,
        Method::POST,
        "/api/admin/state/import?environment=default&drop=true",
        Some(document),
    )
    .await
    .expect(202);
    let token = create_token(&app, json!({"tokenName": "web", "type": "frontend"})).await;
    let local = get(&app, "/api/frontend?userId=u1", Some(&token), &[])
        .await
        .expect(200);
    let etag = local.header("etag").expect("an ETag");
    // Another caller's address changes no answer here: the tag holds for it too.
    let proxied = get(
        &app,
        "/api/frontend?userId=u1",
        Some(&token),
        &[("X-Forwarded-For", "10.1.2.3"), ("If-None-Match", &etag)],
    )
    .await
    .expect(304);
    assert_eq!(proxied.header("etag"), Some(etag));
    assert_eq!(names(&local.json), ["fe.all"]);
}

/// Read-your-writes on the evaluation routes: once this replica has asked for an
/// environment's engine, a write is answered only when the frontend API and OFREP serve it —
/// a toggle switched on or off, and a toggle that did not exist (every other toggle's place
/// moves).
async fn frontend_and_ofrep_serve_a_write_once_it_is_answered(backend: &Backend) {
    let (app, token) = start(backend).await;
    let listed = |answer: &Value, name: &str| names(answer).iter().any(|n| n == name);
    let first = get(&app, "/api/frontend", Some(&token), &[])
        .await
        .expect(200);
    assert!(!listed(&first.json, "fe.off"));
    for round in 0..30 {
        let on = round % 2 == 0;
        let path = format!(
            "/api/admin/projects/default/features/fe.off/environments/default/{}",
            if on { "on" } else { "off" }
        );
        admin(&app, Method::POST, &path, None).await.expect(200);
        let answer = get(&app, "/api/frontend", Some(&token), &[])
            .await
            .expect(200);
        assert_eq!(
            listed(&answer.json, "fe.off"),
            on,
            "round {round}: {}",
            answer.json
        );
        let flag = post_raw(
            &app,
            "/ofrep/v1/evaluate/flags/fe.off",
            Some(&token),
            "{}",
            &[],
        )
        .await
        .expect(200);
        assert_eq!(flag.json["value"], on, "round {round}");

        let name = format!("fe.a{round:02}");
        admin(
            &app,
            Method::POST,
            "/api/admin/features",
            Some(json!({"name": name, "enabled": true, "strategies": [{"name": "default"}]})),
        )
        .await
        .expect(200);
        let answer = get(&app, "/api/frontend", Some(&token), &[])
            .await
            .expect(200);
        assert!(
            listed(&answer.json, &name),
            "round {round}: {}",
            answer.json
        );
    }
}
