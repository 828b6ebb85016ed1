//! State export and import (`/api/admin/state`, issue 8, API-FACTS §7): the export's query
//! parameters and document (`export.rs`); imports as a JSON body and as multipart JSON or
//! YAML files, atomicity across replicas (`import.rs`); `drop`, `keep`, both and `dryRun` with
//! their summaries and events, dropping projects (`drop_keep.rs`); refused documents of every
//! kind — every problem listed with its path, nothing written — the body limit and YAML bombs
//! (`invalid.rs`); the round trip between stores and backends (`round_trip.rs`); version-2
//! documents of a whole instance (`instance.rs`); and the start-up seed (`seed.rs`).

mod client_shape;
mod drop_keep;
mod export;
mod import;
mod instance;
mod invalid;
mod round_trip;
mod seed;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use flagpole::config::Settings;

use crate::common::{eventually, send, Backend, Reply, TestApp};

const EXPORT: &str = "/api/admin/state/export";
const IMPORT: &str = "/api/admin/state/import";

/// How a document is sent to the import.
#[derive(Clone)]
pub enum Upload {
    /// A JSON body (`application/json`).
    Json(Value),
    /// Raw bytes with this Content-Type (or none).
    Body(Option<&'static str>, Vec<u8>),
    /// A multipart `file` part with this file name (or none), after a form field of another
    /// name that the import must skip.
    File(Option<&'static str>, Vec<u8>),
}

/// The real binary on the embedded store in `data_dir`, on a free port; killed on drop.
pub struct Binary {
    child: Child,
    pub base: String,
    pub http: reqwest::Client,
}

impl Binary {
    /// Starts the binary and waits until it is healthy.
    pub async fn start(data_dir: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .env("FLAGPOLE_REDIS_URL", "")
            // As many request workers on every machine: two busy requests occupy them all.
            .env("TOKIO_WORKER_THREADS", "2")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn flagpole");
        let binary = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        let healthy = eventually(Duration::from_secs(15), || async {
            let health = binary.http.get(format!("{}/health", binary.base)).send();
            matches!(health.await, Ok(r) if r.status() == 200)
        })
        .await;
        assert!(healthy, "the binary did not become healthy");
        binary
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /api/admin/state/export{query}`, answered 200.
pub async fn export_reply(app: &TestApp, query: &str) -> Reply {
    app.get(&format!("{EXPORT}{query}")).await.expect(200)
}

/// The exported document (JSON) with `query`.
pub async fn export(app: &TestApp, query: &str) -> Value {
    export_reply(app, query).await.json
}

/// `POST /api/admin/state/import{query}` with `document` as a JSON body.
pub async fn import(app: &TestApp, query: &str, document: &Value) -> Reply {
    upload(app, query, Upload::Json(document.clone())).await
}

/// `POST /api/admin/state/import{query}` with the document sent as `how` says.
pub async fn upload(app: &TestApp, query: &str, how: Upload) -> Reply {
    let request = app.admin(Method::POST, &format!("{IMPORT}{query}"));
    let request = match how {
        Upload::Json(document) => request.json(&document),
        Upload::Body(content_type, bytes) => match content_type {
            Some(content_type) => request.header("Content-Type", content_type).body(bytes),
            None => request.body(bytes),
        },
        Upload::File(file_name, bytes) => {
            let (content_type, body) = multipart(file_name, &bytes);
            request.header("Content-Type", content_type).body(body)
        }
    };
    send(request).await
}

/// A `multipart/form-data` body (reqwest is built without its multipart feature): a `note`
/// field, then the `file` part. Returns the Content-Type and the body.
fn multipart(file_name: Option<&str>, content: &[u8]) -> (String, Vec<u8>) {
    const BOUNDARY: &str = "flagpole-state-test-5f3a9c";
    let disposition = match file_name {
        Some(name) => format!("form-data; name=\"file\"; filename=\"{name}\""),
        None => "form-data; name=\"file\"".to_string(),
    };
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nnot the \
         document\r\n--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={BOUNDARY}"), body)
}

/// A document as YAML text.
pub fn yaml(document: &Value) -> Vec<u8> {
    yaml_serde::to_string(document)
        .expect("a JSON value serialises as YAML")
        .into_bytes()
}

/// A document as JSON text.
pub fn json_bytes(document: &Value) -> Vec<u8> {
    serde_json::to_vec(document).expect("a JSON value serialises")
}

/// A toggle of a document with the default strategy.
pub fn toggle(name: &str) -> Value {
    json!({"name": name, "strategies": [{"name": "default"}]})
}

/// Settings for a replica on a store of its own within `backend` (named `name`): another key
/// prefix on the Redis server, another directory next to the embedded store's.
pub fn isolated_settings(backend: &Backend, name: &str) -> Settings {
    let mut settings = backend.settings();
    match backend {
        Backend::Redis(_) | Backend::Cluster(_) => {
            settings.store.key_prefix = format!("test-{name}")
        }
        Backend::Embedded(_) => settings.store.data_dir = settings.store.data_dir.join(name),
    }
    settings
}

/// A replica on a store of its own within `backend` (see [`isolated_settings`]).
pub async fn spawn_isolated(backend: &Backend, name: &str) -> TestApp {
    TestApp::spawn_with(isolated_settings(backend, name)).await
}

/// The id of the newest event (ids count up from 1), 0 when there is none.
pub async fn last_event_id(app: &TestApp) -> u64 {
    let events = app.get("/api/admin/events?limit=1").await.expect(200).json;
    events["events"][0]["id"].as_u64().unwrap_or(0)
}

/// The events newer than `after`, oldest first.
pub async fn events_after(app: &TestApp, after: u64) -> Vec<Value> {
    let events = app
        .get("/api/admin/events?limit=1000")
        .await
        .expect(200)
        .json;
    let mut newer: Vec<Value> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["id"].as_u64().expect("event id") > after)
        .cloned()
        .collect();
    assert!(newer.len() < 1000, "more events than one listing shows");
    newer.reverse();
    newer
}

/// How many events of each type `events` holds.
pub fn type_counts(events: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for event in events {
        let kind = event["type"].as_str().expect("event type").to_string();
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}

/// `(type, count)` pairs as the map [`type_counts`] gives.
pub fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// Record counts in the summary's form.
pub fn records(created: u64, updated: u64, deleted: u64, unchanged: u64) -> Value {
    json!({"created": created, "updated": updated, "deleted": deleted, "unchanged": unchanged})
}

/// The project of the archived toggle `name`.
pub async fn archived_project(app: &TestApp, name: &str) -> Value {
    let archive = app
        .get("/api/admin/archive/features")
        .await
        .expect(200)
        .json;
    archive["features"]
        .as_array()
        .expect("archive")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not archived: {archive}"))["project"]
        .clone()
}

/// The paths of a 400's details, sorted, after checking the error body's shape.
pub fn refused_paths(reply: &Reply) -> Vec<String> {
    assert_eq!(
        reply.status.as_u16(),
        400,
        "expected a refusal; body: {}",
        String::from_utf8_lossy(&reply.bytes)
    );
    reply.error_message();
    let mut paths: Vec<String> = reply.json["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["path"].as_str().expect("path").to_string())
        .collect();
    paths.sort();
    paths
}

/// `value` without the `createdAt` and `lastSeenAt` keys at any depth: the timestamps an
/// import into another store cannot know (records that store already had keep their own).
pub fn without_timestamps(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "createdAt" && *k != "lastSeenAt")
                .map(|(k, v)| (k.clone(), without_timestamps(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_timestamps).collect()),
        other => other.clone(),
    }
}

/// What a replica holds, to show that a refused or dry-run import wrote nothing: the export,
/// the archive and the newest event.
#[derive(Debug, PartialEq)]
pub struct Stored {
    export: Value,
    archive: Value,
    last_event: u64,
}

impl Stored {
    pub async fn of(app: &TestApp) -> Self {
        Self {
            export: export(app, "").await,
            archive: app
                .get("/api/admin/archive/features")
                .await
                .expect(200)
                .json,
            last_event: last_event_id(app).await,
        }
    }

    /// Asserts that `app` still holds exactly this; `what` names the request in the message.
    pub async fn assert_unchanged(&self, app: &TestApp, what: &str) {
        assert_eq!(&Self::of(app).await, self, "{what} changed the store");
    }
}

/// A configuration with something in every section, made through the admin API: projects
/// `default` and `web`, context field `region` (with legal values), strategy `byRegion`, tag
/// type `team`, active toggles `checkout` (project `web`, constraint, variants, enabled,
/// impression data) and `search` (flexible rollout, stale, two tags), archived toggle `old`.
pub async fn populate(app: &TestApp) {
    app.post(
        "/api/admin/projects",
        json!({"id": "web", "name": "Web shop", "description": "storefront"}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/context",
        json!({"name": "region", "description": "where", "legalValues": ["eu", "us"]}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/strategies",
        json!({"name": "byRegion", "description": "by region", "parameters": [
            {"name": "regions", "type": "list", "description": "regions", "required": true}]}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/tag-types",
        json!({"name": "team", "description": "owning team", "icon": "T"}),
    )
    .await
    .expect(201);
    app.post(
        "/api/admin/features",
        json!({"name": "checkout", "description": "new checkout", "project": "web",
            "enabled": true, "impressionData": true, "strategies": [
                {"name": "byRegion", "parameters": {"regions": "eu"}, "constraints": [
                    {"contextName": "region", "operator": "IN", "values": ["eu"]}]}],
            "variants": [{"name": "blue", "weight": 500}, {"name": "green", "weight": 500}]}),
    )
    .await
    .expect(200);
    app.post(
        "/api/admin/features",
        json!({"name": "search", "type": "experiment", "strategies": [
            {"name": "flexibleRollout", "parameters":
                {"rollout": "25", "stickiness": "default", "groupId": "search"}}]}),
    )
    .await
    .expect(200);
    app.post_empty("/api/admin/features/search/stale/on")
        .await
        .expect(200);
    for (kind, value) in [("simple", "search-team"), ("team", "payments")] {
        app.post(
            "/api/admin/features/search/tags",
            json!({"type": kind, "value": value}),
        )
        .await
        .expect(201);
    }
    app.create_toggle("old").await;
    app.delete("/api/admin/features/old").await.expect(200);
}
