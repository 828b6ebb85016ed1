//! `POST /api/admin/state/import`: a JSON body with every section (summary, records, events,
//! an idempotent second import, the boolean parameters), multipart JSON and YAML files and
//! bodies, and one import seen all-or-nothing by another replica.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use super::{
    counts, events_after, import, json_bytes, last_event_id, records, refused_paths, toggle,
    type_counts, upload, yaml, Stored, Upload,
};
use crate::common::{eventually, feature_names, send, Backend, TestApp};
use crate::conformance;

conformance!(
    a_json_body_imports_every_section,
    a_kept_or_archived_toggle_keeps_its_tags,
    multipart_files_and_bodies_in_json_and_yaml,
);

// A representative subset on Redis Cluster as well (each starts a cluster of its own).

/// A document with every section whose references are all satisfied inside it.
fn whole_document() -> Value {
    json!({
        "version": 1,
        "features": [
            {"name": "shop.checkout", "description": "checkout", "project": "shop",
             "enabled": true, "createdAt": "2021-04-20T08:00:00.000Z", "lastSeenAt": null,
             "strategies": [{"name": "byPlan", "parameters": {"plans": "pro"}, "constraints": [
                {"contextName": "plan", "operator": "IN", "values": ["pro"]}]}],
             "variants": [{"name": "a", "weight": 1000}]},
            toggle("shop.search"),
        ],
        "strategies": [{"name": "byPlan", "description": "by plan", "parameters": [
            {"name": "plans", "type": "list", "description": "plans", "required": false}]}],
        "projects": [{"id": "shop", "name": "Shop", "description": "the shop"}],
        "contextFields": [{"name": "plan", "legalValues": ["free", "pro"]}],
        "tagTypes": [{"name": "area", "description": "product area", "icon": "A"}],
        "tags": [{"type": "area", "value": "checkout"}],
        "featureTags": [
            {"featureName": "shop.checkout", "tagType": "area", "tagValue": "checkout"},
            // A tag the `tags` section does not list is created, as tagging does.
            {"featureName": "shop.search", "tagType": "simple", "tagValue": "search-team"},
        ],
    })
}

