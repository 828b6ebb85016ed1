//! Dependencies on a parent toggle (MODERN-MODEL §3, Unleash 7.5.1): the project routes, their
//! rules and statuses (403 for a rule broken), the same rules on 3.x writes, archiving, the
//! events, the client document, and the real Node SDK evaluating what is served.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{Backend, Reply, TestApp};
use crate::conformance;

conformance!(
    dependency_routes_set_replace_and_remove_a_parent,
    dependency_rules_answer_403_and_write_nothing,
    unknown_projects_and_toggles_answer_404,
    parents_and_parent_variants_are_listed,
    archiving_respects_dependencies,
    the_3x_api_writes_dependencies_under_the_same_rules,
    dependency_writes_record_events,
    the_client_document_serves_dependencies
);

const DEPS: &str = "/api/admin/projects/default/features";

/// Creates an enabled toggle in `project` through the 3.x API.
async fn toggle_in(app: &TestApp, name: &str, project: &str) {
    app.post(
        "/api/admin/features",
        json!({"name": name, "project": project, "enabled": true,
            "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
}

/// `POST …/features/:child/dependencies` in `default`.
async fn depend(app: &TestApp, child: &str, body: Value) -> Reply {
    app.post(&format!("{DEPS}/{child}/dependencies"), body)
        .await
}

/// The stored dependencies of an active toggle, as the admin API shows them.
async fn dependencies(app: &TestApp, name: &str) -> Value {
    let toggle = app
        .get(&format!("/api/admin/features/{name}"))
        .await
        .expect(200)
        .json;
    toggle.get("dependencies").cloned().unwrap_or(json!([]))
}

async fn project(app: &TestApp, id: &str) {
    app.post("/api/admin/projects", json!({"id": id, "name": id}))
        .await
        .expect(201);
}

async fn dependency_routes_set_replace_and_remove_a_parent(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["parent.a", "parent.b", "child"] {
        toggle_in(&app, name, "default").await;
    }
    assert_eq!(
        app.get("/api/admin/projects/default/dependencies")
            .await
            .expect(200)
            .json,
        json!(false)
    );
    // 200 with an empty body; `enabled` is true when not sent.
    let reply = depend(
        &app,
        "child",
        json!({"feature": "parent.a", "variants": ["v1"]}),
    )
    .await
    .expect(200);
    assert!(reply.bytes.is_empty(), "{:?}", reply.bytes);
    assert_eq!(
        dependencies(&app, "child").await,
        json!([{"feature": "parent.a", "enabled": true, "variants": ["v1"]}])
    );
    assert_eq!(
        app.get("/api/admin/projects/default/dependencies")
            .await
            .expect(200)
            .json,
        json!(true)
    );
    // A second parent replaces the first; `enabled: false` keeps no variants.
    depend(
        &app,
        "child",
        json!({"feature": "parent.b", "enabled": false, "variants": ["ignored"]}),
    )
    .await
    .expect(200);
    assert_eq!(
        dependencies(&app, "child").await,
        json!([{"feature": "parent.b", "enabled": false}])
    );
    // Removing another parent than the one it has changes nothing.
    app.delete(&format!("{DEPS}/child/dependencies/parent.a"))
        .await
        .expect(200);
    assert_eq!(
        dependencies(&app, "child").await.as_array().map(Vec::len),
        Some(1)
    );
    app.delete(&format!("{DEPS}/child/dependencies/parent.b"))
        .await
        .expect(200);
    assert_eq!(dependencies(&app, "child").await, json!([]));
    // Remove all.
    depend(&app, "child", json!({"feature": "parent.a"}))
        .await
        .expect(200);
    app.delete(&format!("{DEPS}/child/dependencies"))
        .await
        .expect(200);
    assert_eq!(dependencies(&app, "child").await, json!([]));
    app.delete(&format!("{DEPS}/child/dependencies"))
        .await
        .expect(200);
    // Bad bodies: 400 naming the field.
    for (body, path) in [
        (json!({}), "feature"),
        (
            json!({"feature": "parent.a", "variants": [""]}),
            "variants[0]",
        ),
        (json!({"feature": "parent.a", "owner": "me"}), "owner"),
    ] {
        let reply = depend(&app, "child", body).await.expect(400);
        assert_eq!(reply.json["details"][0]["path"], path, "{}", reply.json);
    }
    assert_eq!(dependencies(&app, "child").await, json!([]));
    // The body's schema says what the handler checks (the fuzzer generates from it).
    let document = app.get("/api/openapi.json").await.expect(200).json;
    let spec = &document["components"]["schemas"]["DependencySpec"];
    assert_eq!(spec["required"], json!(["feature"]), "{spec}");
    assert!(
        spec["properties"]["feature"]["pattern"].is_string(),
        "{spec}"
    );
    let item = &spec["properties"]["variants"]["items"];
    let item = match item["$ref"].as_str() {
        Some(reference) => {
            &document["components"]["schemas"][reference.rsplit('/').next().unwrap_or("")]
        }
        None => item,
    };
    assert_eq!(item["minLength"], 1, "{spec} {item}");
}

async fn dependency_rules_answer_403_and_write_nothing(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    project(&app, "web").await;
    for name in ["top", "middle", "leaf", "loner", "gone"] {
        toggle_in(&app, name, "default").await;
    }
    toggle_in(&app, "elsewhere", "web").await;
    app.delete("/api/admin/features/gone").await.expect(200);
    depend(&app, "middle", json!({"feature": "top"}))
        .await
        .expect(200);
    let refused = |child: &'static str, parent: &'static str, words: &'static str| {
        let app = &app;
        async move {
            let message = depend(app, child, json!({"feature": parent}))
                .await
                .expect(403)
                .error_message();
            assert!(message.contains(words), "{child} -> {parent}: {message}");
        }
    };
    refused("loner", "loner", "cannot depend on itself").await;
    // No chains, in either direction.
    refused("top", "loner", "other features depend on").await;
    refused("leaf", "middle", "has parent dependency").await;
    // The parent exists and is active, in the same project.
    refused("leaf", "nope", "No active feature nope exists").await;
    refused("leaf", "gone", "No active feature gone exists").await;
    refused("leaf", "elsewhere", "same project").await;
    assert_eq!(dependencies(&app, "leaf").await, json!([]));
    assert_eq!(dependencies(&app, "top").await, json!([]));
    assert_eq!(dependencies(&app, "loner").await, json!([]));
    // The same dependency again is accepted (and changes nothing).
    depend(&app, "middle", json!({"feature": "top"}))
        .await
        .expect(200);
}

async fn unknown_projects_and_toggles_answer_404(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    project(&app, "web").await;
    toggle_in(&app, "here", "default").await;
    toggle_in(&app, "there", "web").await;
    for reply in [
        app.post(
            "/api/admin/projects/nope/features/here/dependencies",
            json!({"feature": "there"}),
        )
        .await,
        // A toggle of another project, or none.
        depend(&app, "there", json!({"feature": "here"})).await,
        depend(&app, "missing", json!({"feature": "here"})).await,
        app.delete(&format!("{DEPS}/missing/dependencies/here"))
            .await,
        app.delete(&format!("{DEPS}/there/dependencies")).await,
        app.get(&format!("{DEPS}/there/parents")).await,
        app.get(&format!("{DEPS}/missing/parent-variants")).await,
        app.get("/api/admin/projects/nope/dependencies").await,
    ] {
        reply.expect(404).error_message();
    }
}

async fn parents_and_parent_variants_are_listed(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    project(&app, "web").await;
    for name in [
        "c.child",
        "b.parent",
        "a.other",
        "d.dependent",
        "e.archived",
    ] {
        toggle_in(&app, name, "default").await;
    }
    toggle_in(&app, "elsewhere", "web").await;
    app.delete("/api/admin/features/e.archived")
        .await
        .expect(200);
    depend(&app, "d.dependent", json!({"feature": "b.parent"}))
        .await
        .expect(200);
    // Active toggles of its project without parents, but itself, by name.
    assert_eq!(
        app.get(&format!("{DEPS}/c.child/parents"))
            .await
            .expect(200)
            .json,
        json!(["a.other", "b.parent"])
    );
    // Strategy variants and toggle variants, once each, sorted.
    app.post(
        "/api/admin/features",
        json!({"name": "variety", "enabled": true,
            "variants": [{"name": "zeta", "weight": 500}, {"name": "alpha", "weight": 500}],
            "strategies": [
                {"name": "default", "variants": [{"name": "mid"}, {"name": "alpha"}]},
                {"name": "default"}]}),
    )
    .await
    .expect(200);
    assert_eq!(
        app.get(&format!("{DEPS}/variety/parent-variants"))
            .await
            .expect(200)
            .json,
        json!(["alpha", "mid", "zeta"])
    );
    assert_eq!(
        app.get(&format!("{DEPS}/a.other/parent-variants"))
            .await
            .expect(200)
            .json,
        json!([])
    );
}

async fn archiving_respects_dependencies(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["parent", "child"] {
        toggle_in(&app, name, "default").await;
    }
    depend(&app, "child", json!({"feature": "parent"}))
        .await
        .expect(200);
    let message = app
        .delete("/api/admin/features/parent")
        .await
        .expect(403)
        .error_message();
    assert_eq!(
        message,
        "You can not archive/delete this feature since other features depend on it."
    );
    app.get("/api/admin/features/parent").await.expect(200);
    // Archiving the child drops its dependencies; the parent can go after it.
    app.delete("/api/admin/features/child").await.expect(200);
    app.delete("/api/admin/features/parent").await.expect(200);
    let archive = app
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json;
    let child = archive["features"]
        .as_array()
        .expect("features")
        .iter()
        .find(|t| t["name"] == "child")
        .expect("child archived");
    assert!(child.get("dependencies").is_none(), "{child}");
    app.post_empty("/api/admin/archive/revive/child")
        .await
        .expect(200);
    assert_eq!(dependencies(&app, "child").await, json!([]));
    assert_eq!(
        app.get("/api/admin/projects/default/dependencies")
            .await
            .expect(200)
            .json,
        json!(false)
    );
}

async fn the_3x_api_writes_dependencies_under_the_same_rules(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    project(&app, "web").await;
    for name in ["parent", "other"] {
        toggle_in(&app, name, "default").await;
    }
    let create = |name: &'static str, body: Value| {
        let app = &app;
        async move {
            let mut body = body;
            body["name"] = json!(name);
            body["strategies"] = json!([{"name": "default"}]);
            app.post("/api/admin/features", body).await
        }
    };
    // Created with a parent.
    create(
        "child",
        json!({"dependencies": [{"feature": "parent", "variants": ["v"]}]}),
    )
    .await
    .expect(200);
    assert_eq!(
        dependencies(&app, "child").await,
        json!([{"feature": "parent", "enabled": true, "variants": ["v"]}])
    );
    // At most one, with the path; the rules with 403; nothing written.
    let reply = create(
        "two",
        json!({"dependencies": [{"feature": "parent"}, {"feature": "other"}]}),
    )
    .await
    .expect(400);
    assert_eq!(
        reply.json["details"][0]["path"], "dependencies",
        "{}",
        reply.json
    );
    create(
        "grandchild",
        json!({"dependencies": [{"feature": "child"}]}),
    )
    .await
    .expect(403);
    create("orphan", json!({"dependencies": [{"feature": "nope"}]}))
        .await
        .expect(403);
    create(
        "far",
        json!({"project": "web", "dependencies": [{"feature": "parent"}]}),
    )
    .await
    .expect(403);
    for name in ["two", "grandchild", "orphan", "far"] {
        app.get(&format!("/api/admin/features/{name}"))
            .await
            .expect(404);
    }
    // A parent cannot take a parent; nor can it move to another project while it has children.
    let put = |name: &'static str, body: Value| {
        let app = &app;
        async move {
            let mut body = body;
            body["strategies"] = json!([{"name": "default"}]);
            app.put(&format!("/api/admin/features/{name}"), body).await
        }
    };
    put("parent", json!({"dependencies": [{"feature": "other"}]}))
        .await
        .expect(403);
    let message = put("parent", json!({"project": "web"}))
        .await
        .expect(403)
        .error_message();
    assert!(message.contains("Changing project"), "{message}");
    // A child cannot move away from its parent either.
    put(
        "child",
        json!({"project": "web", "dependencies": [{"feature": "parent"}]}),
    )
    .await
    .expect(403);
    // Sending the stored dependency back is fine; leaving it out removes it.
    put(
        "child",
        json!({"dependencies": [{"feature": "parent", "variants": ["v"]}]}),
    )
    .await
    .expect(200);
    put("child", json!({"enabled": true})).await.expect(200);
    assert_eq!(dependencies(&app, "child").await, json!([]));
    put("parent", json!({"project": "web"})).await.expect(200);
}

