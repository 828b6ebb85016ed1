//! `ServerListener`: the TCP listener the server accepts on. Each connection gets
//! `TCP_NODELAY` and a write timeout, and a connection whose first request asks for a stream
//! is served by `client::StreamsFirst` instead of hyper.
//!
//! A connection whose write waits longer than the write timeout without progress fails and is
//! closed, so a client that stops reading (a stalled stream, a stuck download) does not hold
//! its connection, its memory and its place under the stream cap for ever: the kernel would
//! keep such a connection open indefinitely.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use axum::serve::Listener;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::client::StreamsFirst;

/// An accepted connection: its writes fail after the write timeout without progress.
pub type Connection = Pin<Box<TimeoutStream<TcpStream>>>;

/// How many accepted connections may wait for hyper to take them.
const WAITING_CONNECTIONS: usize = 1024;

/// Accepts connections until `stop`; hands hyper those that are not streams.
pub struct ServerListener {
    accepted: mpsc::Receiver<(Connection, SocketAddr)>,
    local: SocketAddr,
    /// The accepting task and the tasks sorting and serving new connections outside hyper.
    tasks: TaskTracker,
}

impl ServerListener {
    /// Accepts on `listener` until `stop`, with `write_timeout` on every connection, serving
    /// new connections' stream requests with `streams` when given.
    pub fn spawn(
        listener: TcpListener,
        write_timeout: Duration,
        streams: Option<StreamsFirst>,
        stop: CancellationToken,
    ) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let (hand_over, accepted) = mpsc::channel(WAITING_CONNECTIONS);
        let tasks = TaskTracker::new();
        let sorting = Sorting {
            write_timeout,
            streams,
            hand_over,
            tasks: tasks.clone(),
        };
        tasks.spawn(sorting.accept(listener, stop));
        Ok(Self {
            accepted,
            local,
            tasks,
        })
    }

    /// The tasks serving streams outside hyper: at shutdown, once accepting has stopped and
    /// the streams were ended, wait for them (`close`, then `wait`) as for hyper's
    /// connections, so that each gets its farewell.
    pub fn stream_tasks(&self) -> TaskTracker {
        self.tasks.clone()
    }
}

/// What the accepting task hands each connection to.
struct Sorting {
    write_timeout: Duration,
    streams: Option<StreamsFirst>,
    hand_over: mpsc::Sender<(Connection, SocketAddr)>,
    tasks: TaskTracker,
}

impl Sorting {
    async fn accept(self, mut listener: TcpListener, stop: CancellationToken) {
        loop {
            let (tcp, peer) = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                accepted = Listener::accept(&mut listener) => accepted,
            };
            // Bodies go out as several buffers (a large document's groups); with Nagle's
            // algorithm a response's last small segment waited for the client's delayed ACK,
            // about 40 ms.
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
            let mut io = TimeoutStream::new(tcp);
            io.set_write_timeout(Some(self.write_timeout));
            let io = Box::pin(io);
            let Some(streams) = self.streams.clone() else {
                if self.hand_over.send((io, peer)).await.is_err() {
                    return;
                }
                continue;
            };
            let hand_over = self.hand_over.clone();
            self.tasks.spawn(async move {
                if let Some(io) = streams.claim(io, peer).await {
                    let _ = hand_over.send((io, peer)).await;
                }
            });
        }
    }
}

impl Listener for ServerListener {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // Accepting stopped: the server is shutting down and accepts nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
