//! `--redis-wait-replicas`: a commit no replica confirms is answered 503 as uncertain (it may
//! have been applied); once a replica follows, commits are acknowledged.

use std::time::Duration;

use crate::common::topology::{wait_until, RedisNode};
use crate::common::{Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_no_replica_confirms_is_uncertain() {
    let master = RedisNode::start(&["--appendonly", "no"]);
    let mut settings = Backend::embedded().settings();
    settings.store.redis_url = Some(format!("redis://127.0.0.1:{}", master.port));
    settings.store.key_prefix = "test".into();
    settings.store.redis_wait_replicas = Some(1);
    // Long enough for a loaded machine's replica to acknowledge once it follows.
    settings.store.redis_wait_timeout_ms = 1000;
    let app = TestApp::spawn_with(settings).await;

    let reply = app.create_toggle_reply("unconfirmed").await.expect(503);
    assert!(
        reply
            .error_message()
            .contains("may still have been applied"),
        "{:?}",
        reply.json
    );
    // It was applied on the master, only not confirmed by a replica.
    let stored = master.cli(&["HKEYS", "{test}:features"]);
    assert!(stored.contains("unconfirmed"), "{stored}");

    let port = master.port.to_string();
    let replica = RedisNode::start(&["--replicaof", "127.0.0.1", &port]);
    wait_until("the replica is in sync", Duration::from_secs(10), || {
        replica
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    app.create_toggle("confirmed").await;
    let copied = replica.cli(&["HKEYS", "{test}:features"]);
    assert!(copied.contains("confirmed"), "{copied}");
    app.stop().await;
}
