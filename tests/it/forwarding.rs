//! Redis only: admin writes go on to the replica holding the committer lease, and come back
//! to the replica they were sent to with read-your-writes; a committer that stops hands over.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::common::{eventually, send, Backend, TestApp};

/// The base URL of the replica holding the committer lease, once one does.
async fn committer(backend: &Backend) -> Option<String> {
    let mut holder = None;
    eventually(Duration::from_secs(5), || {
        let claim = backend
            .redis_server()
            .cli_output(&["GET", "{test}:committer"]);
        holder = claim.split_whitespace().nth(1).map(str::to_string);
        let found = holder.is_some();
        async move { found }
    })
    .await;
    holder
}

/// The count of forwarded writes of `app` with `outcome`.
async fn forwarded(app: &TestApp, outcome: &str) -> f64 {
    app.metric(&format!(
        "flagpole_forwarded_writes_total{{outcome=\"{outcome}\"}}"
    ))
    .await
    .unwrap_or(0.0)
}

/// Two replicas; returns them as (committer, follower). They drain for 3 s when stopped, as
/// replicas do behind a load balancer (the default is 5 s).
async fn committer_and_follower(backend: &Backend) -> (TestApp, TestApp) {
    let mut settings = backend.settings();
    settings.shutdown_drain_ms = 3_000;
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    let holder = committer(backend).await.expect("a replica takes the lease");
    let (committer, follower) = if holder == a.base { (a, b) } else { (b, a) };
    assert_eq!(holder, committer.base);
    // The follower forwards once it has read the lease (it does every second).
    let knows = eventually(Duration::from_secs(3), || async {
        follower
            .post_empty("/api/admin/features/probe/toggle/on")
            .await;
        forwarded(&follower, "forwarded").await >= 1.0
    })
    .await;
    assert!(knows, "the follower never forwarded a write");
    (committer, follower)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_on_any_replica_are_committed_by_the_lease_holder() {
    let backend = Backend::redis();
    let (committer, follower) = committer_and_follower(&backend).await;
    let before = forwarded(&follower, "forwarded").await;
    let created = follower.create_toggle("fw.one").await;
    assert_eq!(created["name"], "fw.one");
    // Read-your-writes on the replica written to, at once.
    follower.get("/api/admin/features/fw.one").await.expect(200);
    assert_eq!(forwarded(&follower, "forwarded").await, before + 1.0);
    // The committer's own writes stay with it.
    committer.create_toggle("fw.two").await;
    assert_eq!(forwarded(&committer, "forwarded").await, 0.0);
    // Refusals come back as the committer gave them, JSON body and all.
    let refused = follower.create_toggle_reply("fw.one").await.expect(403);
    assert!(refused.error_message().contains("fw.one"), "{refused:?}");
    // Writes without a body, and deletes, go the same way.
    follower
        .post_empty("/api/admin/features/fw.one/toggle/on")
        .await
        .expect(200);
    assert_eq!(
        follower.get("/api/admin/features/fw.one").await.json["enabled"],
        true
    );
    follower
        .delete("/api/admin/features/fw.two")
        .await
        .expect(200);
    follower.get("/api/admin/features/fw.two").await.expect(404);
    // One event per write, whoever committed it.
    let events = follower
        .get("/api/admin/events/fw.one")
        .await
        .expect(200)
        .json;
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(kinds, ["feature-updated", "feature-created"], "{events}");
    // The forwarding headers stay between replicas.
    let reply = follower
        .post_empty("/api/admin/features/fw.one/toggle/off")
        .await;
    assert!(reply.header("x-flagpole-position").is_none());
    assert_eq!(forwarded(&follower, "local").await, 0.0);
    assert_eq!(forwarded(&follower, "unanswered").await, 0.0);
}

/// A client cannot pass for a replica: a made-up forwarding token is an ordinary request (it
/// is committed where it arrives, stays within the rate limit, and learns no position).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_made_up_forwarding_token_is_an_ordinary_request() {
    let backend = Backend::redis();
    let mut settings = backend.settings();
    settings.rate_limit_admin = 2.0;
    let app = TestApp::spawn_with(settings).await;
    committer(&backend)
        .await
        .expect("the replica takes the lease");
    let mut statuses = Vec::new();
    for i in 0..8 {
        let reply = send(
            app.admin(Method::POST, "/api/admin/features")
                .header("x-flagpole-forwarded", "0123456789abcdef0123456789abcdef")
                .json(&json!({"name": format!("forged.{i}")})),
        )
        .await;
        assert!(reply.header("x-flagpole-position").is_none());
        statuses.push(reply.status.as_u16());
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}

/// A committer asked to stop gives the lease up at once; writes on the other replica succeed
/// throughout, and it takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_committer_hands_over() {
    let backend = Backend::redis();
    let (committer_app, follower) = committer_and_follower(&backend).await;
    let writes = async {
        for i in 0..30 {
            follower.create_toggle(&format!("handover.{i:02}")).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let stop = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        committer_app.stop().await;
    };
    tokio::join!(writes, stop);
    let listed = follower.get("/api/admin/features").await.json["features"]
        .as_array()
        .map_or(0, |features| {
            features
                .iter()
                .filter(|f| {
                    f["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("handover."))
                })
                .count()
        });
    assert_eq!(listed, 30);
    assert_eq!(
        committer(&backend).await.as_deref(),
        Some(follower.base.as_str()),
        "the remaining replica did not take the lease"
    );
    // Now the committer, it commits its writes itself.
    let local_before = forwarded(&follower, "forwarded").await;
    follower.create_toggle("handover.after").await;
    assert_eq!(forwarded(&follower, "forwarded").await, local_before);
}
