//! The client API: shape, ETag/304, gzip and filters (spec §4.1).

use std::io::Read;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{eventually, feature_names, send, Backend, TestApp};
use crate::conformance;

conformance!(
    client_format,
    etag_and_conditional_requests,
    gzip_is_served_when_accepted,
    answered_alike_before_and_after_routing,
    every_kind_of_write_changes_the_etag,
    filters_combine_or_within_and_across,
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

async fn client_format(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.post(
        "/api/admin/features",
        json!({"name": "shape", "description": "hidden from clients", "enabled": true,
               "strategies": [
                 {"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "default", "groupId": "shape"},
                  "constraints": [{"contextName": "environment", "operator": "NOT_IN", "values": ["dev"]}]},
                 {"name": "default"}]}),
    )
    .await
    .expect(200);
    app.create_toggle("plain").await;
    app.put(
        "/api/admin/features/plain",
        json!({"strategies": [{"name": "default"}], "variants": [{"name": "v", "weight": 1000}]}),
    )
    .await
    .expect(200);
    let body = app.client_features("", None).await.expect(200).json;
    assert_eq!(body["version"], 1);
    let features = body["features"].as_array().expect("features");
    assert_eq!(features.len(), 2);
    let plain = &features[0];
    assert_eq!(plain["name"], "plain");
    assert_eq!(plain["strategy"], "default");
    assert_eq!(plain["parameters"], json!({}));
    assert_eq!(plain["variants"][0]["name"], "v");
    assert!(plain["strategies"][0].get("constraints").is_none());
    let shape = &features[1];
    assert_eq!(shape["enabled"], true);
    assert_eq!(shape["type"], "release");
    assert_eq!(shape["stale"], false);
    assert_eq!(
        shape["strategy"], "flexibleRollout",
        "legacy: first strategy"
    );
    assert_eq!(shape["parameters"]["rollout"], "50");
    assert_eq!(
        shape["strategies"][0]["constraints"][0]["operator"],
        "NOT_IN"
    );
    assert!(
        shape.get("variants").is_none(),
        "variants only when configured"
    );
    assert!(shape.get("description").is_none());
    assert!(shape.get("tags").is_none());

    let single = send(app.anonymous(Method::GET, "/api/client/features/shape"))
        .await
        .expect(200)
        .json;
    assert_eq!(single["name"], "shape");
    assert!(single.get("version").is_none());
    assert_eq!(single["strategy"], "flexibleRollout");
}

async fn etag_and_conditional_requests(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("etag").await;
    let first = app.client_features("", None).await.expect(200);
    let etag = first.header("etag").expect("ETag on 200");
    assert!(etag.starts_with("W/\""), "{etag}");
    let strong = etag.trim_start_matches("W/").to_string();

    for candidate in [
        etag.clone(),
        strong.clone(),
        format!("\"nope\", {etag}"),
        "*".to_string(),
    ] {
        let reply = app.client_features("", Some(&candidate)).await.expect(304);
        assert!(reply.bytes.is_empty(), "304 carries no body");
        assert_eq!(
            reply.header("etag").as_deref(),
            Some(etag.as_str()),
            "ETag on 304"
        );
    }
    let other = app
        .client_features("", Some("\"something-else\""))
        .await
        .expect(200);
    assert_eq!(other.header("etag").as_deref(), Some(etag.as_str()));
    // The same content gives the same ETag on the next request.
    assert_eq!(
        app.client_features("", None)
            .await
            .header("etag")
            .as_deref(),
        Some(etag.as_str())
    );
    // Filtered responses carry their own ETag.
    let filtered = app
        .client_features("?namePrefix=zzz", None)
        .await
        .expect(200);
    assert_ne!(filtered.header("etag").as_deref(), Some(etag.as_str()));
}

/// `GET /api/client/features` is answered before routing; the same path with a trailing slash,
/// and `HEAD`, go through the router. All three must answer alike.
async fn answered_alike_before_and_after_routing(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("routed.a").await;
    app.create_toggle("routed.b").await;
    app.settle().await;
    let get = |path: &'static str, gzip: bool, etag: Option<String>| {
        let mut request = app
            .anonymous(Method::GET, path)
            .header("UNLEASH-APPNAME", "tests")
            .header("UNLEASH-INSTANCEID", "i-routed");
        if gzip {
            request = request.header("Accept-Encoding", "gzip");
        }
        if let Some(etag) = etag {
            request = request.header("If-None-Match", etag);
        }
        send(request)
    };
    let shown = |reply: &crate::common::Reply| {
        [
            "etag",
            "vary",
            "content-type",
            "content-encoding",
            "content-length",
        ]
        .map(|name| reply.header(name))
    };
    let gunzip = |bytes: &[u8]| {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut plain)
            .expect("valid gzip");
        plain
    };
    for gzip in [false, true] {
        let direct = get("/api/client/features", gzip, None).await.expect(200);
        let routed = get("/api/client/features/", gzip, None).await.expect(200);
        if gzip {
            // A build after the write may compress groups the writer's quick build stored
            // (same ETag, fewer bytes) between the two requests: compare what they hold.
            assert_eq!(shown(&direct)[..4], shown(&routed)[..4], "gzip");
            assert_eq!(gunzip(&direct.bytes), gunzip(&routed.bytes), "gzip");
        } else {
            assert_eq!(shown(&direct), shown(&routed), "plain");
            assert_eq!(direct.bytes, routed.bytes, "plain");
        }
    }
    let head = send(app.anonymous(Method::HEAD, "/api/client/features"))
        .await
        .expect(200);
    let direct = get("/api/client/features", false, None).await;
    assert_eq!(shown(&head)[..3], shown(&direct)[..3]);
    assert!(head.bytes.is_empty());
    let etag = get("/api/client/features", false, None)
        .await
        .header("etag");
    let direct = get("/api/client/features", false, etag.clone())
        .await
        .expect(304);
    let routed = get("/api/client/features/", false, etag).await.expect(304);
    assert_eq!(shown(&direct), shown(&routed));
    // Other methods are routed: the path has no POST.
    send(app.anonymous(Method::POST, "/api/client/features"))
        .await
        .expect(405);
}