async fn a_json_body_imports_every_section(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let before = last_event_id(&app).await;
    let reply = import(&app, "", &whole_document()).await.expect(202);
    assert_eq!(
        reply.json,
        json!({"dryRun": false, "drop": false, "keep": false, "changed": true, "summary": {
            "features": {"created": 2, "updated": 0, "revived": 0, "archived": 0, "unchanged": 0},
            "strategies": records(1, 0, 0, 0),
            "projects": records(1, 0, 0, 0),
            "contextFields": records(1, 0, 0, 0),
            "tagTypes": records(1, 0, 0, 0),
            "tags": records(1, 0, 0, 0),
            "featureTags": {"added": 2, "removed": 0, "unchanged": 0}}})
    );
    // Everything is there, as the admin API serves it.
    let checkout = app
        .get("/api/admin/features/shop.checkout")
        .await
        .expect(200)
        .json;
    assert_eq!(checkout["project"], "shop");
    assert_eq!(checkout["enabled"], true);
    assert_eq!(checkout["variants"][0]["name"], "a");
    assert_eq!(checkout["tags"][0]["value"], "checkout");
    // A created toggle keeps the document's createdAt.
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(checkout["createdAt"].as_str().expect("createdAt"))
            .expect("RFC 3339"),
        chrono::DateTime::parse_from_rfc3339("2021-04-20T08:00:00Z").expect("RFC 3339")
    );
    app.get("/api/admin/projects/shop").await.expect(200);
    let plan = app.get("/api/admin/context/plan").await.expect(200).json;
    assert_eq!(plan["legalValues"], json!(["free", "pro"]));
    app.get("/api/admin/strategies/byPlan").await.expect(200);
    app.get("/api/admin/tag-types/area").await.expect(200);
    app.get("/api/admin/tags/simple/search-team")
        .await
        .expect(200);
    let client = app.client_features("", None).await.expect(200).json;
    assert_eq!(feature_names(client), ["shop.checkout", "shop.search"]);
    // One event per record, and one summary event.
    let events = events_after(&app, before).await;
    assert_eq!(
        type_counts(&events),
        counts(&[
            ("feature-import", 2),
            ("strategy-import", 1),
            ("project-import", 1),
            ("context-field-import", 1),
            ("tag-type-import", 1),
            ("tag-import", 2),
            ("state-imported", 1),
        ])
    );
    assert!(
        events.iter().all(|e| e["createdBy"] == "admin"),
        "{events:?}"
    );
    let summary = events.last().expect("events");
    assert_eq!(summary["type"], "state-imported");
    assert_eq!(
        summary["data"],
        json!({"drop": false, "keep": false, "summary": reply.json["summary"]})
    );

    // The same document again changes nothing and records nothing.
    let last = last_event_id(&app).await;
    let again = import(&app, "", &whole_document()).await.expect(202).json;
    assert_eq!(again["changed"], false);
    assert_eq!(
        again["summary"]["features"],
        json!({"created": 0, "updated": 0, "revived": 0, "archived": 0, "unchanged": 2})
    );
    assert_eq!(again["summary"]["tags"], records(0, 0, 0, 1));
    assert_eq!(
        again["summary"]["featureTags"],
        json!({"added": 0, "removed": 0, "unchanged": 2})
    );
    assert_eq!(last_event_id(&app).await, last);

    // A bare `?drop` or `?keep`, `0` and `FALSE` are false: nothing is archived or kept.
    for query in ["?drop&keep", "?drop=0&keep=FALSE", "?drop=&keep="] {
        let reply = import(
            &app,
            query,
            &json!({"features": [{"name": "shop.search", "strategies": [
                {"name": "default"}], "description": query}]}),
        )
        .await
        .expect(202)
        .json;
        assert_eq!(
            (&reply["drop"], &reply["keep"]),
            (&json!(false), &json!(false))
        );
        assert_eq!(reply["summary"]["features"]["updated"], 1, "{query}");
    }
    app.get("/api/admin/features/shop.checkout")
        .await
        .expect(200);
}

