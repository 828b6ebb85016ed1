//! Addon configurations (spec §4.7, API-FACTS §8.1): providers, validation against them,
//! masked secrets, both path styles, events, and propagation to other replicas.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{eventually, Backend, TestApp};
use crate::conformance;

conformance!(
    providers_are_listed_with_their_parameters_and_events,
    addon_lifecycle_masks_secrets,
    addon_configurations_are_validated_against_their_provider,
    slack_addons_bring_their_tag_type
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

fn webhook() -> Value {
    json!({"provider": "webhook", "description": "to the audit system",
           "parameters": {"url": "https://hooks.example.com/t0k3n", "secret": "s3cret",
                          "customHeaders": "{\"Authorization\": \"Bearer abc\"}",
                          "bodyTemplate": "{\"text\": \"{{event.type}} {{event.data.name}}\"}"},
           "events": ["feature-created", "feature-stale-on"]})
}

async fn providers_are_listed_with_their_parameters_and_events(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.get("/api/admin/addons").await.expect(200).json;
    assert_eq!(list["addons"], json!([]));
    let providers = list["providers"].as_array().expect("providers");
    let names: Vec<&str> = providers
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["webhook", "slack"]);
    for provider in providers {
        assert_eq!(
            provider["events"],
            json!([
                "feature-created",
                "feature-updated",
                "feature-archived",
                "feature-revived",
                "feature-stale-on",
                "feature-stale-off"
            ])
        );
    }
    let slack = &providers[1];
    assert_eq!(slack["tagTypes"][0]["name"], "slack");
    assert_eq!(slack["tags"], slack["tagTypes"]);
    let required: Vec<&str> = slack["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter(|p| p["required"] == true)
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    assert_eq!(required, ["url", "defaultChannel"]);
}

async fn addon_lifecycle_masks_secrets(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app
        .post("/api/admin/addons", webhook())
        .await
        .expect(201)
        .json;
    let id = created["id"].as_u64().expect("id");
    assert_eq!(created["enabled"], true, "enabled by default");
    for shown in [
        created.clone(),
        app.get(&format!("/api/admin/addons/{id}"))
            .await
            .expect(200)
            .json,
        app.get("/api/admin/addons").await.expect(200).json["addons"][0].clone(),
    ] {
        let parameters = &shown["parameters"];
        assert_eq!(parameters["url"], "*****", "{shown}");
        assert_eq!(parameters["secret"], "*****");
        assert_eq!(parameters["customHeaders"], "*****");
        assert!(parameters["bodyTemplate"]
            .as_str()
            .is_some_and(|t| t.contains("{{event.type}}")));
    }
    // What a UI sends back (masked secrets) keeps the secrets; the spec's POST path updates too.
    let mut edited = app.get(&format!("/api/admin/addons/{id}")).await.json;
    edited["enabled"] = json!(false);
    app.put(&format!("/api/admin/addons/{id}"), edited.clone())
        .await
        .expect(200);
    edited["description"] = json!("changed");
    let updated = app
        .post(&format!("/api/addons/{id}"), edited)
        .await
        .expect(200)
        .json;
    assert_eq!(updated["enabled"], false);
    assert_eq!(updated["description"], "changed");
    // The spec's create path.
    let second = app.post("/api/addons", webhook()).await.expect(201).json;
    assert_eq!(second["id"].as_u64(), Some(id + 1));
    // Unknown ids: 404 everywhere.
    for reply in [
        app.get("/api/admin/addons/99").await,
        app.put("/api/admin/addons/99", webhook()).await,
        app.post("/api/addons/99", webhook()).await,
        app.delete("/api/admin/addons/99").await,
    ] {
        reply.expect(404).error_message();
    }
    app.delete(&format!("/api/admin/addons/{id}"))
        .await
        .expect(200);
    app.get(&format!("/api/admin/addons/{id}"))
        .await
        .expect(404);
    // Events, without the parameters (they hold secrets).
    let events = app.get("/api/admin/events").await.expect(200).json;
    let kinds: Vec<(&str, &Value)> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("addon-config-"))
        })
        .map(|e| (e["type"].as_str().expect("type"), &e["data"]))
        .collect();
    let types: Vec<&str> = kinds.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        types,
        [
            "addon-config-deleted",
            "addon-config-created",
            "addon-config-updated",
            "addon-config-updated",
            "addon-config-created"
        ]
    );
    for (_, data) in kinds {
        assert!(data.get("parameters").is_none(), "{data}");
    }
}

