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
