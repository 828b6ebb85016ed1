//! `StreamsFirst`: SSE streams served on connections of their own, outside hyper.
//!
//! An idle stream served through hyper holds hyper's whole connection: an 8 KiB read buffer,
//! an 8 KiB header buffer, the cached request headers and the connection's future — most of
//! the 18.8 KiB measured per idle stream. A connection whose first request is
//! `GET /api/client/streaming` is read and answered here instead: its request head is parsed
//! (httparse) into the request the same handler takes, and the connection is then held by one
//! task owning only the socket and the stream's body. The response is chunked, as hyper sends
//! it (SSE clients over urllib3, the Python SDK's, wait for a whole read buffer of a
//! close-delimited body), with `connection: close` since nothing follows it on the
//! connection; every write has the write timeout. A stream asked for on a connection that already carried other
//! requests is served by hyper as before; every other connection goes to hyper untouched.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Version};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{streaming, ClientApi};
use crate::error::ApiError;

/// What a connection's first bytes are when it asks for a stream (then a space or a query).
const STREAM_REQUEST: &[u8] = b"GET /api/client/streaming";
/// How long a new connection may take to send its first bytes before hyper gets it anyway.
const FIRST_BYTES_WAIT: Duration = Duration::from_secs(10);
/// How long a stream request's head may take to arrive.
const HEAD_WAIT: Duration = Duration::from_secs(30);
/// The largest request head read here (hyper's default limit is about as large).
const HEAD_MAX: usize = 16 * 1024;
/// The most header lines a stream request may have.
const HEADERS_MAX: usize = 64;

/// Serves the stream requests of new connections, with the client API's handler.
#[derive(Clone)]
pub struct StreamsFirst {
    api: Arc<ClientApi>,
    write_timeout: Duration,
}

impl StreamsFirst {
    /// Streams of `api`, each write waiting at most `write_timeout` for the client.
    pub fn new(api: Arc<ClientApi>, write_timeout: Duration) -> Self {
        Self { api, write_timeout }
    }

    /// Serves `tcp` to its end when its first request asks for a stream; otherwise gives it
    /// back, unread, for hyper.
    pub async fn claim(&self, mut tcp: TcpStream, peer: SocketAddr) -> Option<TcpStream> {
        if !asks_for_a_stream(&tcp).await {
            return Some(tcp);
        }
        let (response, version) = match read_request(&mut tcp, peer).await {
            Ok(Some(request)) => {
                let version = request.version();
                let response =
                    streaming::stream_client_features(State(self.api.clone()), request).await;
                (response.into_response(), version)
            }
            Ok(None) => return None,
            Err(refusal) => (refusal.into_response(), Version::HTTP_11),
        };
        let chunked = version != Version::HTTP_10;
        if let Err(e) = write_response(&mut tcp, response, chunked, self.write_timeout).await {
            tracing::debug!(error = %e, "stream connection ended");
        }
        None
    }
}

/// Whether the connection's first bytes are a stream request. Waits for them (at most
/// `FIRST_BYTES_WAIT`) without consuming them.
async fn asks_for_a_stream(tcp: &TcpStream) -> bool {
    let mut first = [0u8; STREAM_REQUEST.len() + 1];
    // A first packet shorter than the prefix is rare: look again a few times, briefly.
    for _ in 0..20 {
        let seen = match tokio::time::timeout(FIRST_BYTES_WAIT, tcp.peek(&mut first)).await {
            Ok(Ok(seen)) => seen,
            _ => return false,
        };
        if seen == 0 {
            return false;
        }
        let compared = seen.min(STREAM_REQUEST.len());
        if first[..compared] != STREAM_REQUEST[..compared] {
            return false;
        }
        if seen == first.len() {
            return matches!(first[STREAM_REQUEST.len()], b' ' | b'?');
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// Reads and parses the request head: the request (with an empty body and the peer's address,
/// as hyper would give it), `None` when the client went away or took too long, or the `4xx`
/// to answer.
async fn read_request(tcp: &mut TcpStream, peer: SocketAddr) -> Result<Option<Request>, ApiError> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        loop {
            let n = tcp.read(&mut chunk).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&chunk[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
            if head.len() > HEAD_MAX {
                return Ok(true);
            }
        }
    };
    match tokio::time::timeout(HEAD_WAIT, read).await {
        Ok(Ok(true)) => {}
        _ => return Ok(None),
    }
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut parsed = httparse::Request::new(&mut headers);
    let malformed = |e: &dyn std::fmt::Display| {
        ApiError::bad_request("request", format!("Malformed request head: {e}"))
    };
    match parsed.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
            return Err(ApiError::bad_request(
                "request",
                format!(
                    "The request head is larger than {} KiB or has more than {HEADERS_MAX} headers",
                    HEAD_MAX / 1024
                ),
            ))
        }
        Err(e) => return Err(malformed(&e)),
    }
    let mut request = Request::builder()
        .method(Method::GET)
        .uri(parsed.path.unwrap_or("/"))
        .version(match parsed.version {
            Some(0) => Version::HTTP_10,
            _ => Version::HTTP_11,
        })
        .extension(ConnectInfo(peer));
    for header in parsed.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|e| malformed(&e))?;
        let value = HeaderValue::from_bytes(header.value).map_err(|e| malformed(&e))?;
        request = request.header(name, value);
    }
    request
        .body(Body::empty())
        .map(Some)
        .map_err(|e| malformed(&e))
}

/// Writes `response` as HTTP/1.1, its body chunked (or, for an HTTP/1.0 client, delimited by
/// the end of the connection), then closes the connection.
async fn write_response(
    tcp: &mut TcpStream,
    response: Response,
    chunked: bool,
    write_timeout: Duration,
) -> std::io::Result<()> {
    let (parts, body) = response.into_parts();
    let mut head = Vec::with_capacity(256);
    let status: StatusCode = parts.status;
    write!(
        head,
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )?;
    for (name, value) in &parts.headers {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if chunked {
        head.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    head.extend_from_slice(b"connection: close\r\n\r\n");
    drop(parts);
    timed(write_timeout, tcp.write_all(&head)).await?;
    drop(head);
    let mut data = body.into_data_stream();
    while let Some(bytes) = data.next().await {
        let bytes = bytes.map_err(std::io::Error::other)?;
        if bytes.is_empty() {
            continue;
        }
        if chunked {
            let size = format!("{:x}\r\n", bytes.len());
            timed(write_timeout, tcp.write_all(size.as_bytes())).await?;
            timed(write_timeout, tcp.write_all(&bytes)).await?;
            timed(write_timeout, tcp.write_all(b"\r\n")).await?;
        } else {
            timed(write_timeout, tcp.write_all(&bytes)).await?;
        }
    }
    if chunked {
        timed(write_timeout, tcp.write_all(b"0\r\n\r\n")).await?;
    }
    timed(write_timeout, tcp.shutdown()).await
}

/// `write`, failing with `TimedOut` when it waits longer than `limit` for the client.
async fn timed(
    limit: Duration,
    write: impl std::future::Future<Output = std::io::Result<()>>,
) -> std::io::Result<()> {
    tokio::time::timeout(limit, write)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}
