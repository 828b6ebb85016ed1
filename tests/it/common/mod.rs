//! Test fixtures: a private `redis-server` per test, the real service started through
//! `flagpole::run` on 127.0.0.1:0, and an HTTP client that speaks to it.

#![allow(dead_code)]

pub mod receiver;
pub mod topology;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tempfile::TempDir;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use flagpole::config::{AuthMode, Settings};

/// A redis-server of this test only, on a unix socket (no TCP port, so no port races), with
/// an append-only file so that a restart keeps the data. Killed on drop.
pub struct TestRedis {
    dir: TempDir,
    child: Mutex<Option<Child>>,
}

impl TestRedis {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir for redis");
        let redis = Self {
            dir,
            child: Mutex::new(None),
        };
        redis.spawn();
        redis
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// The URL the service connects with.
    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket().display())
    }

    fn spawn(&self) {
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(self.socket())
            .args([
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "yes",
            ])
            .args(["--appendfsync", "always", "--dir"])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        *self.child.lock().expect("lock") = Some(child);
        wait_for_socket(&self.socket());
    }

    /// Runs a redis-cli command against this server and returns what it printed.
    pub fn cli_output(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .arg("-s")
            .arg(self.socket())
            .args(args)
            .output()
            .expect("redis-cli must be installed with redis-server");
        assert!(output.status.success(), "redis-cli {args:?} failed");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs a redis-cli command against this server.
    pub fn cli(&self, args: &[&str]) {
        let status = Command::new("redis-cli")
            .arg("-s")
            .arg(self.socket())
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("redis-cli must be installed with redis-server");
        assert!(status.success(), "redis-cli {args:?} failed");
    }

    /// Sends a signal (`STOP`, `CONT`) to the server process.
    pub fn signal(&self, signal: &str) {
        let guard = self.child.lock().expect("lock");
        let pid = guard.as_ref().expect("running").id().to_string();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Kills the server (as a crash would).
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().expect("lock").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.socket());
    }

    /// Starts the server again on the same socket and data.
    pub fn restart(&self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

fn wait_for_socket(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(mut stream) = std::os::unix::net::UnixStream::connect(path) {
            use std::io::{Read, Write};
            if stream.write_all(b"PING\r\n").is_ok() {
                let mut buf = [0u8; 7];
                if stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n" {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("redis-server did not come up at {}", path.display());
}

/// Where a test's service keeps its data.
pub enum Backend {
    Redis(TestRedis),
    Embedded(TempDir),
    /// A Redis Cluster of three masters with a replica each (`--redis-mode cluster`).
    Cluster(topology::TestCluster),
}

impl Backend {
    pub fn redis() -> Self {
        Backend::Redis(TestRedis::start())
    }

    pub fn embedded() -> Self {
        Backend::Embedded(tempfile::tempdir().expect("temp dir for the embedded store"))
    }

    pub fn cluster() -> Self {
        Backend::Cluster(topology::TestCluster::start())
    }

    /// Settings pointing a replica at this backend.
    pub fn settings(&self) -> Settings {
        let mut settings = Settings::defaults();
        settings.server.listen = "127.0.0.1:0".parse().expect("address");
        settings.replication.refresh_interval_ms = 200;
        // Tests stop replicas all the time; no load balancer needs a drain here.
        settings.server.shutdown_drain_ms = 0;
        match self {
            Backend::Redis(redis) => {
                settings.store.redis_url = Some(redis.url());
                settings.store.key_prefix = "test".into();
            }
            Backend::Embedded(dir) => settings.store.data_dir = dir.path().to_path_buf(),
            Backend::Cluster(cluster) => {
                settings.store.redis_url = Some(cluster.url());
                settings.store.redis_mode = flagpole::config::RedisMode::Cluster;
                settings.store.key_prefix = "test".into();
            }
        }
        settings
    }

    pub fn redis_server(&self) -> &TestRedis {
        match self {
            Backend::Redis(redis) => redis,
            _ => panic!("not a single redis-server backend"),
        }
    }
}

/// A response, its body parsed as JSON when it is JSON.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
    pub json: Value,
}

impl Reply {
    /// Asserts the status, showing the body when it differs.
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        self
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ascii header").to_string())
    }

    /// Asserts the JSON error body shape and returns its message.
    pub fn error_message(&self) -> String {
        let message = self.json["message"]
            .as_str()
            .unwrap_or_else(|| panic!("error body without message: {}", self.json));
        let details = self.json["details"].as_array().expect("details array");
        assert!(!details.is_empty(), "details must not be empty");
        for d in details {
            assert!(d["message"].is_string() && d["path"].is_string(), "{d}");
        }
        message.to_string()
    }
}

/// One replica of the service running in this test process.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    shutdown: CancellationToken,
    handle: Option<JoinHandle<()>>,
}

