//! Our extractors: JSON bodies, path segments, query strings (list filters, limits, flags)
//! and the admin caller, each failing with `ApiError` (400/401/415 with a JSON body) instead
//! of axum's defaults.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{header, request::Parts, HeaderMap};
use axum::middleware::Next;
use axum::response::Response;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::auth::rate_limit::LimitGroup;
use crate::domain::filter::{FeatureFilter, FilterParams};
use crate::error::{ApiError, Challenge};
use crate::service::Actor;
use crate::state::AppState;
use crate::usage::hourly::{DEFAULT_HOURS, MAX_HOURS};
use crate::usage::views::DEFAULT_STALE_AFTER_SECONDS;

/// A JSON request body. Lenient about Content-Type (any JSON type, with or without
/// parameters, or none at all); strict about the document.
pub struct AppJson<T>(pub T);

/// Whether the request declares a non-JSON body (no Content-Type counts as JSON).
pub(crate) fn declares_other_media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?;
    let essence = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = essence == "application/json" || essence.ends_with("+json") || essence.is_empty();
    (!json).then_some(essence)
}

/// Parses a JSON document, naming the path of a type mismatch.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("", "A JSON body is required"));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        let inner = e.into_inner();
        let message = if inner.is_syntax() || inner.is_eof() {
            format!("The body is not valid JSON: {inner}")
        } else {
            format!(
                "Invalid value{}: {inner}",
                if path.is_empty() {
                    String::new()
                } else {
                    format!(" at \"{path}\"")
                }
            )
        };
        ApiError::bad_request(&path, message)
    })?;
    deserializer
        .end()
        .map_err(|e| ApiError::bad_request("", format!("The body is not valid JSON: {e}")))?;
    Ok(value)
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for AppJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let declared = declares_other_media_type(req.headers());
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge("The body is larger than allowed".into())
            } else {
                ApiError::bad_request("", format!("Could not read the body: {e}"))
            }
        })?;
        match (parse_json(&bytes), declared) {
            (Ok(value), _) => Ok(AppJson(value)),
            // A JSON document sent with another Content-Type (curl -d does that) is accepted;
            // anything else under a foreign Content-Type is a 415.
            (Err(_), Some(essence)) => Err(ApiError::UnsupportedMediaType(format!(
                "Expected a JSON body (Content-Type: application/json), got \"{essence}\""
            ))),
            (Err(e), None) => Err(e),
        }
    }
}

/// The name a `POST …/validate` route checks: `field` of the JSON body. Such a route shares the
/// `{name}` route of its resource (so that a record called `validate` stays addressable), so
/// a POST to any other segment is a 405.
pub fn validate_route_name(
    segment: &str,
    body: &serde_json::Map<String, serde_json::Value>,
    field: &str,
) -> Result<String, ApiError> {
    if segment != "validate" {
        return Err(ApiError::MethodNotAllowed);
    }
    match body.get(field) {
        Some(serde_json::Value::String(name)) => Ok(name.clone()),
        Some(_) => Err(ApiError::bad_request(
            field,
            format!("\"{field}\" must be a string"),
        )),
        None => Err(ApiError::bad_request(
            field,
            format!("\"{field}\" is required"),
        )),
    }
}

/// A path parameter; an undecodable segment is a 400 with our JSON body.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct AppPath<T>(pub T);

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request("", format!("Invalid path: {}", rejection.body_text()))
    }
}

/// The toggle a path names (`{name}`), active or not.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ToggleNamePath {
    /// The toggle's name
    pub name: String,
}

/// A query string read into `T` (repeated keys fill a `Vec`); a malformed one is a 400 with
/// our JSON body.
pub struct AppQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for AppQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query()).map(AppQuery)
    }
}

/// Reads a query string (none counts as empty) into `T`; a malformed one is a 400.
pub fn parse_query<T: DeserializeOwned>(query: Option<&str>) -> Result<T, ApiError> {
    serde_html_form::from_str(query.unwrap_or(""))
        .map_err(|e| ApiError::bad_request("", format!("Invalid query string: {e}")))
}

/// The toggle filter of a listing's query (`tag[]`, `project`, `namePrefix`), validated.
pub struct ToggleFilter(pub FeatureFilter);

impl<S: Send + Sync> FromRequestParts<S> for ToggleFilter {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let params: FilterParams = parse_query(parts.uri.query())?;
        Ok(ToggleFilter(params.filter()?))
    }
}

/// Items per listing unless `limit` says otherwise.
const DEFAULT_LIMIT: u64 = 100;
/// The largest `limit` accepted.
const MAX_LIMIT: u64 = 1000;

/// `?limit=`: how many items a listing shows, 1 to 1,000 (100 when absent). Each route
/// documents the parameter itself, saying what it counts.
pub struct ListLimit(pub usize);

#[derive(Deserialize)]
struct LimitQuery {
    limit: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for ListLimit {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query: LimitQuery = parse_query(parts.uri.query())?;
        let limit = bounded_whole_number("limit", query.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
        Ok(ListLimit(usize::try_from(limit).unwrap_or(usize::MAX)))
    }
}

/// The longest `staleAfterSeconds` accepted: the registry's two days.
const MAX_STALE_AFTER_SECONDS: u64 = 172_800;

/// `?staleAfterSeconds=`: instances not polled for this long are not seen recently, 1 to
/// 172,800 (the default when absent: [`DEFAULT_STALE_AFTER_SECONDS`]).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StaleAfterQuery {
    /// Instances not polled for this long are not seen recently (default 120)
    #[serde(rename = "staleAfterSeconds")]
    #[param(value_type = Option<u32>, minimum = 1, maximum = 172800)]
    stale_after_seconds: Option<String>,
}

