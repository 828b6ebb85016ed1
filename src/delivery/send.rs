//! Sending a delivery's requests, and what a failure means: retryable (network errors,
//! timeouts, 408, 429, 5xx) or final (any other answer).

use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use super::backoff::retry_after;
use super::request::DeliveryRequest;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub error: String,
    /// The receiver's HTTP status, if it answered.
    pub status: Option<u16>,
    /// Whether another attempt may succeed.
    pub retryable: bool,
    /// How long the receiver asked us to wait (`Retry-After`).
    pub retry_after: Option<Duration>,
}

/// The HTTP client deliveries use: no redirects (a webhook that moved is a configuration
/// error, and following one would resend the body elsewhere), a timeout per request.
pub fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("flagpole/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Sends `requests` in order until one fails or `deadline` passes, each within `timeout`;
/// each one made is counted with `attempted`. Returns how many were accepted (2xx) and the
/// failure that stopped it.
pub async fn send_all(
    client: &reqwest::Client,
    requests: &[DeliveryRequest],
    (timeout, deadline): (Duration, Instant),
    attempted: impl Fn(),
) -> (usize, Option<Failure>) {
    for (i, request) in requests.iter().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (i, Some(timed_out()));
        }
        attempted();
        // A request's own timeout replaces the client's: give it the shorter of the two.
        let mut builder = client
            .post(&request.url)
            .timeout(left.min(timeout))
            .body(request.body.clone());
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        match builder.send().await {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => return (i, Some(refused(&response))),
            Err(e) => return (i, Some(unreachable(&e))),
        }
    }
    (requests.len(), None)
}

fn timed_out() -> Failure {
    Failure {
        error: "the attempt ran out of time".into(),
        status: None,
        retryable: true,
        retry_after: None,
    }
}

/// A non-2xx answer.
fn refused(response: &reqwest::Response) -> Failure {
    let status = response.status();
    let code = status.as_u16();
    let retryable = code == 408 || code == 429 || status.is_server_error();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry_after(v, Utc::now()));
    Failure {
        error: format!("the receiver answered {status}"),
        status: Some(code),
        retryable,
        retry_after,
    }
}

/// No answer: connection refused or reset, DNS, TLS, timeout. The error's text may carry the
/// URL (with a token in it): only its kind is kept.
fn unreachable(e: &reqwest::Error) -> Failure {
    let error = if e.is_timeout() {
        "the receiver timed out"
    } else if e.is_connect() {
        "could not connect to the receiver"
    } else if e.is_builder() {
        "the request is invalid (URL or header)"
    } else {
        "the connection to the receiver failed"
    };
    Failure {
        error: error.into(),
        status: None,
        retryable: !e.is_builder(),
        retry_after: None,
    }
}
