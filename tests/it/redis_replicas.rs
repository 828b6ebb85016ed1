//! Redis only: several replicas on one Redis, and surviving a Redis outage.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::common::{eventually, feature_names, send, Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_replica_is_served_by_the_other() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    a.create_toggle("shared").await;
    // The writer serves it once its next build is out (admin reads see it at once).
    assert_eq!(
        a.client_features("", None).await.json["features"][0]["name"],
        "shared"
    );
    // The other replica learns of it by pub/sub well within a second.
    let seen = eventually(Duration::from_secs(1), || async {
        b.client_features("", None).await.json["features"][0]["name"] == "shared"
    })
    .await;
    assert!(seen, "replica b did not see the write within 1 s");
    b.post_empty("/api/admin/features/shared/toggle/on")
        .await
        .expect(200);
    let seen = eventually(Duration::from_secs(1), || async {
        a.client_features("", None).await.json["features"][0]["enabled"] == true
    })
    .await;
    assert!(seen, "replica a did not see the write within 1 s");
    // Identical content gives identical ETags on both replicas.
    assert_eq!(
        a.client_features("", None).await.header("etag"),
        b.client_features("", None).await.header("etag")
    );
    // Both replicas keep the name unique across the installation.
    b.post(
        "/api/admin/features",
        json!({"name": "shared", "strategies": [{"name": "default"}]}),
    )
    .await
    .expect(403);
    // Concurrent writes through both replicas all land.
    let writes = (0..10).map(|i| {
        let app = if i % 2 == 0 { &a } else { &b };
        app.create_toggle_owned(format!("race.{i}"))
    });
    futures_util::future::join_all(writes).await;
    let seen = eventually(Duration::from_secs(2), || async {
        b.get("/api/admin/features?namePrefix=race.").await.json["features"]
            .as_array()
            .map(Vec::len)
            == Some(10)
    })
    .await;
    assert!(seen, "not all concurrent writes landed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_is_survived() {
    let backend = Backend::redis();
    let app = TestApp::spawn(&backend).await;
    app.create_toggle("steady").await;
    app.post(
        "/api/admin/features/steady/tags",
        json!({"type": "simple", "value": "keep"}),
    )
    .await
    .expect(201);
    let served = app.client_features("", None).await.expect(200);
    let etag = served.header("etag").expect("etag");

    backend.redis_server().stop();

    // Writes are refused with a clear 503 and nothing changes.
    let reply = app.create_toggle_reply("during-outage").await.expect(503);
    assert!(reply.error_message().contains("unreachable"));
    assert!(reply.header("retry-after").is_some());
    app.post_empty("/api/admin/features/steady/toggle/on")
        .await
        .expect(503);
    // spec §7: removing a tag while the database cannot be reached is a 500.
    app.delete("/api/admin/features/steady/tags/simple/keep")
        .await
        .expect(500)
        .error_message();
    // Client reads keep being served from the snapshot.
    let during = app.client_features("", None).await.expect(200);
    assert_eq!(during.bytes, served.bytes);
    app.client_features("", Some(&etag)).await.expect(304);
    // Health reports the outage.
    let bad = eventually(Duration::from_secs(3), || async {
        send(app.anonymous(Method::GET, "/health"))
            .await
            .status
            .as_u16()
            == 500
    })
    .await;
    assert!(bad, "health did not report the outage");

    backend.redis_server().restart();

    // Recovery without a restart of the service.
    let healthy = eventually(Duration::from_secs(10), || async {
        send(app.anonymous(Method::GET, "/health"))
            .await
            .status
            .as_u16()
            == 200
    })
    .await;
    assert!(healthy, "service did not recover");
    app.create_toggle_reply("after-outage").await.expect(200);
    app.post_empty("/api/admin/features/steady/toggle/on")
        .await
        .expect(200);
    let names: Vec<_> = app.client_features("", None).await.json["features"]
        .as_array()
        .expect("features")
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, [json!("after-outage"), json!("steady")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_during_an_outage_serves_once_redis_is_back() {
    let backend = Backend::redis();
    let first = TestApp::spawn(&backend).await;
    first.create_toggle("existing").await;
    backend.redis_server().stop();
    let mut settings = backend.settings();
    settings.server.listen = "127.0.0.1:0".parse().expect("addr");
    let listener = tokio::net::TcpListener::bind(settings.server.listen)
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let token = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(flagpole::run(settings, listener, token.clone()));
    let http = reqwest::Client::new();
    // Not loaded yet: a clear 503, not an empty toggle list.
    let reply = send(http.get(format!("{base}/api/client/features")))
        .await
        .expect(503);
    reply.error_message();
    backend.redis_server().restart();
    let served = eventually(Duration::from_secs(10), || async {
        let reply = send(http.get(format!("{base}/api/client/features"))).await;
        reply.status.as_u16() == 200 && reply.json["features"][0]["name"] == "existing"
    })
    .await;
    assert!(served, "late replica never loaded the configuration");
    token.cancel();
    run.await.expect("join").expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_follow_a_store_that_started_over() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    for name in ["old.one", "old.two", "old.three"] {
        a.create_toggle(name).await;
    }
    let seen = eventually(Duration::from_secs(1), || async {
        b.client_features("", None).await.json["features"]
            .as_array()
            .map(Vec::len)
            == Some(3)
    })
    .await;
    assert!(seen);
    // The store loses everything (FLUSHALL, or a restart without persistence) …
    backend.redis_server().cli(&["FLUSHALL"]);
    // … and new writes arrive through one replica: its versions must not be mistaken for
    // continuations of the old ones.
    a.create_toggle_reply("new.one").await.expect(200);
    a.create_toggle_reply("new.two").await.expect(200);
    a.create_toggle_reply("new.three").await.expect(200);
    a.create_toggle_reply("new.four").await.expect(200);
    let expected = ["new.four", "new.one", "new.three", "new.two"];
    assert_eq!(
        feature_names(a.client_features("", None).await.json),
        expected
    );
    let converged = eventually(Duration::from_secs(2), || async {
        feature_names(b.client_features("", None).await.json) == expected
    })
    .await;
    assert!(
        converged,
        "replica b kept serving toggles the store no longer has"
    );
    // Names are unique against the store's content, not a stale snapshot.
    b.create_toggle_reply("old.one").await.expect(200);
    // The built-in strategies and tag type come back.
    let seeded = eventually(Duration::from_secs(2), || async {
        b.get("/api/admin/strategies/default").await.status.as_u16() == 200
            && b.get("/api/admin/tag-types/simple").await.status.as_u16() == 200
    })
    .await;
    assert!(seeded, "built-ins were not re-seeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_follow_a_store_restored_to_an_older_state() {
    let backend = Backend::redis();
    let redis = backend.redis_server();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    a.create_toggle("kept").await;
    // A backup of every key (as a lagging Redis replica or a dump would hold) …
    redis.cli(&[
        "EVAL",
        "for _, k in ipairs(redis.call('KEYS', '{test}*')) do redis.call('COPY', k, 'bak' .. k, 'REPLACE') end",
        "0",
    ]);
    a.create_toggle("lost").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // … is restored (the write of `lost` is gone), and a new write reuses its version number.
    redis.cli(&[
        "EVAL",
        "for _, k in ipairs(redis.call('KEYS', 'bak*')) do redis.call('COPY', k, string.sub(k, 4), 'REPLACE') end",
        "0",
    ]);
    b.create_toggle_reply("other").await.expect(200);
    for app in [&a, &b] {
        let converged = eventually(Duration::from_secs(2), || async {
            feature_names(app.client_features("", None).await.json) == ["kept", "other"]
        })
        .await;
        assert!(
            converged,
            "a replica kept serving a history the store no longer has"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inconsistent_store_refuses_writes_without_half_writing() {
    let backend = Backend::redis();
    let app = TestApp::spawn(&backend).await;
    app.create_toggle("before").await;
    // The version counter is lost while the change log survives (eviction, partial restore).
    backend.redis_server().cli(&["DEL", "{test}:version"]);
    let reply = app.create_toggle_reply("ghost").await.expect(500);
    reply.error_message();
    assert!(
        !String::from_utf8_lossy(&reply.bytes).contains("FLAGPOLE_INCONSISTENT"),
        "no internals leak"
    );
    // Nothing of the refused write reached the store.
    let fresh = TestApp::spawn(&backend).await;
    fresh.get("/api/admin/features/ghost").await.expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_write_is_reported_as_uncertain() {
    let backend = Backend::redis();
    let app = TestApp::spawn(&backend).await;
    backend.redis_server().signal("STOP");
    let reply = app.create_toggle_reply("stalled").await.expect(503);
    backend.redis_server().signal("CONT");
    assert!(
        reply
            .error_message()
            .contains("may still have been applied"),
        "{}",
        reply.json
    );
    // Redis ran the queued script once it resumed: the write is there, and the replica learns it.
    let landed = eventually(Duration::from_secs(5), || async {
        app.get("/api/admin/features/stalled").await.status.as_u16() == 200
    })
    .await;
    assert!(landed);
}

/// Whether the toggle `race` is enabled, as `app`'s admin API says.
async fn enabled(app: &TestApp) -> serde_json::Value {
    app.get("/api/admin/features/race").await.json["enabled"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_never_answers_from_a_state_it_has_not_confirmed() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    a.create_toggle("race").await;
    for round in 0..20 {
        a.post_empty("/api/admin/features/race/toggle/on")
            .await
            .expect(200);
        let seen = eventually(Duration::from_secs(2), || async {
            enabled(&b).await == json!(true)
        })
        .await;
        assert!(seen, "round {round}: b never saw the toggle on");
        a.post_empty("/api/admin/features/race/toggle/off")
            .await
            .expect(200);
        // At once through b, which may not have heard of the "off" yet: its "on" looks like a
        // no-op against what b has seen, but it comes after the "off" and must win.
        let reply = b
            .post_empty("/api/admin/features/race/toggle/on")
            .await
            .expect(200);
        assert_eq!(reply.json["enabled"], true, "round {round}");
        let stored = eventually(Duration::from_secs(2), || async {
            enabled(&a).await == json!(true)
        })
        .await;
        assert!(stored, "round {round}: the acknowledged \"on\" was lost");
    }
    // A toggle created through a can be tagged through b at once.
    for i in 0..10 {
        let name = format!("fresh.{i}");
        a.create_toggle(&name).await;
        b.post(
            &format!("/api/admin/features/{name}/tags"),
            json!({"type": "simple", "value": "xy"}),
        )
        .await
        .expect(201);
    }
}

/// A change set too large for the change log (a big import) is logged without its changes:
/// another replica reloads everything instead, and follows later small writes as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_set_too_large_to_log_makes_other_replicas_reload() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    import_toggles(&a, "big", 1500, 800).await;
    // The import's entry in the change log holds no changes.
    let logged =
        backend
            .redis_server()
            .cli_output(&["XREVRANGE", "{test}:changes", "+", "-", "COUNT", "1"]);
    assert!(
        logged.lines().any(|l| l.trim() == "null") && logged.len() < 1000,
        "the import was logged with its changes: {} bytes",
        logged.len()
    );
    let reloaded = eventually(Duration::from_secs(10), || async {
        active_count(&b).await == 1500
    })
    .await;
    assert!(reloaded, "replica b never showed the imported toggles");
    a.create_toggle("small.after").await;
    let followed = eventually(Duration::from_secs(5), || async {
        b.get("/api/admin/features/small.after")
            .await
            .status
            .as_u16()
            == 200
    })
    .await;
    assert!(
        followed,
        "replica b did not follow a small write after the reload"
    );
    assert_eq!(active_count(&b).await, 1501);
}

/// Small writes reach other replicas with the change sets their announcements carry, without
/// a read of the change log; a change set too large to announce is read from the log. Either
/// way the replica ends where one that loaded everything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_replicas_take_small_writes_from_their_announcements() {
    let backend = Backend::redis();
    let a = TestApp::spawn(&backend).await;
    let b = TestApp::spawn(&backend).await;
    let updates = |source: &'static str| {
        let b = &b;
        async move {
            b.metric(&format!(
                "flagpole_snapshot_updates_total{{source=\"{source}\"}}"
            ))
            .await
            .unwrap_or(0.0)
        }
    };
    // B is listening once it follows a first write.
    a.create_toggle("ann.first").await;
    let listening = eventually(Duration::from_secs(5), || async {
        b.get("/api/admin/features/ann.first").await.status.as_u16() == 200
    })
    .await;
    assert!(listening, "replica b did not follow the first write");
    let (announced, logged) = (updates("announcement").await, updates("change_log").await);
    for i in 0..20 {
        a.create_toggle(&format!("ann.{i:02}")).await;
    }
    a.post_empty("/api/admin/features/ann.03/toggle/on")
        .await
        .expect(200);
    a.delete("/api/admin/features/ann.07").await.expect(200);
    let followed = eventually(Duration::from_secs(5), || async {
        active_count(&b).await == 20
    })
    .await;
    assert!(followed, "replica b did not follow the writes");
    let from_announcements = updates("announcement").await - announced;
    let from_log = updates("change_log").await - logged;
    // Each write is announced with its changes; the periodic check (every 200 ms here) may
    // still find one before its announcement is read.
    assert!(
        from_announcements >= 10.0 && from_log <= 2.0,
        "{from_announcements} updates from announcements, {from_log} from the change log"
    );
    // Too large to announce, not to log (about 40 KiB): read from the change log.
    import_toggles(&a, "ann.large", 100, 240).await;
    let followed = eventually(Duration::from_secs(5), || async {
        active_count(&b).await == 120
    })
    .await;
    assert!(followed, "replica b did not follow the large write");
    assert!(updates("change_log").await > from_log + logged);
    // The same state as a replica that read every record.
    let c = TestApp::spawn(&backend).await;
    assert_eq!(
        b.get("/api/admin/features").await.json,
        c.get("/api/admin/features").await.json
    );
    assert_eq!(
        b.client_features("", None).await.header("etag"),
        c.client_features("", None).await.header("etag")
    );
}

/// Imports `count` toggles `<prefix>.<i>` with descriptions of `description_len` characters
/// through `app`, in one commit.
async fn import_toggles(app: &TestApp, prefix: &str, count: usize, description_len: usize) {
    let description = "d".repeat(description_len);
    let features: Vec<_> = (0..count)
        .map(|i| {
            json!({"name": format!("{prefix}.{i:04}"), "description": description,
                   "strategies": [{"name": "default"}]})
        })
        .collect();
    app.post(
        "/api/admin/state/import",
        json!({"version": 1, "features": features}),
    )
    .await
    .expect(202);
}

/// How many active toggles `app` lists.
async fn active_count(app: &TestApp) -> usize {
    app.get("/api/admin/features").await.json["features"]
        .as_array()
        .map_or(0, Vec::len)
}
