//! Probes and stopping. The real binary: liveness never depends on the store; readiness
//! follows the first load, the store (with a grace period) and the drain before a graceful
//! stop. In process: a graceful stop lets a delivery in flight settle.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::receiver::{Answer, Receiver};
use crate::common::{Backend, TestApp, TestRedis};
use crate::delivery::{deliveries, quick, webhook};

/// A `flagpole` process on a free loopback port; killed on drop.
struct Binary {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Binary {
    fn start(args: &[&str]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--refresh-interval-ms", "100", "--key-prefix", "probes"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn flagpole");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    /// Status and JSON body of a GET, or None while nothing answers.
    async fn get(&self, path: &str) -> Option<(u16, Value)> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// Waits (at most 20 s) until `path` answers `status`; returns the body.
    async fn wait_for(&self, path: &str, status: u16) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let reply = self.get(path).await;
            if let Some((got, body)) = &reply {
                if *got == status {
                    return body.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "{path} never answered {status}; last: {reply:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits (at most 30 s) for the process to exit.
    async fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(exit) = self.child.try_wait().expect("wait") {
                return exit;
            }
            assert!(Instant::now() < deadline, "the binary did not exit");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The failing checks named in a 503 body (error.rs shape: message and details).
fn failing_checks(body: &Value) -> Vec<String> {
    assert!(body["message"].is_string(), "no message: {body}");
    body["details"]
        .as_array()
        .unwrap_or_else(|| panic!("no details: {body}"))
        .iter()
        .map(|d| {
            assert!(d["message"].is_string(), "{d}");
            d["path"].as_str().expect("path").to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_the_first_load_and_liveness_never_waits_for_the_store() {
    let redis = TestRedis::start();
    redis.stop();
    let app = Binary::start(&["--redis-url", &redis.url()]);
    let live = app.wait_for("/health/live", 200).await;
    assert_eq!(live["status"], "alive");
    // The store has never answered: nothing is loaded.
    let (status, body) = app.get("/health/ready").await.expect("answer");
    assert_eq!(status, 503, "{body}");
    let checks = failing_checks(&body);
    assert!(checks.contains(&"snapshot".to_string()), "{body}");

    redis.restart();
    let ready = app.wait_for("/health/ready", 200).await;
    assert_eq!(ready["status"], "ready");
    assert_eq!(app.get("/health").await.expect("answer").0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_fails_readiness_only_after_the_grace_period() {
    let redis = TestRedis::start();
    let patient = Binary::start(&[
        "--redis-url",
        &redis.url(),
        "--readiness-grace-ms",
        "600000",
    ]);
    let strict = Binary::start(&["--redis-url", &redis.url(), "--readiness-grace-ms", "200"]);
    patient.wait_for("/health/ready", 200).await;
    strict.wait_for("/health/ready", 200).await;

    redis.stop();
    // Both replicas have noticed the outage (`/health` reports it at once).
    patient.wait_for("/health", 500).await;
    strict.wait_for("/health", 500).await;
    let body = strict.wait_for("/health/ready", 503).await;
    assert_eq!(failing_checks(&body), ["store"], "{body}");
    // Within its grace period, the other replica stays ready; both stay alive.
    assert_eq!(patient.get("/health/ready").await.expect("answer").0, 200);
    assert_eq!(patient.get("/health/live").await.expect("answer").0, 200);
    assert_eq!(strict.get("/health/live").await.expect("answer").0, 200);

    redis.restart();
    strict.wait_for("/health/ready", 200).await;
    assert_eq!(patient.get("/health/ready").await.expect("answer").0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_fails_readiness_serves_through_the_drain_then_exits() {
    let redis = TestRedis::start();
    let mut app = Binary::start(&[
        "--redis-url",
        &redis.url(),
        // Long enough for the few requests below on a busy machine; the exit is waited for.
        "--shutdown-drain-ms",
        "8000",
    ]);
    app.wait_for("/health/ready", 200).await;
    let created = app
        .http
        .post(format!("{}/api/admin/features", app.base))
        .basic_auth("ops", Some(""))
        .json(&serde_json::json!({"name": "drained", "strategies": [{"name": "default"}]}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 200);
    // The client document holds the toggle before the stop begins.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, health) = app.get("/health").await.expect("answer");
        if health["clientVersion"] == health["version"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "client document not built: {health}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    app.signal("TERM");
    let body = app.wait_for("/health/ready", 503).await;
    assert_eq!(failing_checks(&body), ["shutdown"], "{body}");
    // Still serving: clients, admins and the liveness probe.
    let (status, features) = app.get("/api/client/features").await.expect("answer");
    assert_eq!(status, 200, "{features}");
    let names: Vec<&str> = features["features"]
        .as_array()
        .expect("features")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert!(names.contains(&"drained"), "{features}");
    let admin = app
        .http
        .get(format!("{}/api/admin/features/drained", app.base))
        .basic_auth("ops", Some(""))
        .send()
        .await
        .expect("admin read");
    assert_eq!(admin.status(), 200);
    assert_eq!(app.get("/health/live").await.expect("answer").0, 200);

    let exit = app.exit().await;
    assert!(exit.success(), "exit status {exit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_lets_a_delivery_in_flight_settle() {
    let backend = Backend::redis();
    let mut settings = quick(&backend);
    settings.server.shutdown_drain_ms = 200;
    let app = TestApp::spawn_with(settings).await;
    let receiver = Receiver::start().await;
    let id = webhook(
        &app,
        &receiver.url("/hook"),
        &["feature-created"],
        serde_json::json!({}),
    )
    .await;
    // The receiver answers (within the delivery timeout) only after the stop has begun.
    receiver.answer_always(Answer::Hang(Duration::from_millis(1500), 200));
    app.create_toggle("stopping").await;
    assert!(receiver.wait_received(1, Duration::from_secs(15)).await);
    app.stop().await;
    let received = receiver.received();
    assert!(
        received[0].accepted(),
        "the attempt was cut off: {received:?}"
    );

    // Settled before the replica stopped: delivered, once.
    let again = TestApp::spawn(&backend).await;
    let log = deliveries(&again, id).await;
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["status"], "delivered", "{}", log[0]);
    assert_eq!(log[0]["attempts"], 1, "{}", log[0]);
}
