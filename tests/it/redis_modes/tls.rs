//! `rediss://` with a CA made by the test, and an ACL user in the URL; a TLS-only cluster.

use crate::common::topology::{TestCa, TestCluster};
use crate::common::{Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_test_ca_and_an_acl_user_works() {
    let ca = TestCa::new();
    let server = ca.tls_server(&[
        "--user",
        "flagpole",
        "on",
        ">s3cret-pw",
        "~*",
        "&*",
        "+@all",
    ]);
    let mut settings = Backend::embedded().settings();
    settings.store.redis_url = Some(format!(
        "rediss://flagpole:s3cret-pw@127.0.0.1:{}",
        server.port
    ));
    settings.store.redis_tls_ca = Some(ca.path("ca.crt"));
    settings.store.key_prefix = "test".into();
    let app = TestApp::spawn_with(settings).await;
    app.create_toggle("over-tls").await;
    assert_eq!(
        app.client_features("", None).await.json["features"][0]["name"],
        "over-tls"
    );
    // It is in Redis, written as the ACL user.
    let stored = server.cli(&[
        "--user",
        "flagpole",
        "--pass",
        "s3cret-pw",
        "HKEYS",
        "{test}:features",
    ]);
    assert!(stored.contains("over-tls"), "{stored}");
    let clients = server.cli(&["CLIENT", "LIST"]);
    assert!(clients.contains("user=flagpole"), "{clients}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_works_on_a_cluster() {
    let ca = TestCa::new();
    let cluster = TestCluster::start_tls(&ca);
    let mut settings = Backend::embedded().settings();
    settings.store.redis_url = Some(cluster.url().replacen("redis://", "rediss://", 1));
    settings.store.redis_mode = flagpole::config::RedisMode::Cluster;
    settings.store.redis_tls_ca = Some(ca.path("ca.crt"));
    settings.store.key_prefix = "test".into();
    let app = TestApp::spawn_with(settings).await;
    app.create_toggle("over-tls").await;
    let stored = cluster
        .master_of("{test}")
        .cli(&["HKEYS", "{test}:features"]);
    assert!(stored.contains("over-tls"), "{stored}");
    app.stop().await;
}
