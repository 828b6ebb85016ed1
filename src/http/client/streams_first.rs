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
//! connection. Writes have the connection's write timeout; a client that closes its end is
//! noticed at once, as hyper notices it. A stream asked for on a connection that already
//! carried other requests is served by hyper as before; every other connection goes to hyper
//! untouched.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, Version};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::{streaming, ClientApi};
use crate::error::ApiError;
use crate::http::listener::Connection;

/// What a connection's first bytes are when it asks for a stream (then a space or a query).
const STREAM_REQUEST: &[u8] = b"GET /api/client/streaming";
/// How long a new connection may take to send its first bytes before hyper gets it anyway.
const FIRST_BYTES_WAIT: Duration = Duration::from_secs(10);
/// How long a stream request's head may take to arrive.
const HEAD_WAIT: Duration = Duration::from_secs(30);
/// The largest request head read here (hyper's default limit is about as large).
const HEAD_MAX: usize = 16 * 1024;
/// The most header lines a stream request may have (hyper's limit).
const HEADERS_MAX: usize = 100;
/// After a refusal, how long and how much of what the client still sends is read and dropped,
/// so that closing with unread bytes does not reset the connection before the client has
/// read the answer.
const LINGER_WAIT: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 256 * 1024;
/// Frames up to this size go out as one write with their chunk framing (one segment for a
/// heartbeat, as hyper's vectored write); larger ones as three writes, without a copy.
const ONE_WRITE_MAX: usize = 4096;

/// Serves the stream requests of new connections, with the client API's handler.
#[derive(Clone)]
pub struct StreamsFirst {
    api: Arc<ClientApi>,
    /// Connections still sending their request when it fires are closed (shutdown).
    stop: CancellationToken,
}

impl StreamsFirst {
    /// Streams of `api`; connections that have not sent their request by `stop` are closed.
    pub fn new(api: Arc<ClientApi>, stop: CancellationToken) -> Self {
        Self { api, stop }
    }

    /// Serves `io` to its end when its first request asks for a stream; otherwise gives it
    /// back, unread, for hyper.
    pub async fn claim(&self, mut io: Connection, peer: SocketAddr) -> Option<Connection> {
        let asks = tokio::select! {
            _ = self.stop.cancelled() => return None,
            asks = asks_for_a_stream(&io) => asks,
        };
        if !asks {
            return Some(io);
        }
        // Boxed, so that an open stream's task keeps only the writing state, not the
        // reading's or the handler's.
        let read = tokio::select! {
            _ = self.stop.cancelled() => return None,
            read = Box::pin(read_request(&mut io, peer)) => read,
        };
        let (response, chunked) = match read {
            Ok(Some(request)) => {
                let chunked = request.version() != Version::HTTP_10;
                let handled = Box::pin(streaming::stream_client_features(
                    State(self.api.clone()),
                    request,
                ));
                (handled.await.into_response(), chunked)
            }
            Ok(None) => return None,
            // A head that could not be read may be of any version: a body delimited by the
            // end of the connection is one every version reads.
            Err(refusal) => (refusal.into_response(), false),
        };
        let refused = !response.status().is_success();
        if let Err(e) = write_response(&mut io, response, chunked).await {
            tracing::debug!(error = %e, "stream connection ended");
        }
        if refused {
            drain(&mut io).await;
        }
        None
    }
}

/// Reads and drops what the client still sends, within `LINGER_WAIT` and `LINGER_BYTES`.
async fn drain(io: &mut Connection) {
    let mut buffer = [0u8; 4096];
    let mut dropped = 0;
    let _ = tokio::time::timeout(LINGER_WAIT, async {
        while dropped < LINGER_BYTES {
            match io.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => dropped += n,
            }
        }
    })
    .await;
}

/// Whether the connection's first bytes are a stream request. Waits for them (at most
/// `FIRST_BYTES_WAIT`) without consuming them.
async fn asks_for_a_stream(io: &Connection) -> bool {
    let tcp = io.get_ref();
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
async fn read_request(io: &mut Connection, peer: SocketAddr) -> Result<Option<Request>, ApiError> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        loop {
            let n = io.read(&mut chunk).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&chunk[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() > HEAD_MAX {
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
            return Err(ApiError::HeadersTooLarge(format!(
                "The request head is larger than {} KiB or has more than {HEADERS_MAX} headers",
                HEAD_MAX / 1024
            )))
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

/// Writes `response` as HTTP/1.1, its body chunked (or, for an HTTP/1.0 client and for a
/// refused head, delimited by the end of the connection), then closes the connection; stops
/// early when the client closes its end.
async fn write_response(
    io: &mut Connection,
    response: Response,
    chunked: bool,
) -> std::io::Result<()> {
    let (parts, body) = response.into_parts();
    let mut head = Vec::with_capacity(256);
    write!(
        head,
        "HTTP/1.1 {} {}\r\ndate: {}\r\n",
        parts.status.as_u16(),
        parts.status.canonical_reason().unwrap_or(""),
        chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT")
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
    io.write_all(&head).await?;
    drop(head);
    let mut data = body.into_data_stream();
    // The client sends nothing more; a read that returns is its end (or bytes to ignore).
    let mut probe = [0u8; 1];
    loop {
        let bytes = tokio::select! {
            next = data.next() => match next {
                Some(bytes) => bytes.map_err(std::io::Error::other)?,
                None => break,
            },
            read = io.read(&mut probe) => match read {
                Ok(0) | Err(_) => return Ok(()),
                Ok(_) => continue,
            },
        };
        if bytes.is_empty() {
            continue;
        }
        if !chunked {
            io.write_all(&bytes).await?;
        } else if bytes.len() <= ONE_WRITE_MAX {
            let mut chunk = Vec::with_capacity(bytes.len() + 16);
            write!(chunk, "{:x}\r\n", bytes.len())?;
            chunk.extend_from_slice(&bytes);
            chunk.extend_from_slice(b"\r\n");
            io.write_all(&chunk).await?;
        } else {
            io.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
                .await?;
            io.write_all(&bytes).await?;
            io.write_all(b"\r\n").await?;
        }
    }
    if chunked {
        io.write_all(b"0\r\n\r\n").await?;
    }
    io.shutdown().await
}