async fn gzip_is_served_when_accepted(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for i in 0..20 {
        app.create_toggle(&format!("gz.{i}")).await;
    }
    let plain = app.client_features("", None).await.expect(200);
    let gzip = || async {
        send(
            app.anonymous(Method::GET, "/api/client/features")
                .header("Accept-Encoding", "gzip, deflate"),
        )
        .await
        .expect(200)
    };
    let gz = gzip().await;
    assert_eq!(gz.header("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(gz.header("etag"), plain.header("etag"));
    assert_eq!(gz.header("vary").as_deref(), Some("Accept-Encoding"));
    let mut decoded = Vec::new();
    flate2::read::GzDecoder::new(&gz.bytes[..])
        .read_to_end(&mut decoded)
        .expect("valid gzip");
    assert_eq!(decoded, plain.bytes);
    // Right after a write the changed groups may be stored uncompressed (the build the writer
    // waited for was quick); the next build compresses them, under the same ETag.
    let compressed = eventually(Duration::from_secs(5), || async {
        let gz = gzip().await;
        gz.header("etag") == plain.header("etag") && gz.bytes.len() < plain.bytes.len()
    })
    .await;
    assert!(compressed, "the gzip body is never compressed");
    let refused = send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("Accept-Encoding", "gzip;q=0"),
    )
    .await
    .expect(200);
    assert!(refused.header("content-encoding").is_none());
    let refused_with_any = send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("Accept-Encoding", "gzip;q=0, *"),
    )
    .await
    .expect(200);
    assert!(refused_with_any.header("content-encoding").is_none());
    let any = send(
        app.anonymous(Method::GET, "/api/client/features")
            .header("Accept-Encoding", "*"),
    )
    .await
    .expect(200);
    assert_eq!(any.header("content-encoding").as_deref(), Some("gzip"));
}

