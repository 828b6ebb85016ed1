//! Protections of the HTTP edge: security headers on every response but the client API's, a
//! time limit on admin requests, and CORS for the origins the settings name.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::ApiError;

/// Headers every admin response carries: no sniffing, no framing, no referrer, no caching of
/// private data, and no active content.
const SECURITY_HEADERS: [(HeaderName, &str); 5] = [
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::CACHE_CONTROL, "no-store"),
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; frame-ancestors 'none'",
    ),
];

/// Adds [`SECURITY_HEADERS`] to a response (keeping any the handler set).
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    response
}

/// Answers 504 when an admin request takes longer than the limit (its work may go on: a
/// write still commits or not as a whole, so the answer asks for a check, not a retry).
pub async fn time_limit(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::TimedOut(format!(
            "The request took longer than {} ms; it may still complete. Check before retrying.",
            limit.as_millis()
        ))
        .into_response(),
    }
}

/// CORS for `origins`, or `None` when there are none.
pub fn cors(origins: &[HeaderValue]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.iter().cloned()))
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::DELETE,
                Method::OPTIONS,
            ])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::IF_NONE_MATCH,
                HeaderName::from_static("unleash-appname"),
                HeaderName::from_static("unleash-instanceid"),
                HeaderName::from_static("unleash-connection-id"),
                HeaderName::from_static("unleash-sdk"),
            ])
            .expose_headers([header::ETAG, header::RETRY_AFTER])
            .allow_credentials(true)
            .max_age(Duration::from_secs(600)),
    )
}
