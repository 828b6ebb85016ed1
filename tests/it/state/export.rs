//! `GET /api/admin/state/export`: the document (API-FACTS §7.2) and every query parameter,
//! with the boolean parsing of API-FACTS §7.1.

use chrono::{DateTime, Local, NaiveDateTime, Utc};
use serde_json::{json, Value};

use super::{export, export_reply, populate};
use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    the_document_holds_active_toggles_and_everything_but_built_ins,
    format_and_download,
    sections_can_be_left_out,
);

/// Every section, in the order the document has them.
const ALL: [&str; 14] = [
    "version",
    "features",
    "strategies",
    "projects",
    "contextFields",
    "tagTypes",
    "tags",
    "featureTags",
    "environments",
    "featureEnvironments",
    "segments",
    "archivedFeatures",
    "apiTokens",
    "addons",
];

/// The sections that go with `featureToggles`.
const TOGGLES: [&str; 3] = ["features", "featureEnvironments", "archivedFeatures"];

/// The sections that go with `projects`.
const PROJECTS: [&str; 6] = [
    "projects",
    "contextFields",
    "environments",
    "segments",
    "apiTokens",
    "addons",
];

/// The top-level keys of a document, in order.
fn keys(document: &Value) -> Vec<String> {
    document
        .as_object()
        .expect("the document is an object")
        .keys()
        .cloned()
        .collect()
}

/// `ALL` without `left_out`.
fn all_but(left_out: &[&str]) -> Vec<String> {
    ALL.iter()
        .filter(|k| !left_out.contains(k))
        .map(|k| k.to_string())
        .collect()
}

/// The `field` of every item of `list`.
fn column(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|item| item[field].as_str().expect("a string field").to_string())
        .collect()
}

async fn the_document_holds_active_toggles_and_everything_but_built_ins(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    populate(&app).await;
    let reply = export_reply(&app, "").await;
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(reply.header("content-disposition"), None);
    let document = reply.json;
    assert_eq!(keys(&document), ALL);
    assert_eq!(document["version"], 2);

    // Active toggles only (the archived `old` is in `archivedFeatures`), each as the admin
    // API serves it, less its tags (they travel in `featureTags`) and its configuration
    // (`featureEnvironments`, per environment).
    assert_eq!(
        column(&document["features"], "name"),
        ["checkout", "search"]
    );
    for exported in document["features"].as_array().expect("features") {
        let name = exported["name"].as_str().expect("name");
        let mut admin = app
            .get(&format!("/api/admin/features/{name}"))
            .await
            .expect(200)
            .json;
        for field in ["tags", "enabled", "strategies", "variants"] {
            admin.as_object_mut().expect("toggle").remove(field);
        }
        assert_eq!(exported, &admin);
        let default = document["featureEnvironments"]
            .as_array()
            .expect("featureEnvironments")
            .iter()
            .find(|fe| fe["featureName"] == name && fe["environment"] == "default")
            .expect("the default environment");
        let served = app
            .get(&format!("/api/admin/features/{name}"))
            .await
            .expect(200)
            .json;
        assert_eq!(default["enabled"], served["enabled"]);
        assert_eq!(default["strategies"], served["strategies"]);
    }
    assert_eq!(column(&document["archivedFeatures"], "name"), ["old"]);
    assert_eq!(document["features"][0]["impressionData"], true);
    assert_eq!(document["features"][1]["stale"], true);

    // Strategy definitions: no built-ins, no `editable`.
    assert_eq!(
        document["strategies"],
        json!([{"name": "byRegion", "description": "by region", "parameters": [
            {"name": "regions", "type": "list", "description": "regions", "required": true}],
            "deprecated": false}])
    );
    // Projects and context fields as their endpoints serve them.
    let projects = app.get("/api/admin/projects").await.expect(200).json;
    assert_eq!(document["projects"], projects["projects"]);
    assert_eq!(column(&document["projects"], "id"), ["default", "web"]);
    let mut fields = app.get("/api/admin/context").await.expect(200).json;
    let by_name = |f: &Value| f["name"].as_str().expect("name").to_string();
    fields
        .as_array_mut()
        .expect("context fields")
        .sort_by_key(by_name);
    assert_eq!(document["contextFields"], fields);
    assert!(column(&document["contextFields"], "name").contains(&"region".to_string()));
    // Tag types, tags and the tags on toggles.
    let tag_types = app.get("/api/admin/tag-types").await.expect(200).json;
    assert_eq!(document["tagTypes"], tag_types["tagTypes"]);
    assert_eq!(column(&document["tagTypes"], "name"), ["simple", "team"]);
    assert_eq!(
        document["tags"],
        json!([{"type": "simple", "value": "search-team"}, {"type": "team", "value": "payments"}])
    );
    assert_eq!(
        document["featureTags"],
        json!([
            {"featureName": "search", "tagType": "simple", "tagValue": "search-team"},
            {"featureName": "search", "tagType": "team", "tagValue": "payments"}])
    );
}

