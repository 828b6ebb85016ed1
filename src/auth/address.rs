//! The caller's address, as rate limits and the evaluation context read it.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};

/// The client's IP: the connection's peer, or the last `X-Forwarded-For` entry (the one the
/// trusted proxy in front added) with `--trust-proxy`.
pub fn client_addr(req: &Request, trust_proxy: bool) -> Option<IpAddr> {
    if trust_proxy {
        let forwarded = req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            // The entry the trusted proxy appended: the ones before it are the client's word.
            .and_then(|v| v.split(',').next_back())
            .and_then(|v| v.trim().parse::<IpAddr>().ok());
        if forwarded.is_some() {
            return forwarded;
        }
    }
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip())
}

/// `client_addr` as text.
pub fn client_ip(req: &Request, trust_proxy: bool) -> Option<String> {
    client_addr(req, trust_proxy).map(|ip| ip.to_string())
}
