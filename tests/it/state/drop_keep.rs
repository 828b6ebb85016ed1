//! `drop`, `keep`, both and `dryRun` on a store with something in every section: the
//! summaries, the toggles a dry run lists, the events, what the store holds after (revival by
//! import, toggles archived by `drop` and revived); dropping projects (archived toggles move to
//! `default`; refused while active toggles would lose theirs).

use serde_json::{json, Value};

use super::{
    archived_project, counts, events_after, import, last_event_id, records, refused_paths,
    spawn_isolated, toggle, type_counts, Stored,
};
use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(
    drop_keep_and_dry_run_in_every_combination,
    dropping_projects_moves_archived_toggles_and_refuses_orphans,
    a_toggle_archived_by_a_drop_does_not_keep_a_dropped_project,
);

/// The store every combination starts from: for each section a record the document holds
/// as it is (`same`), one it changes (`changed`), one it does not list (`extra`); an
/// archived toggle it lists (`back`) and one of project `p-extra` (`arch-x`).
fn base_document() -> Value {
    json!({
        "projects": [{"id": "p-same", "name": "Same"}, {"id": "p-changed", "name": "Before"},
                     {"id": "p-extra", "name": "Extra"}],
        "contextFields": [{"name": "c-same"}, {"name": "c-changed", "description": "before"},
                          {"name": "c-extra"}],
        "strategies": [{"name": "s-same", "parameters": []},
                       {"name": "s-changed", "description": "before", "parameters": []},
                       {"name": "s-extra", "parameters": []}],
        "tagTypes": [{"name": "tt-extra"}],
        "tags": [{"type": "simple", "value": "t-same"}, {"type": "simple", "value": "t-extra"},
                 {"type": "tt-extra", "value": "v-extra"}],
        "features": [same_toggle(), changed_toggle(false), toggle("extra"), toggle("back"),
                     {"name": "arch-x", "project": "p-extra", "strategies": [{"name": "default"}]}],
        "featureTags": [
            {"featureName": "same", "tagType": "simple", "tagValue": "t-same"},
            {"featureName": "changed", "tagType": "simple", "tagValue": "t-same"},
            {"featureName": "extra", "tagType": "simple", "tagValue": "t-extra"}],
    })
}

fn same_toggle() -> Value {
    json!({"name": "same", "project": "p-same", "strategies": [{"name": "s-same",
        "constraints": [{"contextName": "c-same", "operator": "IN", "values": ["x"]}]}]})
}

fn changed_toggle(enabled: bool) -> Value {
    json!({"name": "changed", "enabled": enabled, "strategies": [{"name": "s-changed"}]})
}

/// The document every combination imports.
fn combination_document() -> Value {
    json!({
        "projects": [{"id": "p-same", "name": "Same"}, {"id": "p-changed", "name": "After"},
                     {"id": "p-new", "name": "New"}],
        "contextFields": [{"name": "c-same"}, {"name": "c-changed", "description": "after"},
                          {"name": "c-new"}],
        "strategies": [{"name": "s-same", "parameters": []},
                       {"name": "s-changed", "description": "after", "parameters": []},
                       {"name": "s-new", "parameters": []}],
        "tagTypes": [{"name": "simple", "description": "Used to simplify filtering of features",
                      "icon": "#"}, {"name": "tt-new"}],
        "tags": [{"type": "simple", "value": "t-same"}, {"type": "tt-new", "value": "t-new"}],
        "features": [same_toggle(), changed_toggle(true),
                     {"name": "back", "strategies": [{"name": "s-new"}]},
                     {"name": "new", "project": "p-new", "strategies": [{"name": "default",
                        "constraints": [{"contextName": "c-new", "operator": "IN", "values": ["y"]}]}]}],
        "featureTags": [
            {"featureName": "same", "tagType": "simple", "tagValue": "t-same"},
            {"featureName": "new", "tagType": "tt-new", "tagValue": "t-new"}],
    })
}

