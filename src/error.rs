//! `ApiError`: the one error type of the HTTP edge, its status mapping and its JSON body
//! `{"message": …, "details": [{"message": …, "path": …}]}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use crate::domain::{DomainError, FieldError};
use crate::service::ServiceError;
use crate::store::StoreError;

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the input is malformed or breaks a rule.
    #[error("{message}")]
    BadRequest {
        message: String,
        details: Vec<FieldError>,
    },
    /// 401: the caller did not identify itself (as the challenge asks).
    #[error("{}", .0.message())]
    Unauthorized(Challenge),
    /// 403: not allowed (spec §7: also a toggle name already in use).
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such resource or route.
    #[error("{0}")]
    NotFound(String),
    /// 405: the route exists, the method does not.
    #[error("method not allowed on this path")]
    MethodNotAllowed,
    /// 409: the resource already exists or is in a conflicting state.
    #[error("{0}")]
    Conflict(String),
    /// 408: the client did not send its request in time.
    #[error("{0}")]
    RequestTimeout(String),
    /// 413: the body is larger than allowed.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 431: the request head is larger than allowed.
    #[error("{0}")]
    HeadersTooLarge(String),
    /// 415: the body is not JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 500 with a message: spec §7's status for removing a tag while the store is unreachable.
    #[error("{0}")]
    StoreUnreachable(String),
    /// 500: a fault of ours; the cause is logged, never returned.
    #[error("internal error")]
    Internal(String),
    /// 429: the caller's rate limit is used up; retry after the duration.
    #[error("Too many requests; retry in {} s", retry_seconds(*.0))]
    TooManyRequests(std::time::Duration),
    /// 504: the request took too long; what it does may still complete (not to be retried
    /// blindly).
    #[error("{0}")]
    TimedOut(String),
    /// 503: the store is unreachable or the replica is not ready; retry later.
    #[error("{0}")]
    Unavailable(String),
    /// 503 from the readiness probe, one detail per failing check (no `Retry-After`: probes
    /// retry on their own schedule).
    #[error("{message}")]
    NotReady {
        message: String,
        details: Vec<FieldError>,
    },
    /// 421: a write forwarded to a replica that is not the one it was meant for.
    #[error("{0}")]
    Misdirected(String),
    /// 501: a capability this installation has turned off (SDKs fall back to polling).
    #[error("{0}")]
    NotImplemented(String),
}

/// How a 401 asks the caller to identify itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// HTTP basic auth or a session (`--auth insecure`).
    Basic,
    /// An API token (`--auth token`, and the client API with `--client-auth token`).
    Token,
    /// The token was valid once: it expired.
    Expired,
}

impl Challenge {
    fn message(self) -> &'static str {
        match self {
            Challenge::Basic => {
                "You have to identify yourself in order to use Flagpole: send HTTP basic auth, or log in"
            }
            Challenge::Token => {
                "You need to provide a valid API token in the Authorization header"
            }
            Challenge::Expired => "The API token has expired",
        }
    }
}

/// The JSON body of every error response.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub(crate) struct ErrorBody<'a> {
    /// On 401, the reference's `type` (`unsecure`, `token`) and login `path`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    /// On 401 in the insecure mode: where to log in.
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'static str>,
    /// What went wrong, for people.
    message: &'a str,
    /// Each problem found, with the path of the field it concerns (empty for the whole body).
    details: Vec<FieldError>,
}

impl ApiError {
    /// A 400 with a single problem.
    pub fn bad_request(path: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::BadRequest {
            details: vec![FieldError {
                message: message.clone(),
                path: path.to_string(),
            }],
            message,
        }
    }

    /// The status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal(_) | Self::StoreUnreachable(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable(_) | Self::NotReady { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Misdirected(_) => StatusCode::MISDIRECTED_REQUEST,
            Self::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = self.to_string();
        let details = match &self {
            Self::BadRequest { details, .. } | Self::NotReady { details, .. } => details.clone(),
            _ => vec![FieldError {
                message: message.clone(),
                path: String::new(),
            }],
        };
        if let Self::Internal(cause) = &self {
            tracing::error!(%cause, "request failed");
        }
        let (kind, path) = match &self {
            Self::Unauthorized(Challenge::Basic) => (Some("unsecure"), Some("/api/admin/login")),
            Self::Unauthorized(_) => (Some("token"), None),
            _ => (None, None),
        };
        let mut response = (
            status,
            Json(ErrorBody {
                kind,
                path,
                message: &message,
                details,
            }),
        )
            .into_response();
        match self {
            Self::Unauthorized(challenge) => {
                let scheme = match challenge {
                    Challenge::Basic => "Basic realm=\"flagpole\"",
                    Challenge::Token | Challenge::Expired => "Bearer realm=\"flagpole\"",
                };
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(scheme));
            }
            Self::Unavailable(_) => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Self::TooManyRequests(wait) => {
                if let Ok(value) = HeaderValue::from_str(&retry_seconds(wait).to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
            }
            Self::PayloadTooLarge(_) | Self::RequestTimeout(_) => {
                // The rest of the body is never read, so the connection cannot carry another
                // request: say so, or a client reusing it sees it cut off.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::Invalid(errors) => Self::BadRequest {
                message: errors
                    .0
                    .first()
                    .map_or_else(|| "invalid input".to_string(), |d| d.message.clone()),
                details: errors.0,
            },
            DomainError::ToggleNameTaken(m) | DomainError::Forbidden(m) => Self::Forbidden(m),
            DomainError::AlreadyExists(m) | DomainError::InUse(m) => Self::Conflict(m),
            DomainError::NotFound(m) => Self::NotFound(m),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        // The cause is logged here; clients get a message without store internals.
        tracing::warn!(error = %e, "store operation failed");
        match e {
            StoreError::Unavailable(_) => Self::Unavailable(
                "The store is unreachable; nothing was changed. Try again shortly.".into(),
            ),
            StoreError::Uncertain(_) => Self::Unavailable(
                "The store did not confirm the write in time; it may still have been applied. \
                 Check the current state before retrying."
                    .into(),
            ),
            StoreError::Corrupt(cause) => Self::Internal(cause),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Domain(e) => e.into(),
            ServiceError::Store(e) => e.into(),
            ServiceError::Contention => Self::Unavailable(e.to_string()),
            ServiceError::Internal(cause) => Self::Internal(cause),
            ServiceError::NotReady => Self::Unavailable(
                "The configuration has not been loaded from the store yet; try again shortly"
                    .into(),
            ),
        }
    }
}

/// Whole seconds to wait, rounded up (`Retry-After` has no fractions).
fn retry_seconds(wait: std::time::Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// The result type of handlers.
pub type ApiResult<T> = Result<T, ApiError>;