/// The events of `name`, oldest first, as (type, data).
async fn toggle_events(app: &TestApp, name: &str) -> Vec<(String, Value)> {
    let log = app
        .get(&format!("/api/admin/events/{name}"))
        .await
        .expect(200)
        .json;
    let mut events: Vec<(String, Value)> = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["type"].as_str().expect("type").to_string(),
                e["data"].clone(),
            )
        })
        .collect();
    events.reverse();
    events
}

async fn dependency_writes_record_events(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["parent", "child"] {
        toggle_in(&app, name, "default").await;
    }
    depend(
        &app,
        "child",
        json!({"feature": "parent", "variants": ["v"]}),
    )
    .await
    .expect(200);
    // Refusals and no-ops record nothing.
    depend(&app, "child", json!({"feature": "child"}))
        .await
        .expect(403);
    depend(
        &app,
        "child",
        json!({"feature": "parent", "variants": ["v"]}),
    )
    .await
    .expect(200);
    app.delete(&format!("{DEPS}/child/dependencies/other"))
        .await
        .expect(200);
    app.delete(&format!("{DEPS}/child/dependencies/parent"))
        .await
        .expect(200);
    depend(
        &app,
        "child",
        json!({"feature": "parent", "enabled": false}),
    )
    .await
    .expect(200);
    app.delete(&format!("{DEPS}/child/dependencies"))
        .await
        .expect(200);
    app.delete(&format!("{DEPS}/child/dependencies"))
        .await
        .expect(200);
    depend(&app, "child", json!({"feature": "parent"}))
        .await
        .expect(200);
    app.delete("/api/admin/features/child").await.expect(200);
    let events = toggle_events(&app, "child").await;
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "feature-created",
            "feature-dependency-added",
            "feature-dependency-removed",
            "feature-dependency-added",
            "feature-dependencies-removed",
            "feature-dependency-added",
            "feature-dependencies-removed",
            "feature-archived"
        ]
    );
    assert_eq!(
        events[1].1,
        json!({"featureName": "child", "project": "default", "feature": "parent",
            "enabled": true, "variants": ["v"]})
    );
    assert_eq!(
        events[2].1,
        json!({"featureName": "child", "project": "default", "feature": "parent"})
    );
    assert_eq!(
        events[3].1,
        json!({"featureName": "child", "project": "default", "feature": "parent",
            "enabled": false})
    );
    assert_eq!(
        events[4].1,
        json!({"featureName": "child", "project": "default"})
    );
}

