//! `POST /api/client/register` and `POST /api/client/metrics` (API-FACTS §1): validated, added
//! to the replica's usage aggregate, answered 202. Nothing touches the store per request.

use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};

use super::ClientApi;
use crate::auth::rate_limit::LimitGroup;
use crate::domain::usage::{ClientHeaders, MetricsReport, Registration};
use crate::domain::DomainError;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::declares_other_media_type;

/// Largest accepted body of a registration or metrics report (a report of 10,000 toggles with
/// variants fits).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The app name and instance id the SDK headers (`UNLEASH-*`, or the spec's `SERVICE-*`)
/// give: of each, the first value of the `UNLEASH-` header when one is sent, else of the
/// `SERVICE-` one; `None` when that value is not visible ASCII or is blank.
pub fn client_identity(headers: &HeaderMap) -> (Option<&str>, Option<&str>) {
    // One pass over the headers rather than four lookups that each hash a name: every poll
    // reads these.
    let [mut app, mut service_app, mut instance, mut service_instance] = [None; 4];
    for (name, value) in headers {
        let slot = match name.as_str() {
            "unleash-appname" => &mut app,
            "service-appname" => &mut service_app,
            "unleash-instanceid" => &mut instance,
            "service-instanceid" => &mut service_instance,
            _ => continue,
        };
        slot.get_or_insert(value);
    }
    (
        readable(app.or(service_app)),
        readable(instance.or(service_instance)),
    )
}

/// A header's value as text: `None` when it is not visible ASCII or is blank.
fn readable(value: Option<&HeaderValue>) -> Option<&str> {
    value
        .and_then(|v| v.to_str().ok())
        // Visible ASCII, spaces and tabs: `trim` would look for Unicode spaces too.
        .map(str::trim_ascii)
        .filter(|v| !v.is_empty())
}

/// Reads a bounded body (within the body time limit: a client trickling one in cannot hold a
/// connection and its memory for ever) and the request's identity headers and client IP.
async fn read(
    req: Request,
    api: &ClientApi,
) -> ApiResult<(bytes::Bytes, ClientHeaders, Option<String>, Option<String>)> {
    let ip = crate::http::extract::client_ip(&req, api.trust_proxy);
    let declared = declares_other_media_type(req.headers());
    let (app, instance) = client_identity(req.headers());
    let headers = ClientHeaders {
        app_name: app.map(str::to_string),
        instance_id: instance.map(str::to_string),
    };
    let body = tokio::time::timeout(api.body_timeout, to_bytes(req.into_body(), MAX_BODY_BYTES))
        .await
        .map_err(|_| {
            ApiError::RequestTimeout(format!(
                "The body did not arrive within {} ms",
                api.body_timeout.as_millis()
            ))
        })?;
    let bytes = body.map_err(|e| {
        // Only a body over the limit is a 413; one that broke off is the client's 400.
        let over_limit = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if over_limit {
            ApiError::PayloadTooLarge(format!(
                "The body is larger than {MAX_BODY_BYTES} bytes; send fewer toggles per report"
            ))
        } else {
            ApiError::bad_request("", format!("Could not read the body: {e}"))
        }
    })?;
    Ok((bytes, headers, ip, declared))
}

/// A parse failure as the client sees it: 415 for a body that is not JSON under a non-JSON
/// Content-Type, else the validation error.
fn rejection(e: DomainError, declared: Option<String>, bytes: &[u8]) -> ApiError {
    match declared {
        Some(essence) if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() => {
            ApiError::UnsupportedMediaType(format!(
                "Expected a JSON body (Content-Type: application/json), got \"{essence}\""
            ))
        }
        _ => e.into(),
    }
}

/// `POST /api/client/register` as SDKs send it (documentation only: the body is read by
/// `domain::usage::Registration::parse`).
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(crate) struct ClientRegistration {
    /// The application (or the `UNLEASH-APPNAME` header): not blank, no control characters.
    #[schema(
        required = true,
        nullable = false,
        max_length = 255,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$",
        example = "checkout-service"
    )]
    app_name: Option<String>,
    /// The instance (or the `UNLEASH-INSTANCEID` header): not blank, no control characters.
    #[schema(
        required = true,
        nullable = false,
        max_length = 255,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$",
        example = "checkout-1"
    )]
    instance_id: Option<String>,
    #[schema(max_length = 255, pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$")]
    sdk_version: Option<String>,
    /// The strategies the SDK implements.
    #[schema(value_type = Option<Vec<ReportName>>, max_items = 100)]
    strategies: Option<Vec<String>>,
    /// When the instance started.
    started: Option<ClientTimestamp>,
    /// The SDK's polling interval in milliseconds.
    #[schema(maximum = 1_000_000_000_000_u64)]
    interval: Option<u64>,
}

/// A time as SDKs send it: RFC 3339, or milliseconds since the epoch.
#[derive(utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum ClientTimestamp {
    #[schema(format = DateTime)]
    Text(String),
    EpochMillis(EpochMillis),
}