async fn every_kind_of_write_changes_the_etag(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let mut etag = app
        .client_features("", None)
        .await
        .header("etag")
        .expect("etag");
    let writes: Vec<(Method, &str, Option<Value>)> = vec![
        (
            Method::POST,
            "/api/admin/features",
            Some(json!({"name": "wr", "strategies": [{"name": "default"}]})),
        ),
        (
            Method::PUT,
            "/api/admin/features/wr",
            Some(json!({"strategies": [{"name": "userWithId", "parameters": {"userIds": "1"}}]})),
        ),
        (Method::POST, "/api/admin/features/wr/toggle/on", None),
        (Method::POST, "/api/admin/features/wr/toggle/off", None),
        (Method::POST, "/api/admin/features/wr/stale/on", None),
        (Method::POST, "/api/admin/features/wr/stale/off", None),
        (Method::DELETE, "/api/admin/features/wr", None),
        (
            Method::POST,
            "/api/admin/archive/revive",
            Some(json!({"name": "wr"})),
        ),
    ];
    for (method, path, body) in writes {
        // The previous ETag must stop matching right after the write returns.
        let mut request = app.admin(method.clone(), path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let status = send(request).await.status.as_u16();
        assert!(status == 200, "{method} {path} → {status}");
        let reply = app.client_features("", Some(&etag)).await.expect(200);
        let new = reply.header("etag").expect("etag");
        assert_ne!(new, etag, "{method} {path} kept the ETag");
        etag = new;
    }
    // Tag writes change filtered responses.
    let tagged_query = "?tag[]=simple:blue";
    let before = app
        .client_features(tagged_query, None)
        .await
        .header("etag")
        .expect("etag");
    app.post(
        "/api/admin/features/wr/tags",
        json!({"type": "simple", "value": "blue"}),
    )
    .await
    .expect(201);
    let after_tag = app
        .client_features(tagged_query, Some(&before))
        .await
        .expect(200);
    assert_eq!(after_tag.json["features"][0]["name"], "wr");
    let tagged_etag = after_tag.header("etag").expect("etag");
    app.delete("/api/admin/features/wr/tags/simple/blue")
        .await
        .expect(200);
    let after_untag = app
        .client_features(tagged_query, Some(&tagged_etag))
        .await
        .expect(200);
    assert_eq!(after_untag.json["features"], json!([]));
    // Writes that do not change the client document keep the ETag (it is content-based).
    let current = app
        .client_features("", None)
        .await
        .header("etag")
        .expect("etag");
    app.post(
        "/api/admin/strategies",
        json!({"name": "unrelated", "parameters": []}),
    )
    .await
    .expect(201);
    app.client_features("", Some(&current)).await.expect(304);
}

async fn filters_combine_or_within_and_across(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for project in ["web", "api"] {
        app.post(
            "/api/admin/projects",
            json!({"id": project, "name": project}),
        )
        .await
        .expect(201);
    }
    for (name, project, tag) in [
        ("web.a", "web", "red"),
        ("web.b", "web", "blue"),
        ("api.a", "api", "red"),
        ("api.b", "api", "green"),
    ] {
        app.post(
            "/api/admin/features",
            json!({"name": name, "project": project, "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(200);
        app.post(
            &format!("/api/admin/features/{name}/tags"),
            json!({"type": "simple", "value": tag}),
        )
        .await
        .expect(201);
    }
    let q = |query: &'static str| app.client_features(query, None);
    assert_eq!(
        feature_names(q("?tag[]=simple:red").await.expect(200).json),
        ["api.a", "web.a"]
    );
    assert_eq!(
        feature_names(q("?tag[]=simple:red&tag[]=simple:blue").await.json),
        ["api.a", "web.a", "web.b"]
    );
    assert_eq!(feature_names(q("?tag=simple:green").await.json), ["api.b"]);
    assert_eq!(
        feature_names(q("?project=web").await.json),
        ["web.a", "web.b"]
    );
    assert_eq!(
        feature_names(q("?project=web&project=api").await.json).len(),
        4
    );
    assert_eq!(
        feature_names(q("?namePrefix=api.").await.json),
        ["api.a", "api.b"]
    );
    assert_eq!(
        feature_names(q("?tag[]=simple:red&project=web").await.json),
        ["web.a"]
    );
    assert_eq!(
        feature_names(q("?tag[]=simple:red&namePrefix=api").await.json),
        ["api.a"]
    );
    // Equivalent queries share an ETag.
    let a = q("?tag[]=simple:red&tag[]=simple:blue")
        .await
        .header("etag");
    let b = q("?tag[]=simple:blue&tag[]=simple:red")
        .await
        .header("etag");
    assert_eq!(a, b);
    // spec §4.1: the client endpoint answers only 20x/304, so a malformed filter matches nothing.
    let bad = q("?tag[]=nocolon").await.expect(200);
    assert_eq!(bad.json["features"], json!([]));
    assert!(bad.header("etag").is_some());
    // The admin list applies the same filters, and 400s malformed ones.
    let admin = app
        .get("/api/admin/features?tag[]=simple:red&project=api")
        .await
        .expect(200)
        .json;
    assert_eq!(feature_names(admin), ["api.a"]);
    app.get("/api/admin/features?tag[]=nocolon")
        .await
        .expect(400);
}