/// The 400's detail paths for creating `body`, after checking nothing was written.
async fn refused(app: &TestApp, path: &str, body: Value) -> Vec<String> {
    let reply = app.post(path, body).await.expect(400);
    reply.error_message();
    reply.json["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].as_str().expect("path").to_string())
        .collect()
}

async fn addon_configurations_are_validated_against_their_provider(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut body = webhook();
        f(&mut body);
        body
    };
    for (body, paths) in [
        (
            with(&|b| b["provider"] = json!("pagerduty")),
            vec!["provider"],
        ),
        (
            with(&|b| {
                b.as_object_mut()
                    .expect("object")
                    .remove("provider")
                    .map(drop)
                    .unwrap_or(())
            }),
            vec!["provider"],
        ),
        (
            with(&|b| {
                b["parameters"]
                    .as_object_mut()
                    .expect("object")
                    .remove("url")
                    .map(drop)
                    .unwrap_or(())
            }),
            vec!["parameters.url"],
        ),
        (
            with(&|b| b["parameters"]["url"] = json!("not a url")),
            vec!["parameters.url"],
        ),
        (
            with(&|b| b["parameters"]["url"] = json!("file:///etc/passwd")),
            vec!["parameters.url"],
        ),
        (
            with(&|b| b["parameters"]["bodyTemplate"] = json!("{{#event}}")),
            vec!["parameters.bodyTemplate"],
        ),
        (
            with(&|b| b["parameters"]["customHeaders"] = json!("Authorization: x")),
            vec!["parameters.customHeaders"],
        ),
        (
            with(&|b| b["parameters"]["colour"] = json!("red")),
            vec!["parameters.colour"],
        ),
        (
            with(&|b| b["events"] = json!(["feature-created", "tag-created"])),
            vec!["events[1]"],
        ),
        (with(&|b| b["schedule"] = json!("daily")), vec!["schedule"]),
        (
            with(&|b| b["parameters"]["url"] = json!("*****")),
            vec!["parameters.url"],
        ),
        (with(&|b| b["provider"] = json!("")), vec!["provider"]),
        (
            with(&|b| b["events"] = json!(["feature-created", "feature-created"])),
            vec!["events[1]"],
        ),
        (
            with(&|b| b["parameters"]["contentType"] = json!("text/plain\r\nX-B: 2")),
            vec!["parameters.contentType"],
        ),
        (
            with(&|b| {
                b["parameters"]["customHeaders"] = json!("{\"X-Flagpole-Signature\": \"forged\"}")
            }),
            vec!["parameters.customHeaders"],
        ),
        (
            with(&|b| {
                b["parameters"]["customHeaders"] = json!("{\"Content-Type\": \"text/plain\"}")
            }),
            vec!["parameters.customHeaders"],
        ),
        (
            with(&|b| b["parameters"]["customHeaders"] = json!("{\"X-A\": \"1\", \"x-a\": \"2\"}")),
            vec!["parameters.customHeaders"],
        ),
        (
            with(&|b| b["parameters"]["bodyTemplate"] = json!("{{> partial}}")),
            vec!["parameters.bodyTemplate"],
        ),
        (
            with(&|b| b["parameters"]["bodyTemplate"] = json!("{{=<% %>=}}<% event.type %>")),
            vec!["parameters.bodyTemplate"],
        ),
        // Deep enough to overflow the template parser's stack: refused before parsing.
        (
            with(&|b| {
                b["parameters"]["bodyTemplate"] = json!(format!(
                    "{}x{}",
                    "{{#a}}".repeat(10_000),
                    "{{/a}}".repeat(10_000)
                ))
            }),
            vec!["parameters.bodyTemplate"],
        ),
    ] {
        assert_eq!(
            refused(&app, "/api/admin/addons", body.clone()).await,
            paths,
            "{body}"
        );
    }
    assert_eq!(app.get("/api/admin/addons").await.json["addons"], json!([]));
    // The provider of an existing addon cannot change.
    let id = app
        .post("/api/admin/addons", webhook())
        .await
        .expect(201)
        .json["id"]
        .clone();
    let reply = app
        .put(
            &format!("/api/admin/addons/{id}"),
            json!({"provider": "slack", "parameters": {"url": "https://hooks.slack.com/x", "defaultChannel": "ops"}}),
        )
        .await
        .expect(400);
    assert!(
        reply.error_message().contains("cannot change"),
        "{}",
        reply.json
    );
}

async fn slack_addons_bring_their_tag_type(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.get("/api/admin/tag-types/slack").await.expect(404);
    app.post(
        "/api/admin/addons",
        json!({"provider": "slack", "parameters": {"url": "https://hooks.slack.com/services/x",
               "defaultChannel": "releases", "username": "Flagpole"},
               "events": ["feature-created", "feature-archived"]}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/addons",
        json!({"provider": "slack", "parameters": {"url": "https://hooks.slack.com/services/x",
               "defaultChannel": "   "}}),
    )
    .await
    .expect(400);
    let tag_type = app.get("/api/admin/tag-types/slack").await.expect(200).json;
    assert_eq!(tag_type["tagType"]["icon"], "S");
    // The addon reads it: it stays, whether deleted directly or dropped by an import.
    app.delete("/api/admin/tag-types/slack")
        .await
        .expect(409)
        .error_message();
    app.post(
        "/api/admin/state/import?drop=true",
        json!({"tagTypes": [{"name": "simple", "description": "", "icon": "#"}]}),
    )
    .await
    .expect(202);
    app.get("/api/admin/tag-types/slack").await.expect(200);
}

/// A configuration is part of the snapshot: another replica has it with the next version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addon_change_reaches_every_replica() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    let id = a
        .post("/api/admin/addons", webhook())
        .await
        .expect(201)
        .json["id"]
        .clone();
    let seen = eventually(Duration::from_secs(2), || async {
        b.get(&format!("/api/admin/addons/{id}"))
            .await
            .status
            .as_u16()
            == 200
    })
    .await;
    assert!(seen, "replica b never saw the addon");
}
