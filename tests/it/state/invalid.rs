//! Refused imports: documents that cannot be parsed, have the wrong shape, break a rule or
//! name what does not exist — each answered 400 with every problem and its path, with nothing
//! written — and the same references satisfied by the document itself; the body limit (413);
//! YAML alias bombs and deep nesting.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{
    import, isolated_settings, json_bytes, populate, refused_paths, toggle, upload, yaml, Binary,
    Stored, Upload,
};
use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    invalid_documents_are_refused_whole,
    every_problem_of_a_document_is_listed_at_once,
    references_the_document_satisfies_are_accepted,
    a_body_over_the_limit_is_413,
    yaml_bombs_and_deep_nesting_are_refused_quickly,
);

/// `document` with a valid new toggle added (in `features`, after the items the case is
/// about), so that a refusal has something it must not write.
fn with_innocent(mut document: Value) -> Value {
    if let Some(map) = document.as_object_mut() {
        match map.get_mut("features") {
            Some(Value::Array(features)) => features.push(toggle("innocent")),
            None => {
                map.insert("features".into(), json!([toggle("innocent")]));
            }
            Some(_) => {}
        }
    }
    document
}

/// A toggle of a document with a single `default` strategy carrying `constraint`.
fn constrained(name: &str, constraint: Value) -> Value {
    json!({"name": name, "strategies": [{"name": "default", "constraints": [constraint]}]})
}

/// Every kind of invalid document, with the paths its refusal must list.
fn invalid_cases() -> Vec<(&'static str, Upload, Vec<&'static str>)> {
    let doc = |value: Value| Upload::Json(with_innocent(value));
    vec![
        (
            "unparsable JSON",
            Upload::Body(Some("application/json"), b"{\"features\": [".to_vec()),
            vec![""],
        ),
        (
            "unparsable JSON file",
            Upload::File(Some("state.json"), b"{\"features\": [}".to_vec()),
            vec![""],
        ),
        (
            "unparsable YAML",
            Upload::Body(Some("text/yaml"), b"features:\n  - name: [\n".to_vec()),
            vec![""],
        ),
        (
            "unparsable YAML file",
            Upload::File(Some("state.yml"), b"features: {name: x\n".to_vec()),
            vec![""],
        ),
        (
            "an empty body",
            Upload::Body(Some("application/json"), Vec::new()),
            vec![""],
        ),
        (
            "a key twice in JSON",
            Upload::Body(
                Some("application/json"),
                br#"{"features": [], "features": [{"name": "innocent"}]}"#.to_vec(),
            ),
            vec![""],
        ),
        (
            "a key twice in a YAML toggle",
            Upload::Body(
                Some("text/yaml"),
                b"features:\n- {name: innocent, name: other, strategies: [{name: default}]}\n"
                    .to_vec(),
            ),
            vec![""],
        ),
        (
            "two YAML documents",
            Upload::File(
                Some("state.yml"),
                b"features: [{name: innocent, strategies: [{name: default}]}]\n---\nversion: 1\n"
                    .to_vec(),
            ),
            vec![""],
        ),
        (
            "a top-level array",
            Upload::Json(json!([toggle("innocent")])),
            vec![""],
        ),
        (
            "a top-level string",
            Upload::Json(json!("features")),
            vec![""],
        ),
        (
            "an unknown top-level key",
            doc(json!({"users": []})),
            vec!["users"],
        ),
        (
            "an unsupported version",
            doc(json!({"version": 3})),
            vec!["version"],
        ),
        (
            "features not a list",
            Upload::Json(json!({"features": {"a": 1}})),
            vec!["features"],
        ),
        (
            "tags not a list",
            doc(json!({"tags": "simple:x"})),
            vec!["tags"],
        ),
        (
            "a bad toggle name",
            doc(json!({"features": [toggle("a b")]})),
            vec!["features[0].name"],
        ),
        (
            "a toggle with an empty strategy list",
            doc(json!({"features": [{"name": "empty", "strategies": []}]})),
            vec!["features[0].strategies"],
        ),
        (
            "a toggle without strategies",
            doc(json!({"features": [{"name": "bare"}]})),
            vec!["features[0].strategies"],
        ),
        (
            "a field of the wrong type",
            doc(json!({"features": [{"name": "typed", "enabled": "yes",
                "strategies": [{"name": "default"}]}]})),
            vec!["features[0].enabled"],
        ),
        (
            "an unknown field in a toggle",
            doc(json!({"features": [{"name": "seg", "segments": [1],
                "strategies": [{"name": "default"}]}]})),
            vec!["features[0].segments"],
        ),
        (
            "an unknown field in a project",
            doc(json!({"projects": [{"id": "p1", "name": "P", "owner": "me"}]})),
            vec!["projects[0].owner"],
        ),
        (
            "tags inside a toggle (they belong in featureTags)",
            doc(
                json!({"features": [{"name": "tagged", "tags": [{"type": "simple", "value": "x1"}],
                "strategies": [{"name": "default"}]}]}),
            ),
            vec!["features[0].tags"],
        ),
        (
            "a strategy's deprecated flag not a boolean",
            doc(json!({"strategies": [{"name": "s1", "parameters": [], "deprecated": "no"}]})),
            vec!["strategies[0].deprecated"],
        ),
        (
            "duplicate toggle names",
            doc(json!({"features": [toggle("twice"), toggle("twice")]})),
            vec!["features[1].name"],
        ),
        (
            "duplicate project ids",
            doc(json!({"projects": [{"id": "p1", "name": "A"}, {"id": "p1", "name": "B"}]})),
            vec!["projects[1].id"],
        ),
        (
            "duplicate strategy names",
            doc(json!({"strategies": [{"name": "s1", "parameters": []},
                {"name": "s1", "parameters": []}]})),
            vec!["strategies[1].name"],
        ),
        (
            "a built-in strategy",
            doc(json!({"strategies": [{"name": "flexibleRollout", "parameters": []}]})),
            vec!["strategies[0].name"],
        ),
        (
            "a missing project",
            doc(
                json!({"features": [{"name": "homeless", "project": "nowhere",
                "strategies": [{"name": "default"}]}]}),
            ),
            vec!["features[0].project"],
        ),
        (
            "a missing context field",
            doc(json!({"features": [constrained("c1",
                json!({"contextName": "nowhere", "operator": "IN", "values": ["x"]}))]})),
            vec!["features[0].strategies[0].constraints[0].contextName"],
        ),
        (
            "a missing strategy definition",
            doc(json!({"features": [{"name": "s1", "strategies": [{"name": "nowhere"}]}]})),
            vec!["features[0].strategies[0].name"],
        ),
        (
            "a tag of a missing type",
            doc(json!({"tags": [{"type": "nowhere", "value": "v1"}]})),
            vec!["tags[0].type"],
        ),
        (
            "a tag on a missing toggle",
            doc(json!({"featureTags": [
                {"featureName": "nowhere", "tagType": "simple", "tagValue": "v1"}]})),
            vec!["featureTags[0].featureName"],
        ),
        (
            "a tag on a toggle of a missing tag type",
            doc(json!({"featureTags": [
                {"featureName": "innocent", "tagType": "nowhere", "tagValue": "v1"}]})),
            vec!["featureTags[0].tagType"],
        ),
    ]
}

