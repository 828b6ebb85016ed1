//! `WriteTimeoutListener`: the TCP listener the server accepts on. A connection whose write
//! waits longer than the write timeout fails and is closed, so a client that stops reading (a
//! stalled stream, a stuck download) does not hold its connection, its memory and its place
//! under the stream cap for ever: the kernel would keep such a connection open indefinitely.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use axum::serve::Listener;
use tokio::net::{TcpListener, TcpStream};
use tokio_io_timeout::TimeoutStream;

/// Accepts TCP connections with a write timeout.
pub struct WriteTimeoutListener {
    listener: TcpListener,
    write_timeout: Duration,
}

impl WriteTimeoutListener {
    /// `listener`'s connections, each failing once a write waits longer than `write_timeout`.
    pub fn new(listener: TcpListener, write_timeout: Duration) -> Self {
        Self {
            listener,
            write_timeout,
        }
    }
}

impl Listener for WriteTimeoutListener {
    type Io = Pin<Box<TimeoutStream<TcpStream>>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (tcp, address) = Listener::accept(&mut self.listener).await;
        let mut io = TimeoutStream::new(tcp);
        io.set_write_timeout(Some(self.write_timeout));
        (Box::pin(io), address)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// Sets `TCP_NODELAY` on an accepted connection. Bodies go out as several buffers (a large
/// document's groups); with Nagle's algorithm a response's last small segment waited for the
/// client's delayed ACK, about 40 ms.
pub fn no_delay(io: &mut Pin<Box<TimeoutStream<TcpStream>>>) {
    if let Err(e) = io.get_ref().set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
}
