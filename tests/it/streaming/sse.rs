//! A minimal server-sent events reader over reqwest, for the streaming tests.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::common::{send, Reply, TestApp};

/// One frame of a stream: an event, or comment and `retry:` lines.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    pub event: Option<String>,
    pub id: Option<u64>,
    pub data: Value,
    pub comments: Vec<String>,
    pub retry: Option<u64>,
}

impl Frame {
    /// The `events` array of the data.
    pub fn events(&self) -> Vec<Value> {
        self.data["events"].as_array().cloned().unwrap_or_default()
    }

    /// The event types, in order.
    pub fn types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// An open stream.
pub struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    /// Opens `/api/client/streaming{query}`; the reply when it is not a stream.
    pub async fn open(
        app: &TestApp,
        query: &str,
        last_event_id: Option<&str>,
    ) -> Result<Sse, Reply> {
        let mut request = app.anonymous(Method::GET, &format!("/api/client/streaming{query}"));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        Sse::open_request(request).await
    }

    /// Opens the stream `request` asks for; the reply when it is not a stream.
    pub async fn open_request(request: reqwest::RequestBuilder) -> Result<Sse, Reply> {
        let response = request
            .header("Accept", "text/event-stream")
            .send()
            .await
            .expect("request sent");
        if response.status() != 200 {
            return Err(send_reply(response).await);
        }
        assert_eq!(
            response.headers()["content-type"].to_str().ok(),
            Some("text/event-stream")
        );
        Ok(Sse {
            response,
            buffer: String::new(),
        })
    }

    /// Opens a stream that must open.
    pub async fn connect(app: &TestApp, last_event_id: Option<&str>) -> Sse {
        match Sse::open(app, "", last_event_id).await {
            Ok(sse) => sse,
            Err(reply) => panic!("stream refused: {} {:?}", reply.status, reply.json),
        }
    }

    /// The next frame within `wait`; `None` at the end of the stream or on time-out.
    pub async fn next(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                return Some(parse(&raw));
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk()).await;
            match chunk {
                Ok(Ok(Some(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// The next event frame (comments skipped) within `wait`.
    pub async fn next_event(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame = self.next(left).await?;
            if frame.event.is_some() {
                return Some(frame);
            }
        }
    }
}

async fn send_reply(response: reqwest::Response) -> Reply {
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

fn parse(raw: &str) -> Frame {
    let mut frame = Frame::default();
    for line in raw.lines() {
        if let Some(comment) = line.strip_prefix(':') {
            frame.comments.push(comment.trim().to_string());
        } else if let Some((field, value)) = line.split_once(':') {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => frame.event = Some(value.to_string()),
                "id" => frame.id = value.parse().ok(),
                "data" => frame.data = serde_json::from_str(value).expect("data is JSON"),
                "retry" => frame.retry = value.parse().ok(),
                _ => {}
            }
        }
    }
    frame
}

/// `GET /api/client/delta{query}` with an optional `If-None-Match`.
pub async fn delta(app: &TestApp, query: &str, if_none_match: Option<&str>) -> Reply {
    let mut request = app.anonymous(Method::GET, &format!("/api/client/delta{query}"));
    if let Some(etag) = if_none_match {
        request = request.header("If-None-Match", etag);
    }
    send(request).await
}
