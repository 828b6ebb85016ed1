//! Embedded store only: data and the audit log survive a restart.

use crate::common::{Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_a_restart() {
    let backend = Backend::embedded();
    let app = TestApp::spawn(&backend).await;
    app.create_toggle("durable").await;
    app.post_empty("/api/admin/features/durable/toggle/on")
        .await
        .expect(200);
    app.create_toggle("gone").await;
    app.delete("/api/admin/features/gone").await.expect(200);
    let before = app.client_features("", None).await.expect(200);
    let events_before = app.get("/api/admin/events").await.expect(200).json;
    app.stop().await;

    let app = TestApp::spawn(&backend).await;
    let after = app.client_features("", None).await.expect(200);
    assert_eq!(after.bytes, before.bytes);
    assert_eq!(after.header("etag"), before.header("etag"));
    assert_eq!(
        app.get("/api/admin/archive/features").await.json["features"][0]["name"],
        "gone"
    );
    assert_eq!(
        app.get("/api/admin/events").await.expect(200).json,
        events_before
    );
    // Built-ins are not seeded twice.
    let strategies = app.get("/api/admin/strategies").await.json["strategies"]
        .as_array()
        .expect("list")
        .len();
    assert_eq!(strategies, 8);
    // New writes continue the event ids.
    app.create_toggle("later").await;
    let newest = app.get("/api/admin/events?limit=1").await.json["events"][0]["id"]
        .as_u64()
        .expect("id");
    let previous = events_before["events"][0]["id"].as_u64().expect("id");
    assert_eq!(newest, previous + 1);
}

/// A store several times larger than the memory redb may keep of it (`--embedded-cache-mib 1`)
/// serves and reloads everything: what is not cached is read back from the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_larger_than_its_cache_reads_back_whole() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.store.embedded_cache_mib = 1;
    let app = TestApp::spawn_with(settings.clone()).await;
    // About 4 MiB of records and as much again of events.
    let user_ids = vec!["1234567"; 1024].join(",");
    for i in 0..500 {
        app.post(
            "/api/admin/features",
            serde_json::json!({
                "name": format!("large-{i:03}"),
                "strategies": [{"name": "userWithId", "parameters": {"userIds": format!("{i},{user_ids}")}}],
            }),
        )
        .await
        .expect(200);
    }
    let features = app.get("/api/admin/features").await.expect(200).json;
    let client = app.client_features("", None).await.expect(200);
    app.stop().await;

    let app = TestApp::spawn_with(settings).await;
    let reloaded = app.get("/api/admin/features").await.expect(200).json;
    assert_eq!(reloaded, features);
    let listed = reloaded["features"].as_array().expect("features");
    assert_eq!(listed.len(), 500);
    assert_eq!(
        listed[499]["strategies"][0]["parameters"]["userIds"].as_str(),
        Some(format!("499,{user_ids}").as_str())
    );
    let again = app.client_features("", None).await.expect(200);
    assert_eq!(again.header("etag"), client.header("etag"));
    assert_eq!(again.bytes, client.bytes);
}