async fn invalid_documents_are_refused_whole(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    populate(&app).await;
    let stored = Stored::of(&app).await;
    for (what, how, expected) in invalid_cases() {
        for query in ["", "?drop=1&keep=1"] {
            let reply = upload(&app, query, how.clone()).await;
            assert_eq!(
                refused_paths(&reply),
                expected,
                "{what} {query}: {}",
                reply.json
            );
        }
        stored.assert_unchanged(&app, what).await;
        app.get("/api/admin/features/innocent").await.expect(404);
    }
    // A dry run of an invalid document is refused the same way.
    let reply = import(
        &app,
        "?dryRun=true",
        &with_innocent(json!({"features": [toggle("a b")]})),
    )
    .await;
    assert_eq!(refused_paths(&reply), ["features[0].name"]);
    stored.assert_unchanged(&app, "an invalid dry run").await;
}

async fn every_problem_of_a_document_is_listed_at_once(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    populate(&app).await;
    let stored = Stored::of(&app).await;
    let document = json!({
        "version": 1,
        "segments": [],
        "features": [
            toggle("a b"),
            {"name": "no-strategies", "strategies": []},
            toggle("twice"),
            toggle("twice"),
            {"name": "homeless", "project": "nowhere", "strategies": [{"name": "default"}]},
            {"name": "seg", "segments": [1], "strategies": [{"name": "default"}]},
            constrained("fieldless",
                json!({"contextName": "nowhere", "operator": "IN", "values": ["x"]})),
            {"name": "undefined", "strategies": [{"name": "nowhere"}]},
            toggle("innocent"),
        ],
        "strategies": [{"name": "default", "parameters": []}, {"name": "s1", "parameters": []},
                       {"name": "s1", "parameters": []}],
        "projects": [{"id": "p1", "name": "A"}, {"id": "p1", "name": "B"}],
        "tags": [{"type": "nowhere", "value": "v1"}],
        "featureTags": [
            {"featureName": "nowhere", "tagType": "simple", "tagValue": "v1"},
            {"featureName": "innocent", "tagType": "nowhere", "tagValue": "v1"}],
    });
    let mut expected = vec![
        "segments",
        "features[0].name",
        "features[1].strategies",
        "features[3].name",
        "features[4].project",
        "features[5].segments",
        "features[6].strategies[0].constraints[0].contextName",
        "features[7].strategies[0].name",
        "strategies[0].name",
        "strategies[2].name",
        "projects[1].id",
        "tags[0].type",
        "featureTags[0].featureName",
        "featureTags[1].tagType",
    ];
    expected.sort_unstable();
    for how in [
        Upload::Json(document.clone()),
        Upload::File(Some("state.yaml"), yaml(&document)),
    ] {
        let reply = upload(&app, "", how).await;
        assert_eq!(refused_paths(&reply), expected, "{}", reply.json);
    }
    stored
        .assert_unchanged(&app, "a document with many problems")
        .await;
}

