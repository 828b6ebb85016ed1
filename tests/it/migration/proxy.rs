//! A loopback proxy in front of a real Unleash that does one thing wrong on purpose: answers
//! 500 on a route, cuts the connection halfway through an answer, or changes Unleash through
//! its API just before forwarding a request, so the read of `flagpole import-unleash` meets
//! the fault midway.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::ADMIN_TOKEN;

/// What the proxy does to a request whose path starts with the route.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Fault {
    None,
    /// Answers 500 itself.
    Fail(&'static str),
    /// Forwards, then cuts the connection halfway through Unleash's answer.
    Cut(&'static str),
    /// Makes a toggle in Unleash (its API), then forwards.
    ChangeUnleash(&'static str),
    /// Makes a context field in Unleash (its API: an event, but nothing in the client
    /// document), then forwards.
    AddContextField(&'static str),
}

impl Fault {
    fn route(&self) -> Option<&'static str> {
        match self {
            Fault::None => None,
            Fault::Fail(r)
            | Fault::Cut(r)
            | Fault::ChangeUnleash(r)
            | Fault::AddContextField(r) => Some(r),
        }
    }
}

/// The armed fault and how many requests of its route still pass untouched before it fires.
#[derive(Debug)]
struct Armed {
    fault: Fault,
    passing: usize,
}

#[derive(Clone)]
pub(super) struct Proxy {
    upstream: String,
    http: reqwest::Client,
    armed: Arc<Mutex<Armed>>,
}

impl Proxy {
    /// A proxy to `upstream` on a loopback port: it and its base URL.
    pub(super) async fn start(upstream: &str) -> (Self, String) {
        let proxy = Self {
            upstream: upstream.to_string(),
            http: reqwest::Client::new(),
            armed: Arc::new(Mutex::new(Armed {
                fault: Fault::None,
                passing: 0,
            })),
        };
        let router = axum::Router::new()
            .fallback(forward)
            .with_state(proxy.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        (proxy, base)
    }

    /// Arms `fault` for the first request of its route.
    pub(super) fn set(&self, fault: Fault) {
        self.set_after(fault, 0);
    }

    /// Arms `fault` for the request of its route after the first `passing` of them.
    pub(super) fn set_after(&self, fault: Fault, passing: usize) {
        *self.armed.lock().expect("the fault") = Armed { fault, passing };
    }

    /// The fault for `path`, taken (each fires once).
    fn take(&self, path: &str) -> Fault {
        let mut armed = self.armed.lock().expect("the fault");
        match armed.fault.route() {
            Some(route) if path.starts_with(route) => {}
            _ => return Fault::None,
        }
        if armed.passing > 0 {
            armed.passing -= 1;
            return Fault::None;
        }
        std::mem::replace(&mut armed.fault, Fault::None)
    }

    /// `POST route` with `body` on Unleash, as its admin.
    async fn write(&self, route: &str, body: serde_json::Value) {
        let made = self
            .http
            .post(format!("{}{route}", self.upstream))
            .header("Authorization", ADMIN_TOKEN)
            .json(&body)
            .send()
            .await
            .expect("Unleash answers");
        assert!(made.status().is_success(), "{route}: {}", made.status());
    }
}

async fn forward(
    State(proxy): State<Proxy>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fault = proxy.take(uri.path());
    match fault {
        Fault::Fail(_) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "{\"message\":\"proxy: failing\"}",
            )
                .into_response();
        }
        Fault::ChangeUnleash(_) => {
            let toggle = json!({"name": "made-during-the-read"});
            proxy
                .write("/api/admin/projects/default/features", toggle)
                .await;
        }
        Fault::AddContextField(_) => {
            let field = json!({"name": "made-during-the-read", "description": "a late field"});
            proxy.write("/api/admin/context", field).await;
        }
        Fault::None | Fault::Cut(_) => {}
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = proxy
        .http
        .request(method, format!("{}{path}", proxy.upstream))
        .body(body);
    for name in ["authorization", "content-type", "unleash-client-spec"] {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value);
        }
    }
    let answer = request.send().await.expect("Unleash answers");
    let status = answer.status();
    let mut response = Response::builder().status(status.as_u16());
    for name in ["content-type", "etag"] {
        if let Some(value) = answer.headers().get(name) {
            response = response.header(name, value.as_bytes());
        }
    }
    let bytes = answer.bytes().await.expect("Unleash's body");
    let body = if let Fault::Cut(_) = fault {
        let half = bytes.slice(..bytes.len() / 2);
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            vec![Ok(half), Err(std::io::Error::other("proxy: cut"))];
        Body::from_stream(futures_util::stream::iter(chunks))
    } else {
        Body::from(bytes)
    };
    response.body(body).expect("a response")
}
