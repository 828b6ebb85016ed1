//! What the frontend API and OFREP share: their state, admitting a caller (token and rate
//! limit), reading a bounded body, and the context of a request.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use axum::response::IntoResponse;

use crate::auth::rate_limit::{LimitGroup, RateLimiter};
use crate::auth::{Authenticator, EvaluationCaller};
use crate::error::ApiError;
use crate::evaluation::frontend::Etag;
use crate::evaluation::Evaluator;
use crate::telemetry::metrics::Metrics;
use crate::usage::UsageRecorder;

/// Largest body of an evaluation request (a context) or a frontend usage report.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// What the frontend and OFREP routes need.
pub struct EvaluationApi {
    pub evaluator: Arc<Evaluator>,
    pub auth: Arc<Authenticator>,
    pub limiter: Arc<RateLimiter>,
    pub usage: Arc<UsageRecorder>,
    pub metrics: Arc<Metrics>,
    /// Whether `X-Forwarded-For` names the client (`--trust-proxy`).
    pub trust_proxy: bool,
    /// Longest a client may take to send a body (`--request-timeout-ms`).
    pub body_timeout: Duration,
}

impl EvaluationApi {
    /// The caller of `req` (see `Authenticator::evaluation`), within its rate limit for
    /// `group` (the client API's: one budget per token, or per IP without one).
    pub fn admit(
        &self,
        req: &Request,
        accept_backend: bool,
        group: LimitGroup,
    ) -> Result<EvaluationCaller, ApiError> {
        let caller = self
            .auth
            .evaluation(crate::auth::request_token(req.headers()), accept_backend)?;
        self.limiter
            .check_caller(group, caller.token_hash.as_deref(), req, self.trust_proxy)
            .map_err(ApiError::TooManyRequests)?;
        Ok(caller)
    }

    /// Refuses requests while the configuration is not loaded.
    pub fn ready(&self) -> Result<(), ApiError> {
        match self.evaluator.snapshot().is_ready() {
            true => Ok(()),
            false => Err(ApiError::Unavailable(
                "The configuration has not been loaded yet".into(),
            )),
        }
    }
}

/// Reads a body of at most `MAX_BODY_BYTES` within `timeout`.
pub async fn read_body(body: Body, timeout: Duration) -> Result<bytes::Bytes, ApiError> {
    let read = tokio::time::timeout(timeout, to_bytes(body, MAX_BODY_BYTES))
        .await
        .map_err(|_| {
            ApiError::RequestTimeout(format!(
                "The body did not arrive within {} ms",
                timeout.as_millis()
            ))
        })?;
    read.map_err(|e| {
        let over_limit = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if over_limit {
            ApiError::PayloadTooLarge(format!("The body is larger than {MAX_BODY_BYTES} bytes"))
        } else {
            ApiError::bad_request("", format!("Could not read the body: {e}"))
        }
    })
}

/// `304 Not Modified` with the ETag, when the request's `If-None-Match` names `etag`: the
/// request's own header value when it is exactly the tag (the usual re-poll: nothing copied),
/// else the tag. `None` when it does not name it.
pub fn not_modified(if_none_match: Option<&HeaderValue>, etag: &Etag) -> Option<Response<Body>> {
    let sent = if_none_match?;
    let echoed = match sent.as_bytes() == etag.as_bytes() {
        true => sent.clone(),
        false if etag.matched_by(sent.as_bytes()) => header_value(etag)?,
        false => return None,
    };
    let mut response = StatusCode::NOT_MODIFIED.into_response();
    response.headers_mut().insert(header::ETAG, echoed);
    Some(response)
}

/// A JSON 200 with the ETag, not to be cached without revalidation.
pub fn json_with_etag(body: Vec<u8>, etag: &Etag) -> Response<Body> {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(value) = header_value(etag) {
        headers.insert(header::ETAG, value);
    }
    response
}

/// The ETag as a header value (base64 and quotes: always a valid one).
fn header_value(etag: &Etag) -> Option<HeaderValue> {
    HeaderValue::from_bytes(etag.as_bytes()).ok()
}

/// The request's `If-None-Match` header, if it has one (the value shares the request's
/// buffer: no copy).
pub fn if_none_match(headers: &HeaderMap) -> Option<HeaderValue> {
    headers.get(header::IF_NONE_MATCH).cloned()
}

/// A context value: a string, number or boolean (documentation only: `evaluation::context`
/// reads it; an object or a list is a 400).
#[derive(utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum ContextValue {
    Text(String),
    Number(f64),
    Flag(bool),
}

/// An Unleash context (documentation only: `evaluation::context` reads it). Any other field
/// is a property; a well-known field sent as a property is lifted out. At most 16 KiB.
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(crate) struct ContextFields {
    user_id: Option<ContextValue>,
    session_id: Option<ContextValue>,
    /// The caller's address when absent.
    remote_address: Option<ContextValue>,
    environment: Option<ContextValue>,
    app_name: Option<ContextValue>,
    current_time: Option<ContextValue>,
    /// OFREP's targeting key: the `userId` when that is absent (elsewhere a property).
    targeting_key: Option<ContextValue>,
    properties: Option<std::collections::BTreeMap<String, ContextValue>>,
}
