//! Redis only, with `--forward-writes`: admin writes go on to the replica holding the
//! committer lease, and come back to the replica they were sent to with read-your-writes; a
//! committer that stops hands over.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use flagpole::config::Settings;

use crate::common::{eventually, send, Backend, TestApp};

/// A replica's settings with `--forward-writes`.
fn forwarding_settings(backend: &Backend) -> Settings {
    let mut settings = backend.settings();
    settings.replication.forward_writes = true;
    settings
}

/// The base URL of the replica holding the committer lease, once one does.
pub async fn committer(backend: &Backend) -> Option<String> {
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
pub async fn forwarded(app: &TestApp, outcome: &str) -> f64 {
    app.metric(&format!(
        "flagpole_forwarded_writes_total{{outcome=\"{outcome}\"}}"
    ))
    .await
    .unwrap_or(0.0)
}

/// Two replicas; returns them as (committer, follower). They drain for 3 s when stopped, as
/// replicas do behind a load balancer (the default is 5 s).
async fn committer_and_follower(backend: &Backend) -> (TestApp, TestApp) {
    let mut settings = forwarding_settings(backend);
    settings.server.shutdown_drain_ms = 3_000;
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    let holder = wait_for_forwarding(backend, &[&a, &b]).await;
    let (committer, follower) = if holder == a.base { (a, b) } else { (b, a) };
    assert_eq!(holder, committer.base);
    (committer, follower)
}

/// Waits until one of `apps` holds the committer lease and every other one has forwarded a
/// write to it (they read the lease every second); returns the holder's base URL.
pub async fn wait_for_forwarding(backend: &Backend, apps: &[&TestApp]) -> String {
    let holder = committer(backend).await.expect("a replica takes the lease");
    for follower in apps.iter().filter(|app| app.base != holder) {
        let knows = eventually(Duration::from_secs(3), || async {
            follower
                .post_empty("/api/admin/features/probe/toggle/on")
                .await;
            forwarded(follower, "forwarded").await >= 1.0
        })
        .await;
        assert!(knows, "{} never forwarded a write", follower.base);
    }
    holder
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

/// A client cannot pass for a replica: a made-up forwarding token is refused untouched (it
/// would skip the rate limit), and learns no position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_made_up_forwarding_token_is_refused() {
    let backend = Backend::redis();
    let app = TestApp::spawn_with(forwarding_settings(&backend)).await;
    committer(&backend)
        .await
        .expect("the replica takes the lease");
    let reply = send(
        app.admin(Method::POST, "/api/admin/features")
            .header("x-flagpole-forwarded", "0123456789abcdef0123456789abcdef")
            .json(&json!({"name": "forged"})),
    )
    .await
    .expect(421);
    assert!(reply.header("x-flagpole-position").is_none());
    app.get("/api/admin/features/forged").await.expect(404);
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
    let counts = [
        forwarded(&follower, "forwarded").await,
        forwarded(&follower, "local").await,
    ];
    follower.create_toggle("handover.after").await;
    assert_eq!(
        [
            forwarded(&follower, "forwarded").await,
            forwarded(&follower, "local").await
        ],
        counts
    );
}

/// Writes `{test}:committer` = `claim` for a minute (no replica renews it).
fn set_lease(backend: &Backend, claim: &str) {
    backend
        .redis_server()
        .cli(&["SET", "{test}:committer", claim, "PX", "60000"]);
}

/// A lease holder nobody can connect to (crashed, its lease not yet expired): writes are
/// committed where they arrive, and it is not tried again for every write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committer_that_cannot_be_reached_is_written_around() {
    let backend = Backend::redis();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    set_lease(
        &backend,
        &format!("0123456789abcdef0123456789abcdef http://127.0.0.1:{port}"),
    );
    let app = TestApp::spawn_with(forwarding_settings(&backend)).await;
    let mut i = 0;
    let tried = eventually(Duration::from_secs(3), || {
        i += 1;
        let name = format!("around.{i}");
        let app = &app;
        async move {
            app.create_toggle(&name).await;
            forwarded(app, "local").await >= 1.0
        }
    })
    .await;
    assert!(tried, "the replica never tried the lease holder");
    app.create_toggle("around.after").await;
    assert_eq!(forwarded(&app, "local").await, 1.0);
    assert_eq!(forwarded(&app, "forwarded").await, 0.0);
    assert_eq!(forwarded(&app, "unanswered").await, 0.0);
}

