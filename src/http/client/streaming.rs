//! `GET /api/client/streaming` (server-sent events) and `GET /api/client/delta` (the same
//! events, polled): thin handlers over `streaming`. Both show the caller's environment and
//! projects, narrowed by the polling API's filters.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use axum::response::IntoResponse;

use super::features::environment_of;
use super::ClientApi;
use crate::auth::rate_limit::LimitGroup;
use crate::domain::filter::FilterParams;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::streaming::events::{hydration_document, View};
use crate::streaming::{EventStream, Refusal};

/// `{"events":[…]}`: the data of every stream event and the body of a delta answer
/// (documentation only: the bytes are written by `streaming::events`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct DeltaEvents {
    /// `hydration` (`features`, `segments`), `feature-updated` (`feature`), `feature-removed`
    /// (`featureName`, `project`), `segment-updated` (`segment`) or `segment-removed`
    /// (`segmentId`) events, each with its `type` and `eventId` (a store version).
    #[schema(value_type = Vec<Object>)]
    events: Vec<serde_json::Value>,
}

/// One server-sent event of the stream, as SSE parsers present it (documentation only).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct StreamEvent {
    /// `unleash-connected` (the first) or `unleash-updated`; absent on the last frame of a
    /// stream the replica ends, which carries a `retry:` delay only.
    event: Option<String>,
    /// The store version the stream holds after this event.
    id: Option<String>,
    /// `DeltaEvents` as JSON text.
    data: Option<String>,
}

/// The header SSE clients name the last event id they hold in.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// What the caller's stream shows: its environment and its projects, narrowed by the query's
/// filters (`tag`, `project`, `namePrefix`, as for `/api/client/features`); and the SHA-256 of
/// the store token it was identified by, if any (the stream ends with that token).
fn view_of(api: &ClientApi, req: &Request) -> ApiResult<(View, Option<String>)> {
    let caller = api.admit(req, LimitGroup::ClientFeatures)?;
    if !api.snapshot.is_ready() {
        return Err(ApiError::Unavailable(
            "The configuration has not been loaded yet".into(),
        ));
    }
    let query = req.uri().query().unwrap_or("");
    let filter = serde_html_form::from_str::<FilterParams>(query)
        .map_err(|e| ApiError::bad_request("query", format!("Malformed query: {e}")))?
        .filter()?;
    let filter = match &caller.scope {
        Some(projects) => filter.within(projects).ok_or_else(|| {
            ApiError::Forbidden("The token's projects include none of those asked for".into())
        })?,
        None => filter,
    };
    let view = View {
        environment: environment_of(&caller, query),
        filter,
    };
    Ok((view, caller.token_hash.filter(|_| caller.stored_token)))
}

/// A version id from a header: digits, optionally quoted or weak (`W/"42"`); anything else
/// is unknown (`None`).
fn version_in(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    let value = headers.get(name)?.to_str().ok()?.trim();
    let value = value.strip_prefix("W/").unwrap_or(value);
    value.trim_matches('"').parse().ok()
}

