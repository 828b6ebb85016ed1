//! Several replicas share one queue: each event is delivered once; jobs of a replica killed
//! mid-delivery are delivered by another; a Redis restart (with its append-only file) between
//! the write and the delivery loses nothing; the embedded outbox survives a crash.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{quick, webhook};
use crate::common::receiver::{free_port, Answer, Receiver, ReservedPort};
use crate::common::{Backend, TestApp};

/// How many times each delivery id was accepted.
fn accepted_counts(receiver: &Receiver) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for request in receiver.accepted() {
        *counts.entry(request.delivery()).or_insert(0) += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_deliver_each_event_exactly_once() {
    let backend = Backend::redis();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(TestApp::spawn_with(quick(&backend)).await);
    }
    let receiver = Receiver::start().await;
    webhook(
        &replicas[0],
        &receiver.url("/"),
        &["feature-created"],
        json!({}),
    )
    .await;
    // Every replica knows the addon before the writes (it is part of the snapshot).
    for replica in &replicas {
        let seen = crate::common::eventually(Duration::from_secs(5), || async {
            replica.get("/api/admin/addons").await.json["addons"]
                .as_array()
                .is_some_and(|a| a.len() == 1)
        })
        .await;
        assert!(seen);
    }
    let writes = (0..60).map(|i| replicas[i % 3].create_toggle_owned(format!("spread-{i}")));
    futures_util::future::join_all(writes).await;
    assert!(receiver.wait_accepted(60, Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = accepted_counts(&receiver);
    assert_eq!(counts.len(), 60, "every event delivered");
    assert!(counts.values().all(|n| *n == 1), "exactly once: {counts:?}");
    assert_eq!(receiver.received().len(), 60, "no other attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_between_the_write_and_the_delivery_loses_nothing() {
    let backend = Backend::redis();
    let app = TestApp::spawn_with(quick(&backend)).await;
    let reserved = ReservedPort::new();
    webhook(
        &app,
        &format!("http://127.0.0.1:{}/", reserved.port),
        &["feature-created"],
        json!({}),
    )
    .await;
    for i in 0..5 {
        app.create_toggle(&format!("durable-{i}")).await;
    }
    // Jobs are queued or waiting for a retry; Redis crashes and comes back from its AOF.
    backend.redis_server().restart();
    let receiver = reserved.start_receiver().await;
    assert!(receiver.wait_accepted(5, Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = accepted_counts(&receiver);
    assert_eq!(counts.len(), 5);
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
}

/// The real binary, killable with SIGKILL.
struct Process {
    child: Child,
    base: String,
}

impl Process {
    async fn start(store_args: &[String]) -> Self {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(store_args)
            .args([
                "--delivery-backoff-ms",
                "50",
                "--delivery-backoff-max-ms",
                "500",
                "--delivery-visibility-timeout-ms",
                "2000",
                "--delivery-max-attempts",
                "100",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn flagpole");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(15);
        while !matches!(http.get(format!("{base}/health")).send().await, Ok(r) if r.status() == 200)
        {
            assert!(Instant::now() < deadline, "binary did not become healthy");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Self { child, base }
    }

    async fn create_toggle(&self, name: &str) {
        let status = reqwest::Client::new()
            .post(format!("{}/api/admin/features", self.base))
            .basic_auth("admin", Some(""))
            .json(&json!({"name": name, "strategies": [{"name": "default"}]}))
            .send()
            .await
            .expect("create")
            .status();
        assert_eq!(status, 200);
    }

    async fn create_webhook(&self, url: &str) {
        let status = reqwest::Client::new()
            .post(format!("{}/api/admin/addons", self.base))
            .basic_auth("admin", Some(""))
            .json(&json!({"provider": "webhook", "parameters": {"url": url},
                          "events": ["feature-created"]}))
            .send()
            .await
            .expect("create addon")
            .status();
        assert_eq!(status, 201);
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_a_killed_replica_are_delivered_by_another() {
    let backend = Backend::redis();
    let url = backend.redis_server().url();
    let mut doomed = Process::start(&[
        "--redis-url".into(),
        url,
        "--key-prefix".into(),
        "test".into(),
    ])
    .await;
    let receiver = Receiver::start().await;
    // The doomed replica takes every job and never hears back.
    receiver.answer_always(Answer::Hang(Duration::from_secs(120), 200));
    doomed.create_webhook(&receiver.url("/")).await;
    for i in 0..5 {
        doomed.create_toggle(&format!("orphan-{i}")).await;
    }
    assert!(receiver.wait_received(5, Duration::from_secs(15)).await);
    doomed.kill();
    receiver.answer_always(Answer::Status(200));
    let survivor = TestApp::spawn_with(quick(&backend)).await;
    assert!(
        receiver.wait_accepted(5, Duration::from_secs(30)).await,
        "the survivor delivered {} of 5",
        receiver.accepted().len()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = accepted_counts(&receiver);
    assert_eq!(counts.len(), 5);
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    drop(survivor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_outbox_survives_a_crash() {
    let data = tempfile::tempdir().expect("temp dir");
    let store = vec!["--data-dir".to_string(), data.path().display().to_string()];
    let mut crashing = Process::start(&store).await;
    let reserved = ReservedPort::new();
    crashing
        .create_webhook(&format!("http://127.0.0.1:{}/", reserved.port))
        .await;
    for i in 0..5 {
        crashing.create_toggle(&format!("kept-{i}")).await;
    }
    crashing.kill();
    let receiver = reserved.start_receiver().await;
    let _restarted = Process::start(&store).await;
    assert!(receiver.wait_accepted(5, Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = accepted_counts(&receiver);
    assert_eq!(counts.len(), 5);
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_job_does_not_hold_up_the_others() {
    let backend = Backend::redis();
    let app = TestApp::spawn_with(quick(&backend)).await;
    let receiver = Receiver::start().await;
    webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("before").await;
    assert!(receiver.wait_accepted(1, Duration::from_secs(15)).await);
    // Written by another version, or by hand.
    backend.redis_server().cli(&[
        "XADD",
        "{test}:deliveries",
        "*",
        "job",
        "{\"not\": \"a job\"}",
    ]);
    backend
        .redis_server()
        .cli(&["XADD", "{test}:deliveries", "*", "other", "field"]);
    for i in 0..3 {
        app.create_toggle(&format!("after-{i}")).await;
    }
    assert!(receiver.wait_accepted(4, Duration::from_secs(15)).await);
    let left = crate::common::eventually(Duration::from_secs(5), || async {
        backend
            .redis_server()
            .cli_output(&["XLEN", "{test}:deliveries"])
            .trim()
            == "0"
    })
    .await;
    assert!(left, "the unreadable entries are gone from the stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_addon_leaves_nothing_behind() {
    let backend = Backend::redis();
    let mut settings = quick(&backend);
    settings.delivery.delivery_timeout_ms = 1_000;
    settings.delivery.delivery_max_attempts = 1;
    let app = TestApp::spawn_with(settings).await;
    let receiver = Receiver::start().await;
    let id = webhook(&app, &receiver.url("/"), &["feature-created"], json!({})).await;
    app.create_toggle("delivered").await;
    assert!(receiver.wait_accepted(1, Duration::from_secs(15)).await);
    // An attempt that fails for good after the addon is deleted.
    receiver.answer_always(Answer::Hang(Duration::from_secs(3), 200));
    app.create_toggle("in-flight").await;
    assert!(receiver.wait_received(2, Duration::from_secs(15)).await);
    app.delete(&format!("/api/admin/addons/{id}"))
        .await
        .expect(200);
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let keys = backend
        .redis_server()
        .cli_output(&["KEYS", &format!("{{test}}:delivery-*:{id}")]);
    assert_eq!(keys.trim(), "", "left behind: {keys}");
    let backlog = backend
        .redis_server()
        .cli_output(&["XLEN", "{test}:deliveries"]);
    assert_eq!(backlog.trim(), "0");
}