/// Milliseconds since the epoch, within chrono's range of years (±262,000).
#[derive(utoipa::ToSchema)]
#[schema(value_type = i64, minimum = -8_000_000_000_000_000_i64, maximum = 8_000_000_000_000_000_i64)]
#[allow(dead_code)]
pub(crate) struct EpochMillis(i64);

/// An application, instance, toggle, variant or strategy name in a report (documentation
/// only): not blank, no control characters, at most 255 characters.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, max_length = 255, pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$")]
#[allow(dead_code)]
pub(crate) struct ReportName(String);

/// `POST /api/client/metrics` as SDKs send it (documentation only: the body is read by
/// `domain::usage::MetricsReport::parse`).
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(crate) struct ClientMetrics {
    /// The application (or the `UNLEASH-APPNAME` header): not blank, no control characters.
    #[schema(
        required = true,
        nullable = false,
        max_length = 255,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$",
        example = "checkout-service"
    )]
    app_name: Option<String>,
    /// The instance (or the `UNLEASH-INSTANCEID` header): not blank, no control characters.
    #[schema(
        required = true,
        nullable = false,
        max_length = 255,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$",
        example = "checkout-1"
    )]
    instance_id: Option<String>,
    bucket: ClientMetricsBucket,
}

/// The counted interval of a metrics report.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct ClientMetricsBucket {
    /// Start of the interval.
    start: ClientTimestamp,
    /// End of the interval.
    stop: ClientTimestamp,
    /// Evaluations per toggle name (at most 10,000 toggles).
    toggles: std::collections::BTreeMap<String, ClientToggleCounts>,
}

/// One toggle's evaluations in a report.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct ClientToggleCounts {
    #[schema(maximum = 1_000_000_000_000_u64)]
    yes: Option<u64>,
    #[schema(maximum = 1_000_000_000_000_u64)]
    no: Option<u64>,
    /// The same evaluations broken down by variant name (at most 100 variants).
    #[schema(value_type = Option<std::collections::BTreeMap<String, Count>>)]
    variants: Option<std::collections::BTreeMap<String, u64>>,
}

/// An evaluation count (documentation only).
#[derive(utoipa::ToSchema)]
#[schema(value_type = u64, maximum = 1_000_000_000_000_u64)]
#[allow(dead_code)]
pub(crate) struct Count(u64);

/// `POST /api/client/register`.
#[utoipa::path(
    post,
    path = "/api/client/register",
    tag = "client",
    request_body = ClientRegistration,
    responses((status = 202, description = "Registered"))
)]
pub async fn register_client(
    State(api): State<Arc<ClientApi>>,
    req: Request<Body>,
) -> ApiResult<StatusCode> {
    api.admit(&req, LimitGroup::ClientUsage)?;
    let (bytes, headers, ip, declared) = read(req, &api).await?;
    match Registration::parse(&bytes, &headers) {
        Ok(registration) => {
            api.metrics.usage.report("register", true);
            api.usage.record_registration(registration, ip.as_deref());
            Ok(StatusCode::ACCEPTED)
        }
        Err(e) => {
            api.metrics.usage.report("register", false);
            Err(rejection(e, declared, &bytes))
        }
    }
}

/// `POST /api/client/metrics`.
#[utoipa::path(
    post,
    path = "/api/client/metrics",
    tag = "client",
    request_body = ClientMetrics,
    responses((status = 202, description = "Counted"))
)]
pub async fn record_client_metrics(
    State(api): State<Arc<ClientApi>>,
    req: Request<Body>,
) -> ApiResult<StatusCode> {
    api.admit(&req, LimitGroup::ClientUsage)?;
    let (bytes, headers, ip, declared) = read(req, &api).await?;
    match MetricsReport::parse(&bytes, &headers) {
        Ok(report) => {
            api.metrics.usage.report("metrics", true);
            api.usage.record_metrics(report, ip.as_deref());
            Ok(StatusCode::ACCEPTED)
        }
        Err(e) => {
            api.metrics.usage.report("metrics", false);
            Err(rejection(e, declared, &bytes))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static [u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                *name,
                HeaderValue::from_bytes(value).expect("a header value"),
            );
        }
        map
    }

    #[test]
    fn the_identity_is_the_unleash_headers_else_the_service_ones() {
        let sent = headers(&[
            ("service-appname", b"service-app"),
            ("unleash-appname", b" unleash-app "),
            ("unleash-appname", b"second"),
            ("service-instanceid", b"i-1"),
        ]);
        assert_eq!(client_identity(&sent), (Some("unleash-app"), Some("i-1")));
        assert_eq!(client_identity(&HeaderMap::new()), (None, None));
        // An unreadable or blank `UNLEASH-` value is not replaced by the `SERVICE-` one.
        let unreadable = headers(&[
            ("unleash-appname", b"caf\xe9"),
            ("service-appname", b"app"),
            ("unleash-instanceid", b"  "),
            ("service-instanceid", b"i-1"),
        ]);
        assert_eq!(client_identity(&unreadable), (None, None));
    }
}
