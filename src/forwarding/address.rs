//! The URL other replicas reach this one at, derived from what the replica already knows
//! (no setting): the address it listens on or, when it listens on every interface, the
//! address it reaches the store from, which is on the network the replicas share.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The URL of a replica listening on `listening` whose store is the Redis at `redis_url` (the
/// first of its URLs); `None` when no address can be found (the replica then never commits
/// for others, and forwards its own writes all the same).
pub async fn advertised_url(listening: SocketAddr, redis_url: &str) -> Option<String> {
    let ip = if listening.ip().is_unspecified() {
        route_to_store(redis_url).await?
    } else {
        listening.ip()
    };
    Some(format!("http://{}", SocketAddr::new(ip, listening.port())))
}

/// The local address of the route to the store's host: a UDP socket "connected" to it sends
/// nothing, but the kernel picks the source address. A store on a unix socket is on this host.
async fn route_to_store(redis_url: &str) -> Option<IpAddr> {
    let url = url::Url::parse(redis_url.trim()).ok()?;
    if url.scheme().contains("unix") {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = url.port().unwrap_or(6379);
    let store = tokio::net::lookup_host((host, port)).await.ok()?.next()?;
    let any: SocketAddr = match store {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = tokio::net::UdpSocket::bind(any).await.ok()?;
    socket.connect(store).await.ok()?;
    Some(socket.local_addr().ok()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_specific_listening_address_is_advertised_as_is() {
        let listening: SocketAddr = "127.0.0.1:4242".parse().unwrap();
        assert_eq!(
            advertised_url(listening, "redis://10.1.2.3:6379")
                .await
                .as_deref(),
            Some("http://127.0.0.1:4242")
        );
        let listening: SocketAddr = "[::1]:4242".parse().unwrap();
        assert_eq!(
            advertised_url(listening, "redis://x").await.as_deref(),
            Some("http://[::1]:4242")
        );
    }

    #[tokio::test]
    async fn every_interface_is_advertised_by_the_route_to_the_store() {
        let listening: SocketAddr = "0.0.0.0:4242".parse().unwrap();
        assert_eq!(
            advertised_url(listening, "redis://127.0.0.1:6379/0")
                .await
                .as_deref(),
            Some("http://127.0.0.1:4242")
        );
        assert_eq!(
            advertised_url(listening, "unix:///run/redis.sock")
                .await
                .as_deref(),
            Some("http://127.0.0.1:4242")
        );
        assert_eq!(advertised_url(listening, "not a url").await, None);
    }
}