impl TestApp {
    /// Starts a replica on `backend` and waits until it serves.
    pub async fn spawn(backend: &Backend) -> Self {
        Self::spawn_with(backend.settings()).await
    }

    /// Starts a replica with explicit settings.
    pub async fn spawn_with(settings: Settings) -> Self {
        let listener = tokio::net::TcpListener::bind(settings.server.listen)
            .await
            .expect("bind 127.0.0.1:0");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let handle = tokio::spawn(async move {
            flagpole::run(settings, listener, token)
                .await
                .expect("service runs");
        });
        let app = Self {
            base,
            http: reqwest::Client::new(),
            shutdown,
            handle: Some(handle),
        };
        app.wait_healthy().await;
        app
    }

    /// Waits until `/health` answers 200.
    pub async fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(r) = self.http.get(format!("{}/health", self.base)).send().await {
                if r.status() == StatusCode::OK {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "service did not become healthy");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the replica and waits for it to finish.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(handle) = self.handle.take() {
            handle.await.expect("service task");
        }
    }

    /// A request with admin credentials (basic auth `admin:`).
    pub fn admin(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .basic_auth("admin", Some(""))
    }

    /// A request without credentials.
    pub fn anonymous(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base))
    }

    pub async fn get(&self, path: &str) -> Reply {
        send(self.admin(Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        send(self.admin(Method::POST, path).json(&body)).await
    }

    /// A POST without a body or Content-Type.
    pub async fn post_empty(&self, path: &str) -> Reply {
        send(self.admin(Method::POST, path)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Reply {
        send(self.admin(Method::PUT, path).json(&body)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        send(self.admin(Method::DELETE, path)).await
    }

    /// Creates a toggle with the default strategy and returns its admin JSON.
    pub async fn create_toggle(&self, name: &str) -> Value {
        self.post(
            "/api/admin/features",
            serde_json::json!({"name": name, "strategies": [{"name": "default"}]}),
        )
        .await
        .expect(200)
        .json
    }

    /// Creates a toggle with the default strategy and returns the whole reply.
    pub async fn create_toggle_reply(&self, name: &str) -> Reply {
        self.post(
            "/api/admin/features",
            serde_json::json!({"name": name, "strategies": [{"name": "default"}]}),
        )
        .await
    }

    /// `create_toggle` taking an owned name, for futures collected in a loop.
    pub async fn create_toggle_owned(&self, name: String) -> Value {
        self.create_toggle(&name).await
    }

    /// Waits until the client documents serve the newest version this replica holds (they
    /// lag it by at most one build; `/health` shows both versions).
    pub async fn settle(&self) {
        let settled = eventually(Duration::from_secs(5), || async {
            let health = self.get("/health").await.json;
            health["clientVersion"] == health["version"]
        })
        .await;
        assert!(
            settled,
            "client documents did not catch up with the configuration"
        );
    }

    /// The replica's Prometheus exposition text.
    pub async fn metrics_text(&self) -> String {
        let reply = send(self.anonymous(Method::GET, "/internal-backstage/prometheus"))
            .await
            .expect(200);
        String::from_utf8(reply.bytes).expect("utf-8")
    }

    /// The value of the Prometheus sample `sample` (name and labels, as exposed), if any.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        prometheus_sample(&self.metrics_text().await, sample)
    }

    /// `GET /api/client/features` with the SDK headers, once the documents are settled.
    pub async fn client_features(&self, query: &str, if_none_match: Option<&str>) -> Reply {
        self.settle().await;
        let mut request = self
            .anonymous(Method::GET, &format!("/api/client/features{query}"))
            .header("UNLEASH-APPNAME", "tests")
            .header("UNLEASH-INSTANCEID", "i-1");
        if let Some(etag) = if_none_match {
            request = request.header("If-None-Match", etag);
        }
        send(request).await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Sends a request and collects the reply.
pub async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.expect("request sent");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body").to_vec();
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        bytes,
        json,
    }
}

/// The value of the sample `sample` (name and labels, as exposed) in Prometheus text, if any.
pub fn prometheus_sample(text: &str, sample: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// Polls `check` until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Settings with no admin authentication.
pub fn without_auth(mut settings: Settings) -> Settings {
    settings.auth.mode = AuthMode::None;
    settings
}

/// Runs a conformance test against both backends, and Redis in Cluster mode:
/// `conformance!(name)` expands to `redis::name`, `embedded::name` and `cluster::name`, each
/// calling `name(&Backend)` (the cluster one on a six-node cluster of its own).
#[macro_export]
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&$crate::common::Backend::redis()).await;
                }
            )*
        }
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&$crate::common::Backend::embedded()).await;
                }
            )*
        }
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&$crate::common::Backend::cluster()).await;
                }
            )*
        }
    };
}

/// The `name`s of a toggle listing (`{"features": [...]}`), in order.
pub fn feature_names(listing: Value) -> Vec<String> {
    listing["features"]
        .as_array()
        .expect("features")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}
