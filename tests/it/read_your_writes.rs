//! Read-your-writes on the client API: once a replica has answered a write, the very next
//! client request it serves — plain, gzip, filtered by tag, project or name prefix, or under a
//! token scoped to a project — serves the write, and a 304 is never sent for the document the
//! client held before it.

use std::collections::HashMap;
use std::io::Read;

use reqwest::Method;
use serde_json::{json, Value};

use crate::auth::{create_token, settings, with_token, ADMIN_TOKEN};
use crate::common::{send, Backend, Reply, TestApp};
use flagpole::config::{AuthMode, ClientAuth};

const WRITES: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis() {
    every_write_is_served_by_the_next_client_request(&Backend::redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded() {
    every_write_is_served_by_the_next_client_request(&Backend::embedded()).await;
}

/// The ways a client asks for its toggles, each with the toggles it must be served.
struct View {
    label: &'static str,
    query: &'static str,
    gzip: bool,
    /// The shop-scoped token rather than the unscoped one.
    scoped: bool,
    selects: fn(&Value) -> bool,
}

const VIEWS: [View; 6] = [
    View {
        label: "plain",
        query: "",
        gzip: false,
        scoped: false,
        selects: |_| true,
    },
    View {
        label: "gzip",
        query: "",
        gzip: true,
        scoped: false,
        selects: |_| true,
    },
    View {
        label: "tag[]",
        query: "?tag[]=simple:blue",
        gzip: false,
        scoped: false,
        selects: has_blue_tag,
    },
    View {
        label: "project",
        query: "?project=shop",
        gzip: true,
        scoped: false,
        selects: in_shop,
    },
    View {
        label: "namePrefix",
        query: "?namePrefix=a-",
        gzip: false,
        scoped: false,
        selects: |toggle| toggle["name"].as_str().is_some_and(|n| n.starts_with("a-")),
    },
    View {
        label: "shop-scoped token",
        query: "",
        gzip: false,
        scoped: true,
        selects: in_shop,
    },
];

fn has_blue_tag(toggle: &Value) -> bool {
    toggle["tags"].as_array().is_some_and(|tags| {
        tags.iter()
            .any(|t| t["type"] == "simple" && t["value"] == "blue")
    })
}

fn in_shop(toggle: &Value) -> bool {
    toggle["project"] == "shop"
}

/// What a client document says of a toggle, and what the admin view implies it must say.
fn client_form(toggle: &Value) -> Value {
    let strategies: Vec<Value> = toggle["strategies"]
        .as_array()
        .expect("strategies")
        .iter()
        .map(|s| json!({"name": s["name"], "parameters": s["parameters"]}))
        .collect();
    json!({"name": toggle["name"], "enabled": toggle["enabled"], "strategies": strategies})
}

/// A small deterministic generator (xorshift), so a failure can be replayed.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

async fn every_write_is_served_by_the_next_client_request(backend: &Backend) {
    let app = TestApp::spawn_with(settings(backend, AuthMode::Token, ClientAuth::Token)).await;
    admin(
        &app,
        Method::POST,
        "/api/admin/projects",
        Some(json!({"id": "shop", "name": "Shop"})),
    )
    .await
    .expect(201);
    let names: Vec<String> = (0..6)
        .flat_map(|i| [format!("a-{i}"), format!("b-{i}")])
        .collect();
    for (i, name) in names.iter().enumerate() {
        let project = if i % 3 == 0 { "shop" } else { "default" };
        admin(
            &app,
            Method::POST,
            "/api/admin/features",
            Some(json!({"name": name, "project": project, "enabled": true,
                        "strategies": [{"name": "userWithId", "parameters": {"userIds": "0"}}]})),
        )
        .await
        .expect(200);
    }
    let unscoped = create_token(&app, json!({"username": "sdk", "type": "client"})).await;
    let scoped = create_token(
        &app,
        json!({"username": "shop-sdk", "type": "client", "projects": ["shop"]}),
    )
    .await;

    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut truth = admin_toggles(&app).await;
    let mut archived: Vec<String> = Vec::new();
    // The last document each view was sent: a 304 confirms it.
    let mut held: HashMap<&str, (String, Value)> = HashMap::new();
    for view in &VIEWS {
        let reply = client_request(&app, view, &unscoped, &scoped, None)
            .await
            .expect(200);
        held.insert(view.label, (etag(&reply), document(view, &reply)));
    }
    for step in 0..WRITES {
        let write = match archived.is_empty() || dice.below(8) != 0 {
            true => {
                let name = names
                    .iter()
                    .filter(|n| !archived.contains(n))
                    .nth(dice.below(names.len() - archived.len()))
                    .expect("an active toggle")
                    .clone();
                let toggle = &truth[&name];
                match dice.below(7) {
                    0 => (
                        Method::POST,
                        format!("/api/admin/features/{name}/toggle/on"),
                        None,
                    ),
                    1 => (
                        Method::POST,
                        format!("/api/admin/features/{name}/toggle/off"),
                        None,
                    ),
                    2 => (
                        Method::PUT,
                        format!("/api/admin/features/{name}"),
                        Some(
                            json!({"project": toggle["project"], "enabled": toggle["enabled"],
                            "strategies": [{"name": "userWithId",
                                            "parameters": {"userIds": step.to_string()}}]}),
                        ),
                    ),
                    3 if has_blue_tag(toggle) => (
                        Method::DELETE,
                        format!("/api/admin/features/{name}/tags/simple/blue"),
                        None,
                    ),
                    3 => (
                        Method::POST,
                        format!("/api/admin/features/{name}/tags"),
                        Some(json!({"type": "simple", "value": "blue"})),
                    ),
                    4 => (
                        Method::PUT,
                        format!("/api/admin/features/{name}"),
                        Some(json!({
                            "project": if in_shop(toggle) { "default" } else { "shop" },
                            "enabled": toggle["enabled"], "strategies": toggle["strategies"]})),
                    ),
                    5 if archived.len() < names.len() / 2 => {
                        archived.push(name.clone());
                        (Method::DELETE, format!("/api/admin/features/{name}"), None)
                    }
                    _ => (
                        Method::POST,
                        format!("/api/admin/features/{name}/toggle/on"),
                        None,
                    ),
                }
            }
            false => {
                let name = archived.swap_remove(dice.below(archived.len()));
                (
                    Method::POST,
                    format!("/api/admin/archive/revive/{name}"),
                    None,
                )
            }
        };
        let (method, path, body) = write;
        let reply = admin(&app, method.clone(), &path, body).await;
        assert!(
            reply.status.is_success(),
            "step {step}: {method} {path}: {} {}",
            reply.status,
            String::from_utf8_lossy(&reply.bytes)
        );
        // The client requests come first, right after the answer; the truth after them.
        let mut replies = Vec::new();
        for view in &VIEWS {
            let held_etag = held[view.label].0.clone();
            replies.push(client_request(&app, view, &unscoped, &scoped, Some(&held_etag)).await);
        }
        truth = admin_toggles(&app).await;
        for (view, reply) in VIEWS.iter().zip(replies) {
            let served = match reply.status.as_u16() {
                304 => held[view.label].1.clone(),
                200 => document(view, &reply),
                other => panic!("step {step}, {}: status {other}", view.label),
            };
            let mut expected: Vec<Value> = truth
                .values()
                .filter(|t| (view.selects)(t))
                .map(client_form)
                .collect();
            expected.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            assert_eq!(
                served,
                Value::Array(expected),
                "step {step}, after {method} {path}: the {} view (status {}) does not serve the write",
                view.label,
                reply.status
            );
            if reply.status == 200 {
                held.insert(view.label, (etag(&reply), served));
            }
        }
    }
}

async fn admin(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Reply {
    with_token(app, method, path, Some(ADMIN_TOKEN), body).await
}

/// The active toggles by name, as the admin API shows them (it reads the replica's snapshot,
/// which holds every write it answered).
async fn admin_toggles(app: &TestApp) -> HashMap<String, Value> {
    let listing = with_token(
        app,
        Method::GET,
        "/api/admin/features",
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .expect(200)
    .json;
    listing["features"]
        .as_array()
        .expect("features")
        .iter()
        .map(|t| (t["name"].as_str().expect("name").to_string(), t.clone()))
        .collect()
}

async fn client_request(
    app: &TestApp,
    view: &View,
    unscoped: &str,
    scoped: &str,
    if_none_match: Option<&str>,
) -> Reply {
    let token = if view.scoped { scoped } else { unscoped };
    let mut request = app
        .anonymous(Method::GET, &format!("/api/client/features{}", view.query))
        .header("Authorization", token);
    if view.gzip {
        request = request.header("Accept-Encoding", "gzip");
    }
    if let Some(etag) = if_none_match {
        request = request.header("If-None-Match", etag);
    }
    send(request).await
}

fn etag(reply: &Reply) -> String {
    reply.header("etag").expect("an ETag")
}

/// The toggles a 200 serves, in their client form, by name.
fn document(view: &View, reply: &Reply) -> Value {
    let json: Value = match view.gzip {
        true => {
            assert_eq!(reply.header("content-encoding").as_deref(), Some("gzip"));
            let mut text = String::new();
            flate2::read::GzDecoder::new(&reply.bytes[..])
                .read_to_string(&mut text)
                .expect("gzip");
            serde_json::from_str(&text).expect("JSON")
        }
        false => reply.json.clone(),
    };
    let mut toggles: Vec<Value> = json["features"]
        .as_array()
        .expect("features")
        .iter()
        .map(client_form)
        .collect();
    toggles.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Value::Array(toggles)
}