/// The toggles of the client document, by name.
async fn client_toggles(app: &TestApp) -> Value {
    app.settle().await;
    let document = app.client_features("", None).await.expect(200).json;
    let mut by_name = serde_json::Map::new();
    for toggle in document["features"].as_array().expect("features") {
        by_name.insert(
            toggle["name"].as_str().expect("name").to_string(),
            toggle.clone(),
        );
    }
    Value::Object(by_name)
}

async fn the_client_document_serves_dependencies(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["parent", "on.child", "off.child", "variant.child", "plain"] {
        toggle_in(&app, name, "default").await;
    }
    depend(&app, "on.child", json!({"feature": "parent"}))
        .await
        .expect(200);
    depend(
        &app,
        "off.child",
        json!({"feature": "parent", "enabled": false}),
    )
    .await
    .expect(200);
    depend(
        &app,
        "variant.child",
        json!({"feature": "parent", "variants": ["blue"]}),
    )
    .await
    .expect(200);
    let toggles = client_toggles(&app).await;
    assert_eq!(
        toggles["on.child"]["dependencies"],
        json!([{"feature": "parent", "enabled": true, "variants": []}])
    );
    assert_eq!(
        toggles["off.child"]["dependencies"],
        json!([{"feature": "parent", "enabled": false}])
    );
    assert_eq!(
        toggles["variant.child"]["dependencies"],
        json!([{"feature": "parent", "enabled": true, "variants": ["blue"]}])
    );
    for name in ["parent", "plain"] {
        assert!(
            toggles[name].get("dependencies").is_none(),
            "{}",
            toggles[name]
        );
    }
}