/// The timestamp of a download's file name (`export-YYYY-MM-DD_HH-mm-ss.<extension>`).
fn file_stamp(disposition: &str, extension: &str) -> NaiveDateTime {
    let stamp = disposition
        .strip_prefix("attachment; filename=\"export-")
        .and_then(|rest| rest.strip_suffix(&format!(".{extension}\"")))
        .unwrap_or_else(|| panic!("unexpected Content-Disposition: {disposition}"));
    NaiveDateTime::parse_from_str(stamp, "%Y-%m-%d_%H-%M-%S")
        .unwrap_or_else(|e| panic!("file name stamp {stamp:?}: {e}"))
}

/// Whether `stamp` is within a minute of now, in UTC or in the server's local time.
fn is_now(stamp: NaiveDateTime) -> bool {
    let near = |now: NaiveDateTime| (now - stamp).num_seconds().abs() <= 60;
    near(Utc::now().naive_utc()) || near(Local::now().naive_local())
}

async fn format_and_download(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    populate(&app).await;
    let json_document = export(&app, "").await;

    // YAML: the same document.
    let reply = export_reply(&app, "?format=yaml").await;
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("text/yaml; charset=utf-8")
    );
    let from_yaml: Value = yaml_serde::from_slice(&reply.bytes).expect("the export is YAML");
    assert_eq!(from_yaml, json_document);
    // Any other format is JSON.
    let reply = export_reply(&app, "?format=xml").await;
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(reply.json, json_document);

    // `download` adds an attachment with a dated name; `.yml` for YAML.
    for (query, extension) in [
        ("?download=1", "json"),
        ("?download=true", "json"),
        ("?download=TRUE&format=yaml", "yml"),
        ("?format=yaml&download=7", "yml"),
    ] {
        let reply = export_reply(&app, query).await;
        let disposition = reply
            .header("content-disposition")
            .unwrap_or_else(|| panic!("{query}: no Content-Disposition"));
        let stamp = file_stamp(&disposition, extension);
        assert!(is_now(stamp), "{query}: {disposition} is not dated now");
    }
    for query in [
        "?download",
        "?download=",
        "?download=0",
        "?download=false",
        "?download=yes",
    ] {
        let reply = export_reply(&app, query).await;
        assert_eq!(reply.header("content-disposition"), None, "{query}");
        assert_eq!(reply.json, json_document, "{query}");
    }
    // The document's own timestamps are RFC 3339.
    let created = json_document["features"][0]["createdAt"]
        .as_str()
        .expect("createdAt");
    DateTime::parse_from_rfc3339(created).expect("createdAt is RFC 3339");
}

async fn sections_can_be_left_out(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    populate(&app).await;
    let full = export(&app, "").await;
    let cases: [(&str, Vec<String>); 18] = [
        ("", all_but(&[])),
        ("?featureToggles=1", all_but(&[])),
        ("?featureToggles=true", all_but(&[])),
        ("?featureToggles=TRUE", all_but(&[])),
        ("?featureToggles=-2", all_but(&[])),
        ("?featureToggles=0", all_but(&TOGGLES)),
        ("?featureToggles=false", all_but(&TOGGLES)),
        // A bare parameter, or anything but an integer or "true", is false.
        ("?featureToggles", all_but(&TOGGLES)),
        ("?featureToggles=", all_but(&TOGGLES)),
        ("?featureToggles=yes", all_but(&TOGGLES)),
        ("?strategies=0", all_but(&["strategies"])),
        ("?tags=false", all_but(&["tagTypes", "tags", "featureTags"])),
        ("?projects=0", all_but(&PROJECTS)),
        ("?projects=1&tags=1&strategies=TRUE", all_but(&[])),
        (
            "?featureToggles=0&strategies=0&tags=0&projects=0",
            vec!["version".to_string()],
        ),
        (
            "?format=yaml&tags=0&projects=false",
            all_but(&[
                "tagTypes",
                "tags",
                "featureTags",
                "projects",
                "contextFields",
                "environments",
                "segments",
                "apiTokens",
                "addons",
            ]),
        ),
        ("?format=yaml&featureToggles", all_but(&TOGGLES)),
        (
            "?download=1&strategies=0&featureToggles=1",
            all_but(&["strategies"]),
        ),
    ];
    for (query, expected) in cases {
        let reply = export_reply(&app, query).await;
        let document: Value = if query.contains("format=yaml") {
            yaml_serde::from_slice(&reply.bytes).expect("YAML")
        } else {
            reply.json
        };
        assert_eq!(keys(&document), expected, "{query}");
        // What is left is exactly what the full export holds.
        for key in &expected {
            assert_eq!(document[key], full[key], "{query}: {key}");
        }
    }
}
