//! Sentinel mode: writes and subscriptions follow the master the sentinels name; a failover
//! loses no acknowledged write and writes resume within seconds.

use std::time::Duration;

use super::{assert_all_kept, write_through_failover};
use crate::common::topology::{TestSentinel, SENTINEL_SERVICE};
use crate::common::{eventually, Backend, TestApp};

fn settings(sentinel: &TestSentinel) -> flagpole::config::Settings {
    let mut settings = Backend::embedded().settings();
    settings.store.redis_url = Some(sentinel.url());
    settings.store.redis_mode = flagpole::config::RedisMode::Sentinel;
    settings.store.redis_sentinel_service = Some(SENTINEL_SERVICE.into());
    settings.store.key_prefix = "test".into();
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_during_writes_loses_no_acknowledged_write() {
    let sentinel = TestSentinel::start();
    let app = TestApp::spawn_with(settings(&sentinel)).await;
    // A second replica that learns of writes only by pub/sub (its periodic check is a minute
    // away): announcements must still reach it after the switch.
    let mut listening = settings(&sentinel);
    listening.replication.refresh_interval_ms = 60_000;
    let listener = TestApp::spawn_with(listening).await;
    let old_master = sentinel.master.port;
    let stream = write_through_failover(
        &app,
        "sf",
        20,
        || {
            sentinel.sentinels[0].cli(&["SENTINEL", "FAILOVER", SENTINEL_SERVICE]);
        },
        || sentinel.master_port() != old_master,
        20,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(sentinel.master_port(), sentinel.replica.port);
    // The writes after the switch went to the new master.
    let last = stream.acknowledged.last().expect("writes").clone();
    let on_new = sentinel.replica.cli(&["HEXISTS", "{test}:features", &last]);
    assert_eq!(on_new.trim(), "1", "{last} is not on the new master");
    app.create_toggle("after-the-switch").await;
    let told = eventually(Duration::from_secs(5), || async {
        listener
            .get("/api/admin/features/after-the-switch")
            .await
            .status
            == 200
    })
    .await;
    assert!(
        told,
        "the listening replica was not told of a write on the new master"
    );
    listener.stop().await;
    // Once the old master follows the new one, it holds every acknowledged write too.
    let fresh = TestApp::spawn_with(settings(&sentinel)).await;
    assert_all_kept(&fresh, &stream, "sf").await;
    fresh.stop().await;
    app.stop().await;
}