async fn multipart_files_and_bodies_in_json_and_yaml(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let document = |i: usize| json!({"version": 1, "features": [toggle(&format!("fmt-{i}"))]});
    let cases: Vec<(&str, Upload)> = vec![
        (
            "file .json",
            Upload::File(Some("state.json"), json_bytes(&document(0))),
        ),
        (
            "file .yml",
            Upload::File(Some("state.yml"), yaml(&document(1))),
        ),
        (
            "file .YAML",
            Upload::File(Some("STATE.YAML"), yaml(&document(2))),
        ),
        (
            "file without extension, JSON",
            Upload::File(Some("state"), json_bytes(&document(3))),
        ),
        (
            "file without extension, YAML",
            Upload::File(Some("state"), yaml(&document(4))),
        ),
        (
            "file without a name, YAML",
            Upload::File(None, yaml(&document(5))),
        ),
        // JSON is YAML too: a .yml file holding JSON is read.
        (
            "JSON in a .yml file",
            Upload::File(Some("export.yml"), json_bytes(&document(6))),
        ),
        (
            "YAML body",
            Upload::Body(Some("text/yaml"), yaml(&document(7))),
        ),
        (
            "application/x-yaml body",
            Upload::Body(Some("application/x-yaml"), yaml(&document(8))),
        ),
        (
            "JSON body without a Content-Type",
            Upload::Body(None, json_bytes(&document(9))),
        ),
        (
            "YAML body without a Content-Type",
            Upload::Body(None, yaml(&document(10))),
        ),
        (
            "JSON body as a form (curl -d)",
            Upload::Body(
                Some("application/x-www-form-urlencoded"),
                json_bytes(&document(11)),
            ),
        ),
        ("JSON body", Upload::Json(document(12))),
    ];
    let total = cases.len();
    for (i, (what, how)) in cases.into_iter().enumerate() {
        let reply = upload(&app, "", how).await;
        assert_eq!(reply.status, 202, "{what}: {}", reply.json);
        assert_eq!(reply.json["summary"]["features"]["created"], 1, "{what}");
        app.get(&format!("/api/admin/features/fmt-{i}"))
            .await
            .expect(200);
    }
    let listed = app.get("/api/admin/features").await.expect(200).json;
    assert_eq!(feature_names(listed).len(), total);

    // The extension decides: YAML in a .json file is not JSON.
    let stored = Stored::of(&app).await;
    let reply = upload(
        &app,
        "",
        Upload::File(Some("state.json"), yaml(&document(99))),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(reply.error_message().contains("JSON"), "{}", reply.json);
    // A multipart body without a `file` part.
    let (content_type, body) = (
        "multipart/form-data; boundary=b0",
        b"--b0\r\nContent-Disposition: form-data; name=\"document\"\r\n\r\n{}\r\n--b0--\r\n"
            .to_vec(),
    );
    let reply = send(
        app.admin(reqwest::Method::POST, super::IMPORT)
            .header("Content-Type", content_type)
            .body(body),
    )
    .await;
    assert_eq!(refused_paths(&reply), ["file"]);
    stored.assert_unchanged(&app, "refused uploads").await;
}

/// 300 toggles imported through one replica: a reader polling another replica's admin and
/// client listings sees none of them or all of them, never a part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_is_seen_all_or_nothing_by_other_replicas() {
    const TOGGLES: usize = 300;
    let backend = Backend::redis();
    let writer = TestApp::spawn(&backend).await;
    let reader = TestApp::spawn(&backend).await;
    let document = json!({"features": (0..TOGGLES)
        .map(|i| toggle(&format!("bulk-{i:03}")))
        .collect::<Vec<_>>()});
    let (http, base) = (reader.http.clone(), reader.base.clone());
    let watcher = tokio::spawn(async move {
        let mut seen = BTreeSet::new();
        let mut listings = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            for path in ["/api/admin/features", "/api/client/features"] {
                let reply = send(
                    http.get(format!("{base}{path}"))
                        .basic_auth("admin", Some("")),
                )
                .await;
                assert_eq!(reply.status, 200, "{path}");
                seen.insert(feature_names(reply.json).len());
                listings += 1;
            }
            if seen.contains(&TOGGLES) {
                break;
            }
        }
        (seen, listings)
    });
    // Let the reader see the empty store a few times first.
    tokio::time::sleep(Duration::from_millis(100)).await;
    import(&writer, "", &document).await.expect(202);
    let (seen, listings) = watcher.await.expect("watcher");
    assert_eq!(
        seen,
        BTreeSet::from([0, TOGGLES]),
        "toggle counts seen in {listings} listings"
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            reader.get("/health").await.json["version"]
                == writer.get("/health").await.json["version"]
        })
        .await
    );
}

/// `keep` leaves existing toggles' tags alone, and a tag on a toggle archived since the
/// document was written is no error (a start-up document stays valid).
async fn a_kept_or_archived_toggle_keeps_its_tags(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let document = json!({"features": [
            {"name": "seeded.x", "strategies": [{"name": "default"}]},
            {"name": "seeded.y", "strategies": [{"name": "default"}]}],
        "featureTags": [
            {"featureName": "seeded.x", "tagType": "simple", "tagValue": "team-a"},
            {"featureName": "seeded.y", "tagType": "simple", "tagValue": "team-a"}]});
    app.post("/api/admin/state/import?keep=true", document.clone())
        .await
        .expect(202);
    app.delete("/api/admin/features/seeded.x/tags/simple/team-a")
        .await
        .expect(200);
    app.delete("/api/admin/features/seeded.y").await.expect(200);
    let reply = app
        .post("/api/admin/state/import?keep=true", document)
        .await
        .expect(202)
        .json;
    assert_eq!(
        reply["summary"]["featureTags"],
        json!({"added": 0, "removed": 0, "unchanged": 2}),
        "{reply}"
    );
    assert_eq!(reply["changed"], false, "{reply}");
    let tags = app
        .get("/api/admin/features/seeded.x/tags")
        .await
        .expect(200)
        .json;
    assert_eq!(tags["tags"], json!([]), "the removed tag stays removed");
}