/// The `staleAfterSeconds` of a query ([`StaleAfterQuery`]), checked.
pub struct StaleAfterSeconds(pub u64);

impl<S: Send + Sync> FromRequestParts<S> for StaleAfterSeconds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query: StaleAfterQuery = parse_query(parts.uri.query())?;
        bounded_whole_number(
            "staleAfterSeconds",
            query.stale_after_seconds,
            DEFAULT_STALE_AFTER_SECONDS,
            MAX_STALE_AFTER_SECONDS,
        )
        .map(StaleAfterSeconds)
    }
}

/// `?hoursBack=`: how many hours (the current one included) an hourly view covers, 1 to 48
/// (24 when absent). Unleash falls back to 24 for a value out of range; we answer 400.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HoursBackQuery {
    /// Hours covered, the current one included (default 24)
    #[serde(rename = "hoursBack")]
    #[param(value_type = Option<u32>, minimum = 1, maximum = 48)]
    hours_back: Option<String>,
}

/// The `hoursBack` of a query ([`HoursBackQuery`]), checked.
pub struct HoursBack(pub u64);

impl<S: Send + Sync> FromRequestParts<S> for HoursBack {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query: HoursBackQuery = parse_query(parts.uri.query())?;
        bounded_whole_number("hoursBack", query.hours_back, DEFAULT_HOURS, MAX_HOURS).map(HoursBack)
    }
}

/// The query parameter `name` as a whole number from 1 to `max`, `default` when absent.
fn bounded_whole_number(
    name: &str,
    raw: Option<String>,
    default: u64,
    max: u64,
) -> Result<u64, ApiError> {
    match raw {
        None => Ok(default),
        Some(raw) => match raw.parse::<u64>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::bad_request(
                name,
                format!("\"{name}\" must be a whole number from 1 to {max}"),
            )),
        },
    }
}

/// A query's parameters as sent, in order (booleans per API-FACTS §7.1: an empty value is
/// kept, not taken for an absent one).
pub struct QueryFlags(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryFlags {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query()).map(QueryFlags)
    }
}

impl QueryFlags {
    /// The last value of `name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The boolean `name`, `default` when absent.
    pub fn flag(&self, name: &str, default: bool) -> bool {
        flag(self.get(name), default)
    }
}

/// API-FACTS §7.1: absent → `default`; an integer → non-zero; otherwise `true` in any case.
/// A bare `?drop` is therefore false.
fn flag(value: Option<&str>, default: bool) -> bool {
    match value {
        None => default,
        Some(v) => match v.trim().parse::<i64>() {
            Ok(n) => n != 0,
            Err(_) => v.eq_ignore_ascii_case("true"),
        },
    }
}

/// Middleware on the admin routes: identifies the caller (see `auth::Authenticator`), keeps
/// it within its admin rate limit (by the token it was identified by, else by its address),
/// and stores the resulting [`Actor`] in the request; or answers 401/403/429.
pub async fn authenticate_admin(
    axum::extract::State(state): axum::extract::State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    // A write another replica forwarded was counted against the limit where it arrived; one
    // meant for another replica (an address reused, a stale lease) is refused untouched, and
    // its sender commits it itself.
    let forwarded = match &state.forwarding {
        Some(forwarding) => forwarding.check_forwarded(req.headers())?,
        None => false,
    };
    let (actor, token_hash) = state.auth.admin(req.headers())?;
    if state.limiter.limits(LimitGroup::Admin) && !forwarded {
        state
            .limiter
            .check_admin(token_hash.as_deref(), &req, state.trust_proxy)
            .map_err(ApiError::TooManyRequests)?;
    }
    req.extensions_mut().insert(actor);
    Ok(next.run(req).await)
}

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Actor>()
            .cloned()
            .ok_or(ApiError::Unauthorized(Challenge::Basic))
    }
}

/// The client's IP (lives with the other facts of who is calling).
pub use crate::auth::{client_addr, client_ip};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_integers_and_true_in_any_case() {
        assert!(flag(None, true));
        assert!(!flag(Some(""), true));
        assert!(flag(Some(" 2 "), false));
        assert!(!flag(Some("0"), true));
        assert!(flag(Some("TRUE"), false));
        assert!(!flag(Some("yes"), false));
    }

    #[test]
    fn bounded_numbers_default_and_refuse_outside_the_range() {
        assert_eq!(
            bounded_whole_number("limit", None, 100, 1000).ok(),
            Some(100)
        );
        assert_eq!(
            bounded_whole_number("limit", Some("1000".into()), 100, 1000).ok(),
            Some(1000)
        );
        for raw in ["0", "1001", "-1", "1.5", ""] {
            assert!(
                bounded_whole_number("limit", Some(raw.into()), 100, 1000).is_err(),
                "{raw:?} accepted"
            );
        }
    }
}