async fn references_the_document_satisfies_are_accepted(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    populate(&app).await;
    let document = json!({
        "projects": [{"id": "nowhere", "name": "Now here"}],
        "contextFields": [{"name": "nowhere"}],
        "strategies": [{"name": "nowhere", "parameters": []}],
        "tagTypes": [{"name": "nowhere"}],
        "tags": [{"type": "nowhere", "value": "v1"}],
        "features": [
            {"name": "homeless", "project": "nowhere", "strategies": [{"name": "nowhere",
                "constraints": [{"contextName": "nowhere", "operator": "IN", "values": ["x"]}]}]},
        ],
        "featureTags": [
            {"featureName": "homeless", "tagType": "nowhere", "tagValue": "v1"},
            // Stored references count too: an existing toggle and tag type.
            {"featureName": "search", "tagType": "team", "tagValue": "v2"}],
    });
    let reply = import(&app, "", &document).await.expect(202).json;
    assert_eq!(reply["summary"]["featureTags"]["added"], 2, "{reply}");
    let toggle = app
        .get("/api/admin/features/homeless")
        .await
        .expect(200)
        .json;
    assert_eq!(toggle["project"], "nowhere");
    assert_eq!(toggle["tags"][0]["type"], "nowhere");
}

/// A document of about `mib` MiB.
fn document_of(mib: usize) -> Value {
    let description = "x".repeat(1000);
    let features: Vec<Value> = (0..mib * 1050)
        .map(|i| {
            json!({"name": format!("big-{i}"), "description": description,
            "strategies": [{"name": "default"}]})
        })
        .collect();
    json!({"features": features})
}

async fn a_body_over_the_limit_is_413(backend: &Backend) {
    let mut settings = isolated_settings(backend, "limited");
    settings.server.import_body_limit_mib = 1;
    let app = TestApp::spawn_with(settings).await;
    let stored = Stored::of(&app).await;
    let document = document_of(2);
    let bytes = json_bytes(&document);
    assert!(bytes.len() > 2 << 20, "{} bytes", bytes.len());
    for (what, how) in [
        (
            "JSON body",
            Upload::Body(Some("application/json"), bytes.clone()),
        ),
        (
            "multipart file",
            Upload::File(Some("big.json"), bytes.clone()),
        ),
        (
            "YAML body",
            Upload::Body(Some("text/yaml"), yaml(&document)),
        ),
    ] {
        let reply = upload(&app, "", how).await;
        assert_eq!(
            reply.status,
            413,
            "{what}: {}",
            String::from_utf8_lossy(&reply.bytes)
        );
        assert_eq!(
            reply.header("content-type").as_deref(),
            Some("application/json"),
            "{what}"
        );
        let message = reply.error_message();
        assert!(
            message.contains("import-body-limit-mib"),
            "{what}: {message}"
        );
    }
    stored.assert_unchanged(&app, "bodies over the limit").await;
    // Under the limit, imports work.
    import(&app, "", &json!({"features": [toggle("small")]}))
        .await
        .expect(202);
}

