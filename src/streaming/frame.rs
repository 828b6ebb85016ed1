//! Server-sent event frames as they go on the wire, encoded once and shared by every stream
//! that receives them (`Bytes` clones are reference counts).

use bytes::Bytes;

/// The first event of a stream: a hydration, or the events missed since `Last-Event-ID`.
pub const CONNECTED: &str = "unleash-connected";
/// Every later event.
pub const UPDATED: &str = "unleash-updated";

/// An SSE event: `event:`, `id:` and one `data:` line (compact JSON holds no raw newline).
pub fn event(name: &str, id: u64, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + name.len() + 32);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\nid: ");
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// A comment line that keeps the connection and the SDKs' read timeouts alive.
pub fn heartbeat() -> Bytes {
    Bytes::from_static(b":keep-alive\n\n")
}

/// The last frame of a stream this replica ends (lifetime reached, shutdown, slow reader): a
/// comment saying why and the delay after which SSE clients reconnect (`retry:`), which a
/// load balancer sends to any replica.
pub fn farewell(reason: &str, retry_ms: u64) -> Bytes {
    Bytes::from(format!(": {reason}; reconnect\nretry: {retry_ms}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_sse_events() {
        assert_eq!(
            &event(UPDATED, 42, br#"{"events":[]}"#)[..],
            b"event: unleash-updated\nid: 42\ndata: {\"events\":[]}\n\n"
        );
        assert_eq!(
            &farewell("shutting down", 500)[..],
            b": shutting down; reconnect\nretry: 500\n\n"
        );
    }
}
