//! Client registration, usage metrics and the metrics views (spec §4.3, API-FACTS §1, §12),
//! against both backends.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use flagpole::store::usage::{hour_of, hour_start_ms, minute_of, Counts, UsageBatch};

use crate::common::{send, Backend, Reply, TestApp};
use crate::conformance;

conformance!(
    reports_are_counted_and_shown_in_every_view,
    views_answer_at_the_spec_and_the_reference_paths,
    bad_reports_are_refused_with_the_field_and_change_nothing,
    identity_comes_from_the_body_or_the_sdk_headers,
    applications_can_be_described_filtered_and_deleted,
    the_client_ip_comes_from_the_proxy_only_when_trusted,
    retention_forgets_what_was_not_seen_for_two_days,
    hourly_counts_are_read_per_hour_and_kept_two_days,
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

/// A replica that flushes usage every 100 ms.
async fn spawn(backend: &Backend) -> TestApp {
    let mut settings = backend.settings();
    settings.usage.metrics_flush_interval_ms = 100;
    TestApp::spawn_with(settings).await
}

async fn post_client(app: &TestApp, path: &str, body: &str) -> Reply {
    send(
        app.anonymous(Method::POST, path)
            .header("Content-Type", "application/json")
            .body(body.to_string()),
    )
    .await
}

fn metrics_body(app: &str, instance: &str, toggles: Value) -> String {
    json!({"appName": app, "instanceId": instance,
           "bucket": {"start": "2026-11-22T10:00:00.123456789Z", "stop": "2026-11-22T10:00:10Z",
                      "toggles": toggles}})
    .to_string()
}

/// Waits until `path` answers 200 with a body for which `check` holds, and returns it.
async fn wait_for(app: &TestApp, path: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = app.get(path).await;
        if reply.status == 200 && check(&reply.json) {
            return reply.json;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path} never matched; last: {} {}",
            reply.status,
            reply.json
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn reports_are_counted_and_shown_in_every_view(backend: &Backend) {
    let app = spawn(backend).await;
    app.create_toggle("checkout").await;
    app.create_toggle("never-used").await;
    post_client(
        &app,
        "/api/client/register",
        r#"{"appName":"shop","instanceId":"i-1","sdkVersion":"unleash-client-node:6.12.1",
            "strategies":["default","flexibleRollout"],"started":"2026-11-22T09:59:00.5+01:00","interval":15000,
            "connectionId":"c","yggdrasilVersion":null}"#,
    )
    .await
    .expect(202);
    // A getVariant evaluation counts once, in yes or no; variants only break it down.
    for _ in 0..2 {
        post_client(
            &app,
            "/api/client/metrics",
            &metrics_body(
                "shop",
                "i-1",
                json!({"checkout": {"yes": 3, "no": 1, "variants": {"blue": 2, "red": 1, "disabled": 1}},
                       "ghost": {"yes": "2", "no": ""}}),
            ),
        )
        .await
        .expect(202);
    }
    post_client(
        &app,
        "/api/client/metrics",
        &metrics_body("billing", "b-1", json!({"checkout": {"yes": 10, "no": 0}})),
    )
    .await
    .expect(202);

    let view = wait_for(&app, "/api/admin/metrics/feature-toggles", |v| {
        v["lastHour"]["checkout"]["yes"] == 16
    })
    .await;
    assert_eq!(view["lastHour"]["checkout"], json!({"yes": 16, "no": 2}));
    assert_eq!(view["lastMinute"]["checkout"], json!({"yes": 16, "no": 2}));
    assert_eq!(
        view["lastHour"]["ghost"],
        json!({"yes": 4, "no": 0}),
        "unknown toggles are counted"
    );
    assert_eq!(
        view["lastHour"]["never-used"],
        json!({"yes": 0, "no": 0}),
        "every active toggle is listed"
    );

    let detail = app
        .get("/api/admin/metrics/feature-toggles/checkout")
        .await
        .expect(200)
        .json;
    assert_eq!(detail["lastHour"]["yes"], 16);
    assert_eq!(
        detail["lastHour"]["variants"],
        json!({"blue": 4, "red": 2, "disabled": 2})
    );
    let apps = detail["applications"].as_array().expect("applications");
    assert_eq!(apps.len(), 2);
    assert_eq!(apps[0]["appName"], "billing");
    assert_eq!(apps[0]["lastHour"]["yes"], 10);
    assert_eq!(apps[1]["appName"], "shop");
    assert_eq!(apps[1]["lastMinute"]["no"], 2);

    let seen = app
        .get("/api/admin/metrics/seen-toggles")
        .await
        .expect(200)
        .json;
    assert_eq!(
        seen,
        json!([
            {"appName": "billing", "seenToggles": ["checkout"], "metricsCount": 10},
            {"appName": "shop", "seenToggles": ["checkout", "ghost"], "metricsCount": 12},
        ])
    );

    let list = app
        .get("/api/admin/metrics/applications")
        .await
        .expect(200)
        .json;
    let shop = &list["applications"][1];
    assert_eq!(shop["appName"], "shop");
    assert_eq!(shop["strategies"], json!(["default", "flexibleRollout"]));
    assert_eq!(shop["links"]["appDetails"], "/api/admin/applications/shop");
    assert!(shop["createdAt"].is_string());

    let details = app
        .get("/api/admin/metrics/applications/shop")
        .await
        .expect(200)
        .json;
    assert_eq!(details["appName"], "shop");
    assert_eq!(
        details["strategies"],
        json!([{"appName": "shop", "strategies": ["default", "flexibleRollout"]}])
    );
    assert_eq!(details["seenToggles"], json!(["checkout", "ghost"]));
    let instance = &details["instances"][0];
    assert_eq!(instance["instanceId"], "i-1");
    assert_eq!(instance["sdkVersion"], "unleash-client-node:6.12.1");
    assert_eq!(instance["clientIp"], "127.0.0.1");
    assert_eq!(instance["interval"], 15000);
    assert_eq!(instance["started"], "2026-11-22T08:59:00.500Z");
    assert!(instance["lastSeen"].is_string() && instance["createdAt"].is_string());

    let seen_apps = app
        .get("/api/admin/metrics/seen-apps")
        .await
        .expect(200)
        .json;
    assert_eq!(seen_apps["checkout"].as_array().map(Vec::len), Some(2));
    assert_eq!(seen_apps["ghost"][0]["appName"], "shop");

    app.get("/api/admin/metrics/applications/nobody")
        .await
        .expect(404)
        .error_message();
}

async fn views_answer_at_the_spec_and_the_reference_paths(backend: &Backend) {
    let app = spawn(backend).await;
    // Before any client reported: empty views, not errors.
    for (path, empty) in [
        ("/api/admin/metrics/seen-toggles", json!([])),
        ("/api/admin/metrics/seen-apps", json!({})),
        (
            "/api/admin/metrics/applications",
            json!({"applications": []}),
        ),
        (
            "/api/admin/metrics/feature-toggles",
            json!({"lastHour": {}, "lastMinute": {}}),
        ),
    ] {
        assert_eq!(app.get(path).await.expect(200).json, empty, "{path}");
    }
    let versions = app
        .get("/api/admin/metrics/config-versions")
        .await
        .expect(200)
        .json;
    assert_eq!(versions["applications"], json!([]));
    post_client(
        &app,
        "/api/client/metrics",
        &metrics_body("shop", "i-1", json!({"t": {"yes": 1, "no": 0}})),
    )
    .await
    .expect(202);
    wait_for(&app, "/api/admin/metrics/seen-toggles", |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    for (spec, reference) in [
        ("/api/admin/seen-toggles", "/api/admin/metrics/seen-toggles"),
        ("/api/admin/applications", "/api/admin/metrics/applications"),
        (
            "/api/admin/applications/shop",
            "/api/admin/metrics/applications/shop",
        ),
        ("/api/admin/seen-apps", "/api/admin/metrics/seen-apps"),
    ] {
        let a = app.get(spec).await.expect(200).json;
        let b = app.get(reference).await.expect(200).json;
        assert_eq!(a, b, "{spec} and {reference} differ");
    }
    // The views are admin routes.
    send(app.anonymous(Method::GET, "/api/admin/metrics/feature-toggles"))
        .await
        .expect(401);
    // The index documents announce the new endpoints.
    let client = app.get("/api/client").await.expect(200).json;
    assert_eq!(client["links"]["metrics"]["uri"], "/api/client/metrics");
    assert_eq!(client["links"]["register"]["uri"], "/api/client/register");
}

async fn bad_reports_are_refused_with_the_field_and_change_nothing(backend: &Backend) {
    let app = spawn(backend).await;
    let bucket = r#""start":"2026-11-22T10:00:00Z","stop":"2026-11-22T10:00:10Z""#;
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), ""),
        ("".into(), ""),
        (r#"{"appName":"a","instanceId":"i"}"#.into(), "bucket"),
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket},"toggles":[1]}}}}"#),
            "bucket.toggles",
        ),
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket},"toggles":{{"t":{{"yes":-1}}}}}}}}"#),
            "bucket.toggles.t.yes",
        ),
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket},"toggles":{{"t":{{"no":2.5}}}}}}}}"#),
            "bucket.toggles.t.no",
        ),
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket},"toggles":{{"t":{{"yes":1e30}}}}}}}}"#),
            "bucket.toggles.t.yes",
        ),
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket},"toggles":{{"t":{{"yes":"many"}}}}}}}}"#),
            "bucket.toggles.t.yes",
        ),
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket},"toggles":{{"t":{{"variants":{{"v":-2}}}}}}}}}}"#),
            "bucket.toggles.t.variants.v",
        ),
        // The reference server answers 500 here (API-FACTS §1); a bad report is a 400.
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket}}}}}"#),
            "bucket.toggles",
        ),
        (
            format!(r#"{{"appName":"a","instanceId":"i","bucket":{{{bucket},"toggles":null}}}}"#),
            "bucket.toggles",
        ),
        (
            r#"{"appName":"a","instanceId":"i","bucket":{"start":"yesterday","stop":"2026-11-22T10:00:10Z"}}"#.into(),
            "bucket.start",
        ),
        (
            r#"{"appName":"a","instanceId":"i","bucket":{"start":"2026-11-22T10:00:00Z"}}"#.into(),
            "bucket.stop",
        ),
        (
            format!(r#"{{"instanceId":"i","bucket":{{{bucket}}}}}"#),
            "appName",
        ),
        (
            format!(r#"{{"appName":"","instanceId":"i","bucket":{{{bucket}}}}}"#),
            "appName",
        ),
        (
            format!(r#"{{"appName":"{}","instanceId":"i","bucket":{{{bucket}}}}}"#, "a".repeat(300)),
            "appName",
        ),
        (
            format!(r#"{{"appName":7,"instanceId":"i","bucket":{{{bucket}}}}}"#),
            "appName",
        ),
    ];
    for (body, path) in &cases {
        let reply = post_client(&app, "/api/client/metrics", body)
            .await
            .expect(400);
        reply.error_message();
        assert_eq!(reply.json["details"][0]["path"], *path, "{body}");
    }
    let too_many: serde_json::Map<String, Value> = (0..10_001)
        .map(|i| (format!("t{i}"), json!({"yes": 1})))
        .collect();
    let reply = post_client(
        &app,
        "/api/client/metrics",
        &metrics_body("a", "i", Value::Object(too_many)),
    )
    .await
    .expect(400);
    assert_eq!(reply.json["details"][0]["path"], "bucket.toggles");
    // Larger than the body limit: 413 with the JSON body.
    let huge = format!(r#"{{"appName":"a","padding":"{}"}}"#, "x".repeat(3 << 20));
    post_client(&app, "/api/client/metrics", &huge)
        .await
        .expect(413)
        .error_message();
    // Not JSON under a foreign content type: 415.
    send(
        app.anonymous(Method::POST, "/api/client/register")
            .header("Content-Type", "text/plain")
            .body("hello"),
    )
    .await
    .expect(415)
    .error_message();
    for (body, path) in [
        (r#"{"instanceId":"i"}"#, "appName"),
        (
            r#"{"appName":"a","instanceId":"i","started":"soon"}"#,
            "started",
        ),
        (
            r#"{"appName":"a","instanceId":"i","interval":-5}"#,
            "interval",
        ),
        (
            r#"{"appName":"a","instanceId":"i","sdkVersion":false}"#,
            "sdkVersion",
        ),
    ] {
        let reply = post_client(&app, "/api/client/register", body)
            .await
            .expect(400);
        assert_eq!(reply.json["details"][0]["path"], path, "{body}");
    }
    // One good report afterwards: the views hold exactly it, nothing of the refused ones.
    post_client(
        &app,
        "/api/client/metrics",
        &metrics_body("ok", "i", json!({"t": {"yes": 1}})),
    )
    .await
    .expect(202);
    let seen = wait_for(&app, "/api/admin/metrics/seen-toggles", |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    assert_eq!(
        seen,
        json!([{"appName": "ok", "seenToggles": ["t"], "metricsCount": 1}])
    );
    let apps = app.get("/api/admin/applications").await.expect(200).json;
    assert_eq!(apps["applications"].as_array().map(Vec::len), Some(1));
}

async fn identity_comes_from_the_body_or_the_sdk_headers(backend: &Backend) {
    let app = spawn(backend).await;
    // The spec's SERVICE-* headers, and the UNLEASH-* headers SDKs send, fill in a body
    // without appName/instanceId; neither is required when the body names both.
    send(
        app.anonymous(Method::POST, "/api/client/register")
            .header("SERVICE-APPNAME", "svc")
            .header("SERVICE-INSTANCEID", "s-1")
            .json(&json!({"strategies": ["default"]})),
    )
    .await
    .expect(202);
    send(
        app.anonymous(Method::POST, "/api/client/metrics")
            .header("UNLEASH-APPNAME", "sdk")
            .header("UNLEASH-INSTANCEID", "u-1")
            .json(
                &json!({"bucket": {"start": 1763805600000u64, "stop": "2026-11-22T10:00:10Z",
                                     "toggles": {"t": {"yes": 1, "no": 1}}}}),
            ),
    )
    .await
    .expect(202);
    post_client(
        &app,
        "/api/client/metrics",
        &metrics_body("body", "b-1", json!({})),
    )
    .await
    .expect(202);
    let list = wait_for(&app, "/api/admin/applications", |v| {
        v["applications"].as_array().map(Vec::len) == Some(3)
    })
    .await;
    let names: Vec<&str> = list["applications"]
        .as_array()
        .expect("list")
        .iter()
        .map(|a| a["appName"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["body", "sdk", "svc"]);
    let svc = app
        .get("/api/admin/applications/svc")
        .await
        .expect(200)
        .json;
    assert_eq!(svc["instances"][0]["instanceId"], "s-1");
}

async fn applications_can_be_described_filtered_and_deleted(backend: &Backend) {
    let app = spawn(backend).await;
    for (name, strategy) in [("web", "default"), ("api", "flexibleRollout")] {
        post_client(
            &app,
            "/api/client/register",
            &json!({"appName": name, "instanceId": "i-1", "strategies": [strategy]}).to_string(),
        )
        .await
        .expect(202);
    }
    wait_for(&app, "/api/admin/applications", |v| {
        v["applications"].as_array().map(Vec::len) == Some(2)
    })
    .await;
    let filtered = app
        .get("/api/admin/metrics/applications?strategyName=flexibleRollout")
        .await
        .expect(200)
        .json;
    assert_eq!(filtered["applications"].as_array().map(Vec::len), Some(1));
    assert_eq!(filtered["applications"][0]["appName"], "api");

    app.post(
        "/api/admin/metrics/applications/web",
        json!({"description": "The shop", "url": "https://shop.example", "color": "#ff0000", "icon": "cart"}),
    )
    .await
    .expect(202);
    let web = app
        .get("/api/admin/applications/web")
        .await
        .expect(200)
        .json;
    assert_eq!(web["description"], "The shop");
    assert_eq!(web["url"], "https://shop.example");
    assert_eq!(web["icon"], "cart");
    let listed = app.get("/api/admin/applications").await.expect(200).json;
    assert_eq!(listed["applications"][1]["color"], "#ff0000");
    // Unknown keys are refused, as the reference does.
    let reply = app
        .post(
            "/api/admin/metrics/applications/web",
            json!({"colour": "red"}),
        )
        .await
        .expect(400);
    reply.error_message();
    // Describing an application nobody has seen yet registers it.
    app.post(
        "/api/admin/metrics/applications/planned",
        json!({"description": "soon"}),
    )
    .await
    .expect(202);
    app.get("/api/admin/applications/planned").await.expect(200);

    app.delete("/api/admin/metrics/applications/web")
        .await
        .expect(200);
    app.delete("/api/admin/metrics/applications/web")
        .await
        .expect(200);
    app.get("/api/admin/applications/web").await.expect(404);
    let left = app.get("/api/admin/applications").await.expect(200).json;
    let names: Vec<&str> = left["applications"]
        .as_array()
        .expect("list")
        .iter()
        .map(|a| a["appName"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["api", "planned"]);
}

async fn the_client_ip_comes_from_the_proxy_only_when_trusted(backend: &Backend) {
    for trust in [false, true] {
        let mut settings = backend.settings();
        settings.usage.metrics_flush_interval_ms = 100;
        settings.server.trust_proxy = trust;
        let app = TestApp::spawn_with(settings).await;
        let name = format!("proxied-{trust}");
        send(
            app.anonymous(Method::POST, "/api/client/register")
                .header("X-Forwarded-For", "203.0.113.7, 10.0.0.1")
                .json(&json!({"appName": name, "instanceId": "i-1"})),
        )
        .await
        .expect(202);
        let path = format!("/api/admin/applications/{name}");
        let details = wait_for(&app, &path, |_| true).await;
        // The proxy appends the address it saw: the last entry; the ones before it are
        // whatever the client sent.
        let expected = if trust { "10.0.0.1" } else { "127.0.0.1" };
        assert_eq!(details["instances"][0]["clientIp"], expected);
        app.stop().await;
    }
}

async fn retention_forgets_what_was_not_seen_for_two_days(backend: &Backend) {
    let app = spawn(backend).await;
    for (name, instance) in [("kept", "k-1"), ("gone", "g-1")] {
        post_client(
            &app,
            "/api/client/metrics",
            &metrics_body(name, instance, json!({"old": {"yes": 1}})),
        )
        .await
        .expect(202);
    }
    wait_for(&app, "/api/admin/metrics/applications", |v| {
        v["applications"].as_array().map(Vec::len) == Some(2)
    })
    .await;
    // A moment later the application "kept" reports again, from another instance and toggle.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let between = chrono::Utc::now().timestamp_millis();
    tokio::time::sleep(Duration::from_millis(400)).await;
    post_client(
        &app,
        "/api/client/metrics",
        &metrics_body("kept", "k-2", json!({"new": {"yes": 1}})),
    )
    .await
    .expect(202);
    wait_for(&app, "/api/admin/metrics/applications/kept", |v| {
        v["instances"].as_array().map(Vec::len) == Some(2)
    })
    .await;
    app.stop().await;

    // The trim as it would run two days after `between`: what was last seen before it goes —
    // a whole application, an instance and a toggle of one still in use. (The embedded file is
    // free now that the replica stopped.)
    let day = 24 * 60 * 60 * 1000;
    let store = flagpole::open_store(&backend.settings().store)
        .await
        .expect("store")
        .usage();
    store.trim(between + 2 * day).await.expect("trim");
    let apps = store.applications(0).await.expect("apps");
    assert_eq!(
        apps.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["kept"]
    );
    let names = ["kept".to_string(), "gone".to_string()];
    let instances = store.instances(&names, 0).await.expect("instances");
    let kept: Vec<&str> = instances[0]
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    assert_eq!(kept, ["k-2"]);
    assert!(
        instances[1].is_empty(),
        "instances go with their application"
    );
    let toggles = store.seen_toggles(&names, 0).await.expect("toggles");
    assert_eq!(toggles, [vec!["new".to_string()], vec![]]);
    // Three days on, nothing is left.
    store
        .trim(chrono::Utc::now().timestamp_millis() + 3 * day)
        .await
        .expect("trim");
    assert!(store.applications(0).await.expect("apps").is_empty());
    drop(store);

    let app = spawn(backend).await;
    let list = app
        .get("/api/admin/metrics/applications")
        .await
        .expect(200)
        .json;
    assert_eq!(list, json!({"applications": []}));
    app.get("/api/admin/metrics/applications/kept")
        .await
        .expect(404);
}

/// One minute's counts of one toggle in one application, as a flush part.
fn one_minute(minute: u64, app: &str, toggle: &str, yes: u64, no: u64) -> UsageBatch {
    let mut batch = UsageBatch::default();
    let mut counts = Counts {
        yes,
        no,
        ..Counts::default()
    };
    counts.variants.insert("blue".to_string(), yes);
    batch
        .counts
        .entry(minute)
        .or_default()
        .entry(app.to_string())
        .or_default()
        .insert(toggle.to_string(), counts);
    batch
}

/// (yes, no) per hour of one application in a raw metrics document.
fn raw_counts(raw: &Value, app: &str) -> Vec<(String, u64, u64)> {
    raw["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|m| m["appName"] == app)
        .map(|m| {
            (
                m["timestamp"].as_str().unwrap_or_default().to_string(),
                m["yes"].as_u64().unwrap_or_default(),
                m["no"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

async fn hourly_counts_are_read_per_hour_and_kept_two_days(backend: &Backend) {
    // Counts a flush wrote earlier: minutes on either side of an hour's end, and one 30 hours
    // back (the flush writes what replicas counted per minute; it is the same call).
    let store = flagpole::open_store(&backend.settings().store)
        .await
        .expect("store")
        .usage();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let now_hour = hour_of(minute_of(now_ms));
    let (two_ago, one_ago, thirty_ago) = (now_hour - 2, now_hour - 1, now_hour - 30);
    // Part ids unlike the recorder's random ones (a part's marker stays two hours).
    for (id, part) in [
        (1, one_minute(two_ago * 60 + 59, "shop", "checkout", 3, 1)),
        (2, one_minute(one_ago * 60, "shop", "checkout", 4, 0)),
        (3, one_minute(one_ago * 60 + 30, "shop", "checkout", 1, 2)),
        (
            4,
            one_minute(thirty_ago * 60 + 5, "billing", "checkout", 7, 0),
        ),
        (5, one_minute(one_ago * 60, "shop", "other", 100, 100)),
    ] {
        store
            .flush(now_ms as u64 * 16 + id, &part)
            .await
            .expect("flush");
    }
    let read = store
        .hourly_counts("checkout", thirty_ago, now_hour)
        .await
        .expect("hourly");
    let hours: Vec<(u64, u64, u64)> = read
        .iter()
        .flat_map(|(h, apps)| apps.values().map(move |c| (*h, c.yes, c.no)))
        .collect();
    assert_eq!(
        hours,
        [(thirty_ago, 7, 0), (two_ago, 3, 1), (one_ago, 5, 2)],
        "minutes add up in their hour, per toggle"
    );
    drop(store);

    // The service reads them back, with what a client reports now.
    let app = spawn(backend).await;
    app.create_toggle("checkout").await;
    post_client(
        &app,
        "/api/client/metrics",
        &metrics_body(
            "shop",
            "i-1",
            json!({
                "checkout": {"yes": 2, "no": 1, "variants": {"blue": 2}},
                "made-up": {"yes": 5, "no": 0},
            }),
        ),
    )
    .await
    .expect(202);
    let path = "/api/admin/client-metrics/features/checkout/raw";
    let raw = wait_for(&app, path, |v| {
        raw_counts(v, "shop").iter().map(|c| c.1).sum::<u64>() == 10
    })
    .await;
    assert_eq!(
        (raw["version"].clone(), raw["maturity"].clone()),
        (json!(1), json!("stable"))
    );
    let shop = raw_counts(&raw, "shop");
    assert_eq!(shop.len(), 24, "24 hours by default, zeros included");
    let hour = |h: u64| {
        chrono::DateTime::from_timestamp_millis(hour_start_ms(h))
            .expect("time")
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    assert!(shop.contains(&(hour(two_ago), 3, 1)));
    assert!(shop.contains(&(hour(one_ago), 5, 2)), "{shop:?}");
    // The current hour last (the next one if the clock passed an hour meanwhile). The report
    // is counted in the hour it arrived, as its minutes are, not in its bucket's (days ago).
    let last = shop.last().map(|c| c.0.clone()).unwrap_or_default();
    assert!(
        last == hour(now_hour) || last == hour(now_hour + 1),
        "{last}"
    );
    let arrived: u64 = shop
        .iter()
        .filter(|c| c.0 == hour(now_hour) || c.0 == hour(now_hour + 1))
        .map(|c| c.1)
        .sum();
    assert_eq!(arrived, 2, "{shop:?}");
    let first = &raw["data"][0];
    assert_eq!(first["featureName"], "checkout");
    assert_eq!(first["environment"], "default");
    assert!(
        raw_counts(&raw, "billing").iter().all(|c| c.1 == 0),
        "30 hours back is outside 24"
    );
    let two_days = app
        .get(&format!("{path}?hoursBack=48"))
        .await
        .expect(200)
        .json;
    assert_eq!(raw_counts(&two_days, "shop").len(), 48);
    assert!(raw_counts(&two_days, "billing").contains(&(hour(thirty_ago), 7, 0)));
    let with_variants = two_days["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|m| m["appName"] == "billing" && m["yes"] == 7)
        .expect("billing's hour");
    assert_eq!(with_variants["variants"], json!({"blue": 7}));
    let one = app
        .get(&format!("{path}?hoursBack=1"))
        .await
        .expect(200)
        .json;
    assert_eq!(raw_counts(&one, "shop").len(), 1);
    for bad in ["0", "49", "x", "1.5"] {
        let message = app
            .get(&format!("{path}?hoursBack={bad}"))
            .await
            .expect(400)
            .error_message();
        assert!(message.contains("hoursBack"), "{bad}: {message}");
    }
    // A name that is no toggle is counted per minute, not per hour (a key per name and hour
    // kept two days would let made-up names grow the store).
    let made_up = app
        .get("/api/admin/client-metrics/features/made-up/raw")
        .await
        .expect(200)
        .json;
    assert_eq!(made_up["data"], json!([]), "{made_up}");
    let unknown = app
        .get("/api/admin/client-metrics/features/nobody/raw")
        .await
        .expect(200)
        .json;
    assert_eq!(unknown["data"], json!([]));
    app.stop().await;

    // The trim keeps hours for 49 hours after they ended (Redis lets them expire then).
    let store = flagpole::open_store(&backend.settings().store)
        .await
        .expect("store")
        .usage();
    let hour_ms = 3_600_000;
    store.trim(now_ms).await.expect("trim");
    let kept = store
        .hourly_counts("checkout", thirty_ago, now_hour + 1)
        .await
        .expect("hourly");
    assert_eq!(kept.len(), 4, "nothing within two days goes");
    if let Backend::Redis(redis) = backend {
        // Each hour's hash expires 49 hours after its hour ended.
        let key =
            flagpole::store::keys::Keys::new("test").usage_hour_counts(thirty_ago, "checkout");
        let expires: u64 = redis
            .cli_output(&["EXPIRETIME", &key])
            .trim()
            .parse()
            .expect("EXPIRETIME");
        assert_eq!(
            expires * 1000,
            hour_start_ms(thirty_ago + 1) as u64 + 49 * hour_ms as u64,
            "{key}"
        );
    }
    if matches!(backend, Backend::Embedded(_)) {
        // 49 hours after the hour 30 back ended, that hour goes and the others stay.
        store
            .trim(hour_start_ms(thirty_ago + 1) + 49 * hour_ms + 1)
            .await
            .expect("trim");
        let kept = store
            .hourly_counts("checkout", thirty_ago, now_hour)
            .await
            .expect("hourly");
        assert_eq!(
            kept.iter().map(|(h, _)| *h).collect::<Vec<_>>()[..2],
            [two_ago, one_ago]
        );
        store.trim(now_ms + 52 * hour_ms).await.expect("trim");
        assert!(store
            .hourly_counts("checkout", thirty_ago, now_hour)
            .await
            .expect("hourly")
            .is_empty());
    }
}