/// The real Node SDK evaluates what is served: a child holds only when its parent does (or,
/// with `enabled: false`, does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_sdk_evaluates_dependencies() {
    let installed = match std::env::var("FLAGPOLE_SDK_NODE_DIR") {
        Ok(dir) if !dir.is_empty() => dir,
        _ => {
            eprintln!("skipping: FLAGPOLE_SDK_NODE_DIR not set");
            return;
        }
    };
    let app = TestApp::spawn(&Backend::embedded()).await;
    for name in ["p.on", "c.on", "c.not", "c.off.parent", "c.variant"] {
        toggle_in(&app, name, "default").await;
    }
    app.post(
        "/api/admin/features",
        json!({"name": "p.off", "enabled": false, "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(200);
    app.post(
        "/api/admin/features",
        json!({"name": "p.blue", "enabled": true, "strategies": [{"name": "default",
            "variants": [{"name": "blue"}]}]}),
    )
    .await
    .expect(200);
    for (child, body) in [
        ("c.on", json!({"feature": "p.on"})),
        ("c.not", json!({"feature": "p.off"})),
        (
            "c.off.parent",
            json!({"feature": "p.off", "enabled": false}),
        ),
        (
            "c.variant",
            json!({"feature": "p.blue", "variants": ["green"]}),
        ),
    ] {
        depend(&app, child, body).await.expect(200);
    }
    let cases = [
        ("c.on", true),
        ("c.not", false),
        ("c.off.parent", true),
        ("c.variant", false),
    ];
    let input: Vec<Value> = cases
        .iter()
        .map(|(toggle, expected)| json!({"toggle": toggle, "context": {"userId": "u1"}, "expected": expected}))
        .collect();
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("cases.json");
    std::fs::write(&file, serde_json::to_vec(&input).expect("json")).expect("cases file");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/node_constraints.js");
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("node")
            .arg(script)
            .arg(&app.base)
            .arg(&file)
            .env("NODE_PATH", PathBuf::from(installed).join("node_modules"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Node script finished in time")
    .expect("the Node script ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let expected: Vec<bool> = cases.iter().map(|(_, e)| *e).collect();
    assert_eq!(report["answers"], json!(expected), "{report}");
    app.stop().await;
}
