//! A webhook receiver on loopback for delivery tests: records every request and answers as
//! the test scripts it (a status, a `Retry-After`, a hang), one answer per request in order,
//! then a default.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

/// How the receiver answers one request.
#[derive(Debug, Clone)]
pub enum Answer {
    Status(u16),
    /// 429 (or another status) with a `Retry-After` header.
    RetryAfter(u16, String),
    /// Waits this long, then answers with the status (if the caller is still there).
    Hang(Duration, u16),
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub at: Instant,
    /// The status answered; `None` while hanging, or when the caller went away.
    pub answered: Option<u16>,
}

impl Received {
    /// The `X-Flagpole-Delivery` header.
    pub fn delivery(&self) -> String {
        self.headers
            .get("x-flagpole-delivery")
            .cloned()
            .unwrap_or_default()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    /// Whether it was answered with a 2xx.
    pub fn accepted(&self) -> bool {
        self.answered.is_some_and(|s| (200..300).contains(&s))
    }
}

#[derive(Default)]
struct Script {
    next: VecDeque<Answer>,
    default: Option<Answer>,
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    script: Mutex<Script>,
}

/// A running receiver; stops on drop.
pub struct Receiver {
    pub port: u16,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

/// A loopback port nothing listens on (yet).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A loopback port kept for a receiver that starts later: bound but not listening, so
/// connections to it are refused (the receiver is down) and no other test running alongside
/// can take it meanwhile (a port from `free_port` could be, and then answer in its place).
pub struct ReservedPort {
    socket: tokio::net::TcpSocket,
    pub port: u16,
}

impl ReservedPort {
    /// Reserves a free loopback port.
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.1:0".parse().expect("address"))
            .expect("bind a free port");
        let port = socket.local_addr().expect("address").port();
        Self { socket, port }
    }

    /// Starts the receiver on the reserved port.
    pub async fn start_receiver(self) -> Receiver {
        let Self { socket, port } = self;
        drop(socket);
        Receiver::start_on(port).await
    }
}

async fn record(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    let path = request.uri().path().to_string();
    let headers: HashMap<String, String> = headers_of(request.headers());
    let body: Bytes = axum::body::to_bytes(request.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    let answer = {
        let mut script = shared.script.lock().expect("lock");
        script
            .next
            .pop_front()
            .or_else(|| script.default.clone())
            .unwrap_or(Answer::Status(200))
    };
    let index = {
        let mut received = shared.received.lock().expect("lock");
        received.push(Received {
            path,
            headers,
            body: body.to_vec(),
            at: Instant::now(),
            answered: None,
        });
        received.len() - 1
    };
    let (status, retry_after) = match answer {
        Answer::Status(s) => (s, None),
        Answer::RetryAfter(s, after) => (s, Some(after)),
        Answer::Hang(wait, s) => {
            tokio::time::sleep(wait).await;
            (s, None)
        }
    };
    shared.received.lock().expect("lock")[index].answered = Some(status);
    let status = StatusCode::from_u16(status).expect("status");
    match retry_after {
        Some(after) => (status, [("Retry-After", after)]).into_response(),
        None => status.into_response(),
    }
}

fn headers_of(headers: &HeaderMap) -> HashMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                v.to_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

impl Receiver {
    /// A receiver on a free port.
    pub async fn start() -> Self {
        Self::start_on(0).await
    }

    /// A receiver on `port` (0: any free one).
    pub async fn start_on(port: u16) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the receiver");
        let port = listener.local_addr().expect("address").port();
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .fallback(record)
            .with_state(shared.clone());
        let stop = CancellationToken::new();
        let until = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(until)
                .await;
        });
        Self { port, shared, stop }
    }

    /// The URL of `path` on this receiver.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Answers the next requests with `answers`, in order.
    pub fn answer_next(&self, answers: impl IntoIterator<Item = Answer>) {
        self.shared
            .script
            .lock()
            .expect("lock")
            .next
            .extend(answers);
    }

    /// Answers every request without a scripted answer with `answer` (200 unless set).
    pub fn answer_always(&self, answer: Answer) {
        self.shared.script.lock().expect("lock").default = Some(answer);
    }

    /// Every request so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("lock").clone()
    }

    /// The requests answered with a 2xx.
    pub fn accepted(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(Received::accepted)
            .collect()
    }

    /// Waits until at least `n` requests were accepted; false after `timeout`.
    pub async fn wait_accepted(&self, n: usize, timeout: Duration) -> bool {
        crate::common::eventually(timeout, || async { self.accepted().len() >= n }).await
    }

    /// Waits until at least `n` requests arrived; false after `timeout`.
    pub async fn wait_received(&self, n: usize, timeout: Duration) -> bool {
        crate::common::eventually(timeout, || async { self.received().len() >= n }).await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