/// One anchored list of 1,000 strings referenced 20,000 times: 20 million strings from a
/// document of a few hundred kilobytes.
fn wide_aliases() -> Vec<u8> {
    let list = ["x"; 1000].join(", ");
    let references = ["*a"; 20_000].join(", ");
    format!("base: &a [{list}]\nfeatures: [{references}]\n").into_bytes()
}

/// Nine levels of nine aliases: 9^9 (387 million) strings once expanded.
fn billion_laughs() -> Vec<u8> {
    let mut bomb = format!("lol0: &lol0 [{}]\n", ["\"lol\""; 9].join(", "));
    for level in 1..9 {
        let previous = format!("*lol{}", level - 1);
        let row = [previous.as_str(); 9].join(", ");
        bomb.push_str(&format!("lol{level}: &lol{level} [{row}]\n"));
    }
    bomb.push_str("features: [*lol8]\n");
    bomb.into_bytes()
}

async fn yaml_bombs_and_deep_nesting_are_refused_quickly(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let stored = Stored::of(&app).await;
    let depth = 10_000;
    let deep_flow = format!("features: {}1{}", "[".repeat(depth), "]".repeat(depth));
    let deep_block = format!("features:\n  {}1\n", "- ".repeat(depth));
    let deep_map = format!("features: {}1{}", "{a: ".repeat(depth), "}".repeat(depth));
    let deep_json = format!(
        "{{\"features\": {}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let cases = [
        (
            "billion laughs body",
            Upload::Body(Some("text/yaml"), billion_laughs()),
        ),
        (
            "billion laughs file",
            Upload::File(Some("bomb.yml"), billion_laughs()),
        ),
        (
            "billion laughs sniffed",
            Upload::File(Some("bomb"), billion_laughs()),
        ),
        (
            "one anchor, many aliases",
            Upload::Body(Some("text/yaml"), wide_aliases()),
        ),
        (
            "deep flow sequences",
            Upload::Body(Some("text/yaml"), deep_flow.into_bytes()),
        ),
        (
            "deep block sequences",
            Upload::File(Some("deep.yaml"), deep_block.into_bytes()),
        ),
        (
            "deep mappings",
            Upload::Body(Some("application/yaml"), deep_map.into_bytes()),
        ),
        (
            "deep JSON",
            Upload::Body(Some("application/json"), deep_json.into_bytes()),
        ),
    ];
    for (what, how) in cases {
        let started = Instant::now();
        let reply = upload(&app, "", how).await;
        let took = started.elapsed();
        assert_eq!(refused_paths(&reply), [""], "{what}: {}", reply.json);
        // Generous for a debug build on a loaded machine; an unbounded parse takes minutes.
        assert!(took < Duration::from_secs(5), "{what} took {took:?}");
    }
    stored.assert_unchanged(&app, "YAML bombs").await;
    app.get("/health").await.expect(200);
}

/// Deep nesting costs a YAML parser time that grows with the square of the depth. Documents
/// far below the body limit (100,000 levels: 500 KB) must still be refused at once, and the
/// replica must keep answering other requests meanwhile. The real binary (on the embedded
/// store: the document is refused before any store is involved), so that a parse that never
/// ends is killed with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_yaml_neither_takes_long_nor_stalls_the_replica() {
    let data = tempfile::tempdir().expect("temp dir");
    let binary = Binary::start(data.path()).await;
    let depth = 100_000;
    let deep = format!("features: {}1{}", "{a: ".repeat(depth), "}".repeat(depth));
    let import = || {
        let request = binary
            .http
            .post(format!("{}{}", binary.base, super::IMPORT))
            .basic_auth("admin", Some(""))
            .header("Content-Type", "text/yaml")
            .body(deep.clone())
            .timeout(Duration::from_secs(3));
        async move { request.send().await.map(|r| r.status().as_u16()) }
    };
    let probe = async {
        // Once both imports are being parsed, the replica must still answer.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let health = binary
            .http
            .get(format!("{}/health", binary.base))
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        health.map(|r| r.status().as_u16())
    };
    let (first, second, health) = tokio::join!(import(), import(), probe);
    assert!(
        matches!(health, Ok(200)),
        "/health while two deep documents were parsed: {health:?}"
    );
    for answer in [first, second] {
        assert!(
            matches!(answer, Ok(400)),
            "a {depth}-deep YAML document (a 400 within 3 s expected): {answer:?}"
        );
    }
}