/// Streams the caller's toggles as server-sent events, in Unleash's protocol: first
/// `unleash-connected` with `{"events":[…]}` — one `hydration` (every toggle, segments by
/// reference), or, with a `Last-Event-ID` the stream log still covers, the events missed since
/// — then `unleash-updated` for every change; `id:` is the store version, the same on every
/// replica. Heartbeat comments keep it open; it ends at its lifetime, for a slow reader and at
/// shutdown with a `retry:` hint (the client resumes on any replica), and when its store token is
/// deleted or expires.
#[utoipa::path(
    get,
    path = "/api/client/streaming",
    tag = "client",
    params(
        ("Last-Event-ID" = Option<String>, Header, description = "The id of the last event the client holds: it gets the events since; an id the stream log no longer covers, ahead of the installation or not a number gets a hydration"),
        ("environment" = Option<String>, Query, description = "As for `/api/client/features`"),
        ("tag[]" = Option<Vec<String>>, Query, description = "Only toggles with one of these tags (`type:value`); `tag` also works"),
        ("project" = Option<Vec<String>>, Query, description = "Only toggles of these projects; `project[]` also works"),
        ("namePrefix" = Option<String>, Query, description = "Only toggles whose name starts with this"),
    ),
    responses(
        (status = 200, description = "The event stream (`text/event-stream`): `event: unleash-connected|unleash-updated`, `id: <version>`, `data: {\"events\":[…]}`", content_type = "text/event-stream", body = StreamEvent),
        (status = 400, description = "A malformed filter", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 403, description = "Not a client token, or a filter outside the token's projects", body = ErrorBody),
        (status = 429, description = "The replica holds its maximum of streams (SDKs then poll)", body = ErrorBody),
        (status = 431, description = "The request head is larger than 16 KiB or has more than 100 headers", body = ErrorBody),
        (status = 501, description = "Streaming is turned off (SDKs then poll)", body = ErrorBody),
        (status = 503, description = "Not ready, or shutting down", body = ErrorBody),
    )
)]
pub async fn stream_client_features(
    State(api): State<Arc<ClientApi>>,
    req: Request,
) -> ApiResult<Response<Body>> {
    let (view, token) = view_of(&api, &req)?;
    let subscription = api
        .streams
        .subscribe(view, token.as_deref())
        .map_err(|refusal| match refusal {
            Refusal::Disabled => ApiError::NotImplemented(
                "Streaming is turned off on this installation; poll /api/client/features".into(),
            ),
            Refusal::Full => ApiError::TooManyRequests(std::time::Duration::from_secs(60)),
            Refusal::Stopping => ApiError::Unavailable("This replica is shutting down".into()),
        })?;
    let first = api
        .streams
        .first_frame(&subscription, version_in(req.headers(), &LAST_EVENT_ID))
        .await;
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        // Proxies that buffer responses (nginx) pass this one on at once.
        .header("x-accel-buffering", "no")
        .body(Body::new(EventStream::new(first, subscription)))
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// The streaming protocol's events, polled: with no `If-None-Match` (or one the stream log no
/// longer covers, or ahead of the installation) one `hydration`; with an older one the events
/// since; with the current one 304. The `ETag` is the store version.
#[utoipa::path(
    get,
    path = "/api/client/delta",
    tag = "client",
    params(
        ("If-None-Match" = Option<String>, Header, description = "The ETag of the last answer (a version, quoted or not)"),
        ("environment" = Option<String>, Query, description = "As for `/api/client/features`"),
        ("tag[]" = Option<Vec<String>>, Query, description = "Only toggles with one of these tags (`type:value`); `tag` also works"),
        ("project" = Option<Vec<String>>, Query, description = "Only toggles of these projects; `project[]` also works"),
        ("namePrefix" = Option<String>, Query, description = "Only toggles whose name starts with this"),
    ),
    responses(
        (status = 200, description = "`{\"events\":[…]}`: a hydration, or the events since the client's version (possibly none)", body = DeltaEvents,
            headers(("ETag" = String, description = "The store version, quoted"))),
        (status = 304, description = "Nothing is newer than the client's version",
            headers(("ETag" = String, description = "The store version, quoted"))),
        (status = 400, description = "A malformed filter", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 403, description = "Not a client token, or a filter outside the token's projects", body = ErrorBody),
        (status = 503, description = "Not ready", body = ErrorBody),
    )
)]
pub async fn delta_client_features(
    State(api): State<Arc<ClientApi>>,
    req: Request,
) -> ApiResult<Response<Body>> {
    let (view, _) = view_of(&api, &req)?;
    let known = version_in(req.headers(), &header::IF_NONE_MATCH);
    let etag_of = |version: u64| {
        HeaderValue::from_str(&format!("\"{version}\""))
            .map_err(|e| ApiError::Internal(e.to_string()))
    };
    // The common case, nothing new, is answered from the snapshot alone.
    let current = api.snapshot.peek(|state| state.version);
    if known == Some(current) {
        return Ok((
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, etag_of(current)?)],
        )
            .into_response());
    }
    let state = api.streams.published();
    let version = state.version;
    let etag = etag_of(version)?;
    if known == Some(version) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    let events = match known {
        Some(known) => api.streams.catch_up(&state, &view, known).await,
        None => None,
    };
    let body = events.unwrap_or_else(|| hydration_document(&state, &view));
    Ok((
        StatusCode::OK,
        [
            (header::ETAG, etag),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json; charset=utf-8"),
            ),
        ],
        body,
    )
        .into_response())
}