/// A write that reaches a replica the lease does not name (its address reused, a stale lease)
/// is refused there untouched (421) and committed once, where it arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_forwarded_to_the_wrong_replica_is_committed_where_it_arrived() {
    let backend = Backend::redis();
    let token = "fedcba9876543210fedcba9876543210";
    // A claim no replica holds, so neither takes the lease.
    set_lease(&backend, &format!("{token} http://127.0.0.1:1"));
    let wrong = TestApp::spawn_with(forwarding_settings(&backend)).await;
    set_lease(&backend, &format!("{token} {}", wrong.base));
    let sender = TestApp::spawn_with(forwarding_settings(&backend)).await;
    let refused = send(
        wrong
            .admin(Method::POST, "/api/admin/features")
            .header("x-flagpole-forwarded", token)
            .json(&json!({"name": "misdirected.direct"})),
    )
    .await
    .expect(421);
    assert!(refused.error_message().contains("forwarded"), "{refused:?}");
    let mut i = 0;
    let tried = eventually(Duration::from_secs(3), || {
        i += 1;
        let name = format!("misdirected.{i}");
        let sender = &sender;
        async move {
            sender.create_toggle(&name).await;
            forwarded(sender, "local").await >= 1.0
        }
    })
    .await;
    assert!(tried, "the sender never tried the replica the lease names");
    // Each write committed once: one creation event per toggle.
    let names: Vec<String> = (1..=i).map(|n| format!("misdirected.{n}")).collect();
    for name in &names {
        let events = sender.get(&format!("/api/admin/events/{name}")).await.json;
        assert_eq!(events["events"].as_array().map(Vec::len), Some(1), "{name}");
    }
    // The replica whose own address the lease names (once it read the lease again: every
    // second) writes for itself.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let local = forwarded(&wrong, "local").await;
    wrong.create_toggle("misdirected.wrong").await;
    assert_eq!(forwarded(&wrong, "local").await, local);
    assert_eq!(forwarded(&wrong, "forwarded").await, 0.0);
}

/// Sends `body` in two chunks (no declared length) with basic auth; the raw answer.
async fn send_chunked(app: &TestApp, method: &str, path: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let (first, second) = body.split_at(body.len() / 2);
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWRtaW46\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         {:x}\r\n{first}\r\n{:x}\r\n{second}\r\n0\r\n\r\n",
        first.len(),
        second.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A body sent in chunks is forwarded like one of declared length while it is small; a large
/// one (a state import beyond `--admin-body-limit-kib`) is committed where it arrived, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_writes_are_forwarded_unless_large() {
    let backend = Backend::redis();
    let mut settings = forwarding_settings(&backend);
    settings.server.admin_body_limit_kib = 1;
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    let holder = wait_for_forwarding(&backend, &[&a, &b]).await;
    let follower = if holder == a.base { &b } else { &a };
    let before = forwarded(follower, "forwarded").await;

    let small = json!({"name": "chunked.small", "strategies": [{"name": "default"}]}).to_string();
    let answer = send_chunked(follower, "POST", "/api/admin/features", &small).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(forwarded(follower, "forwarded").await, before + 1.0);
    follower
        .get("/api/admin/features/chunked.small")
        .await
        .expect(200);

    let features: Vec<_> = (0..40)
        .map(|i| {
            json!({"name": format!("chunked.import.{i}"), "description": "x".repeat(40),
                   "strategies": [{"name": "default"}]})
        })
        .collect();
    let large = json!({"version": 1, "features": features}).to_string();
    assert!(large.len() > 1024);
    let answer = send_chunked(follower, "POST", "/api/admin/state/import", &large).await;
    assert!(answer.starts_with("HTTP/1.1 2"), "{answer}");
    assert_eq!(forwarded(follower, "local").await, 1.0);
    assert_eq!(forwarded(follower, "forwarded").await, before + 1.0);
    let listed = follower.get("/api/admin/features").await.expect(200).json;
    let imported = listed["features"]
        .as_array()
        .expect("features")
        .iter()
        .filter(|f| {
            f["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("chunked.import."))
        })
        .count();
    assert_eq!(imported, 40);
}