/// What one combination of `drop` and `keep` must do.
struct Combination {
    query: &'static str,
    drop: bool,
    keep: bool,
    summary: Value,
    /// The toggles a dry run lists, with their change.
    toggles: Value,
    events: Vec<(&'static str, usize)>,
}

fn combinations() -> Vec<Combination> {
    let features = |created, updated, revived, archived, unchanged| {
        json!({"created": created, "updated": updated, "revived": revived,
            "archived": archived, "unchanged": unchanged})
    };
    let feature_tags = |added, removed, unchanged| json!({"added": added, "removed": removed, "unchanged": unchanged});
    let summary = |features, changed: Value, tag_types, tags, feature_tags| {
        json!({"features": features, "strategies": changed, "projects": changed,
            "contextFields": changed, "tagTypes": tag_types, "tags": tags,
            "featureTags": feature_tags})
    };
    let change = |names: &[(&str, &str)]| {
        Value::Array(
            names
                .iter()
                .map(|(name, change)| json!({"name": name, "change": change}))
                .collect(),
        )
    };
    vec![
        Combination {
            query: "",
            drop: false,
            keep: false,
            summary: summary(
                features(1, 1, 1, 0, 1),
                records(1, 1, 0, 1),
                records(1, 0, 0, 1),
                records(1, 0, 0, 1),
                feature_tags(1, 0, 1),
            ),
            toggles: change(&[
                ("back", "revived"),
                ("changed", "updated"),
                ("new", "created"),
            ]),
            events: vec![
                ("feature-import", 3),
                ("strategy-import", 2),
                ("project-import", 2),
                ("context-field-import", 2),
                ("tag-type-import", 1),
                ("tag-import", 1),
                ("state-imported", 1),
            ],
        },
        Combination {
            query: "?keep=true",
            drop: false,
            keep: true,
            summary: summary(
                features(1, 0, 0, 0, 3),
                records(1, 0, 0, 2),
                records(1, 0, 0, 1),
                records(1, 0, 0, 1),
                feature_tags(1, 0, 1),
            ),
            // An archived toggle exists too: `keep` leaves it archived.
            toggles: change(&[("new", "created")]),
            events: vec![
                ("feature-import", 1),
                ("strategy-import", 1),
                ("project-import", 1),
                ("context-field-import", 1),
                ("tag-type-import", 1),
                ("tag-import", 1),
                ("state-imported", 1),
            ],
        },
        Combination {
            query: "?drop=1",
            drop: true,
            keep: false,
            summary: summary(
                features(1, 1, 1, 1, 1),
                records(1, 1, 1, 1),
                records(1, 0, 1, 1),
                records(1, 0, 1, 1),
                // `changed` loses its unlisted tag.
                feature_tags(1, 1, 1),
            ),
            toggles: change(&[
                ("back", "revived"),
                ("changed", "updated"),
                ("extra", "archived"),
                ("new", "created"),
            ]),
            events: dropping_events(3, 2),
        },
        Combination {
            query: "?drop=TRUE&keep=1",
            drop: true,
            keep: true,
            summary: summary(
                features(1, 0, 0, 1, 3),
                records(1, 0, 1, 2),
                records(1, 0, 1, 1),
                records(1, 0, 1, 1),
                feature_tags(1, 1, 1),
            ),
            // `changed` keeps its definition but loses its unlisted tag.
            toggles: change(&[
                ("changed", "updated"),
                ("extra", "archived"),
                ("new", "created"),
            ]),
            events: dropping_events(2, 1),
        },
    ]
}

/// The events of a dropping combination: `toggles` feature imports and `imported` imports of
/// strategies, projects and context fields each.
fn dropping_events(toggles: usize, imported: usize) -> Vec<(&'static str, usize)> {
    vec![
        ("feature-import", toggles),
        ("feature-archived", 1),
        // `arch-x`, moved to `default` with its project gone.
        ("feature-updated", 1),
        ("strategy-import", imported),
        ("strategy-deleted", 1),
        ("project-import", imported),
        ("project-deleted", 1),
        ("context-field-import", imported),
        ("context-field-deleted", 1),
        ("tag-type-import", 1),
        ("tag-type-deleted", 1),
        ("tag-import", 1),
        // `simple:t-extra`, and `tt-extra:v-extra` with its type.
        ("tag-deleted", 2),
        ("state-imported", 1),
    ]
}

async fn drop_keep_and_dry_run_in_every_combination(backend: &Backend) {
    for (i, combination) in combinations().into_iter().enumerate() {
        let query = combination.query;
        let app = spawn_isolated(backend, &format!("combination-{i}")).await;
        import(&app, "", &base_document()).await.expect(202);
        for name in ["back", "arch-x"] {
            app.delete(&format!("/api/admin/features/{name}"))
                .await
                .expect(200);
        }
        let stored = Stored::of(&app).await;

        // A dry run answers what the import would do, and writes nothing.
        let dry_query = format!("{}dryRun=true", if query.is_empty() { "?" } else { "&" });
        let dry = import(
            &app,
            &format!("{query}{dry_query}"),
            &combination_document(),
        )
        .await
        .expect(200)
        .json;
        assert_eq!(dry["dryRun"], true, "{query}");
        assert_eq!(
            (dry["drop"].as_bool(), dry["keep"].as_bool()),
            (Some(combination.drop), Some(combination.keep)),
            "{query}"
        );
        assert_eq!(dry["changed"], true, "{query}");
        assert_eq!(
            dry["summary"], combination.summary,
            "{query}: dry-run summary"
        );
        let toggles: Vec<Value> = dry["toggles"]
            .as_array()
            .expect("a dry run lists the toggles")
            .iter()
            .map(|t| {
                assert!(
                    !t["diffs"].as_array().expect("diffs").is_empty(),
                    "{query}: {t}"
                );
                json!({"name": t["name"], "change": t["change"]})
            })
            .collect();
        assert_eq!(Value::Array(toggles), combination.toggles, "{query}");
        stored
            .assert_unchanged(&app, &format!("dry run {query}"))
            .await;

        // The import does what the dry run said.
        let before = last_event_id(&app).await;
        let reply = import(&app, query, &combination_document())
            .await
            .expect(202)
            .json;
        assert_eq!(reply["dryRun"], false);
        assert_eq!(reply["summary"], combination.summary, "{query}: summary");
        assert!(reply.get("toggles").is_none(), "{query}: {reply}");
        let events = events_after(&app, before).await;
        assert_eq!(type_counts(&events), counts(&combination.events), "{query}");
        let summary_event = events.last().expect("events");
        assert_eq!(summary_event["type"], "state-imported");
        assert_eq!(
            summary_event["data"],
            json!({"drop": combination.drop, "keep": combination.keep,
                "summary": combination.summary})
        );

        // What the store holds now.
        let changed = app
            .get("/api/admin/features/changed")
            .await
            .expect(200)
            .json;
        assert_eq!(changed["enabled"], !combination.keep, "{query}");
        let project = app
            .get("/api/admin/projects/p-changed")
            .await
            .expect(200)
            .json;
        let name = if combination.keep { "Before" } else { "After" };
        assert_eq!(project["name"], name, "{query}");
        // The archived toggle the document names is back with the document's definition,
        // unless `keep` leaves it be.
        if combination.keep {
            app.get("/api/admin/features/back").await.expect(404);
        } else {
            let back = app.get("/api/admin/features/back").await.expect(200).json;
            assert_eq!(back["strategies"][0]["name"], "s-new", "{query}");
        }
        let new = app.get("/api/admin/features/new").await.expect(200).json;
        assert_eq!(new["tags"][0]["value"], "t-new", "{query}");
        if combination.drop {
            // Archived, not deleted: it can be revived.
            app.get("/api/admin/features/extra").await.expect(404);
            app.post_empty("/api/admin/archive/revive/extra")
                .await
                .expect(200);
            app.get("/api/admin/features/extra").await.expect(200);
            app.get("/api/admin/projects/p-extra").await.expect(404);
            assert_eq!(archived_project(&app, "arch-x").await, "default", "{query}");
            app.get("/api/admin/strategies/s-extra").await.expect(404);
            app.get("/api/admin/context/c-extra").await.expect(404);
            app.get("/api/admin/tag-types/tt-extra").await.expect(404);
            app.get("/api/admin/tags/simple/t-extra").await.expect(404);
            app.get("/api/admin/projects/default").await.expect(200);
            app.get("/api/admin/context/environment").await.expect(200);
        } else {
            app.get("/api/admin/features/extra").await.expect(200);
            assert_eq!(archived_project(&app, "arch-x").await, "p-extra", "{query}");
            app.get("/api/admin/strategies/s-extra").await.expect(200);
        }
        app.stop().await;
    }
}

async fn dropping_projects_moves_archived_toggles_and_refuses_orphans(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let setup = json!({
        "projects": [{"id": "p-active", "name": "A"}, {"id": "p-archived", "name": "B"}],
        "features": [{"name": "a1", "project": "p-active", "strategies": [{"name": "default"}]},
                     {"name": "a2", "project": "p-archived", "strategies": [{"name": "default"}]}],
    });
    import(&app, "", &setup).await.expect(202);
    app.delete("/api/admin/features/a2").await.expect(200);
    let stored = Stored::of(&app).await;

    // Without a features section, active toggles keep their projects: dropping one is refused.
    for query in ["?drop=1", "?drop=1&dryRun=1"] {
        let reply = import(&app, query, &json!({"projects": []})).await;
        assert_eq!(refused_paths(&reply), ["projects"], "{query}");
        let message = &reply.json["details"][0]["message"];
        let message = message.as_str().expect("message");
        assert!(
            message.contains("p-active") && message.contains("a1"),
            "{message}"
        );
        stored.assert_unchanged(&app, query).await;
    }

    // Dropping the project of an archived toggle moves that toggle to `default`.
    let reply = import(
        &app,
        "?drop=1",
        &json!({"projects": [{"id": "p-active", "name": "A"}]}),
    )
    .await
    .expect(202)
    .json;
    assert_eq!(reply["summary"]["projects"], records(0, 0, 1, 1));
    app.get("/api/admin/projects/p-archived").await.expect(404);
    assert_eq!(archived_project(&app, "a2").await, "default");
    app.post_empty("/api/admin/archive/revive/a2")
        .await
        .expect(200);
    assert_eq!(
        app.get("/api/admin/features/a2").await.expect(200).json["project"],
        "default"
    );
}

/// A toggle of a dropped project that the same import archives (the document has `features`
/// without it) goes to the archive like every other archived toggle of that project: in
/// `default`, so that it can be revived.
async fn a_toggle_archived_by_a_drop_does_not_keep_a_dropped_project(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    let setup = json!({
        "projects": [{"id": "p-going", "name": "Going"}],
        "features": [{"name": "leaving", "project": "p-going", "strategies": [{"name": "default"}]},
                     toggle("staying")],
    });
    import(&app, "", &setup).await.expect(202);
    let reply = import(
        &app,
        "?drop=1",
        &json!({"projects": [], "features": [toggle("staying")]}),
    )
    .await
    .expect(202)
    .json;
    assert_eq!(reply["summary"]["features"]["archived"], 1);
    assert_eq!(reply["summary"]["projects"]["deleted"], 1);
    app.get("/api/admin/projects/p-going").await.expect(404);
    assert_eq!(archived_project(&app, "leaving").await, "default");
    app.post_empty("/api/admin/archive/revive/leaving")
        .await
        .expect(200);
}
