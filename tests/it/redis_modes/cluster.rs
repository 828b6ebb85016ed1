//! Cluster mode: version announcements reach the other replicas by pub/sub; killing the
//! master of the configuration slot loses no acknowledged write and writes resume after the
//! failover.

use std::time::Duration;

use super::{assert_all_kept, write_through_failover};
use crate::common::topology::TestCluster;
use crate::common::{eventually, Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announcements_reach_other_replicas_on_a_cluster() {
    let backend = Backend::cluster();
    let a = TestApp::spawn(&backend).await;
    let mut settings = backend.settings();
    // Only pub/sub can tell replica b in time: its periodic check is a minute away.
    settings.replication.refresh_interval_ms = 60_000;
    let b = TestApp::spawn_with(settings).await;
    a.create_toggle("announced").await;
    let seen = eventually(Duration::from_secs(5), || async {
        b.get("/api/admin/features/announced").await.status == 200
    })
    .await;
    assert!(seen, "replica b was not told of the write");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_configuration_master_loses_no_acknowledged_write() {
    let mut cluster = TestCluster::start();
    // Without a second replica the promoted master could confirm no write (WAIT 1).
    cluster.add_spare_replica("{test}");
    let backend = Backend::Cluster(cluster);
    let Backend::Cluster(cluster) = &backend else {
        unreachable!()
    };
    let app = TestApp::spawn(&backend).await;
    let old = cluster.master_of("{test}").port;
    let stream = write_through_failover(
        &app,
        "cf",
        20,
        || cluster.master_of("{test}").kill(),
        || cluster.master_of("{test}").port != old,
        20,
        Duration::from_secs(30),
    )
    .await;
    let fresh = TestApp::spawn(&backend).await;
    assert_all_kept(&fresh, &stream, "cf").await;
    fresh.stop().await;
    app.stop().await;
}
