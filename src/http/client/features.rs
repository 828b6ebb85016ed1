//! `GET /api/client/features`: the hot path. The response bytes, gzip and ETag come from the
//! snapshot's built client documents; a request only picks one and compares headers.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use axum::response::IntoResponse;
use axum::Json;

use super::ClientApi;
use serde::Deserialize;

use crate::auth::rate_limit::LimitGroup;
use crate::auth::{ClientCaller, ClientCallerRef};
use crate::domain::environment::DEFAULT_ENVIRONMENT;
use crate::domain::filter::FeatureFilter;
use crate::domain::usage::REPORT_NAME_MAX;
use crate::domain::views::{ClientToggle, SegmentForm};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{AppPath, ToggleNamePath};
use crate::snapshot::{no_match, ClientResponse, DocumentForm};
use crate::telemetry::metrics::ClientFeatureCounts;

/// Whether the client accepts gzip: `gzip` or `*` with a non-zero quality, unless `gzip` itself
/// is refused with `q=0`.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut any = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(list) = value.to_str() else { continue };
        for item in list.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let accepted = !parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            if coding.eq_ignore_ascii_case("gzip") {
                gzip = Some(accepted);
            } else if coding == "*" {
                any = Some(accepted);
            }
        }
    }
    gzip.or(any).unwrap_or(false)
}

fn respond(
    response: &ClientResponse,
    headers: &HeaderMap,
    counts: &ClientFeatureCounts,
) -> Response<Body> {
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|inm| response.matches(inm.as_bytes()));
    // Assembled in place rather than with `Response::builder`, which moves its parts through
    // a `Result` at every step.
    let mut sent = HeaderMap::with_capacity(4);
    // A copy, not a clone: a clone bumps a reference count every core shares.
    sent.insert(
        header::ETAG,
        HeaderValue::from_bytes(response.etag.as_bytes()).unwrap_or_else(|_| response.etag.clone()),
    );
    sent.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    let (status, body) = if not_modified {
        counts.not_modified.inc();
        (StatusCode::NOT_MODIFIED, Body::empty())
    } else {
        sent.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        if accepts_gzip(headers) {
            counts.gzip.inc();
            sent.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            (StatusCode::OK, response.gzip.body())
        } else {
            counts.plain.inc();
            (StatusCode::OK, response.plain.body())
        }
    };
    let mut answer = Response::new(body);
    *answer.status_mut() = status;
    *answer.headers_mut() = sent;
    answer
}

/// The client features document, as the snapshot builds it (documentation only: the bytes are
/// assembled from per-toggle pieces, see `snapshot::client_document`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct ClientFeatures<'a> {
    /// Always 1.
    version: u32,
    /// The active toggles the filter selects, by name.
    features: Vec<ClientToggle<'a>>,
}

/// All active toggles in the client format (spec §4.1), in the environment of the caller's
/// token (a client or backend token's own; an admin token or open access: `?environment=`,
/// else `default`; an environment the registry does not hold: every toggle off), segments by
/// reference for `Unleash-Client-Spec` 4.2.0 or later, else inlined.
#[utoipa::path(
    get,
    path = "/api/client/features",
    tag = "client",
    params(
        ("environment" = Option<String>, Query, description = "The environment served to an admin token or without a token (a client or backend token is served its own); `default` when absent"),
        ("Unleash-Client-Spec" = Option<String>, Header, description = "The client specification the SDK implements: 4.2.0 or later gets segments by reference (strategies' `segments` and a top-level `segments`), anything else (or no header) inlined into the strategies' constraints"),
        ("tag[]" = Option<Vec<String>>, Query, description = "Only toggles with one of these tags (`type:value`); `tag` also works"),
        ("project" = Option<Vec<String>>, Query, description = "Only toggles of these projects; `project[]` also works"),
        ("namePrefix" = Option<String>, Query, description = "Only toggles whose name starts with this"),
        ("If-None-Match" = Option<String>, Header, description = "The ETag of the document the client holds"),
    ),
    responses(
        (status = 200, description = "The toggles (gzip when accepted); a malformed filter matches none", body = ClientFeatures,
            headers(("ETag" = String, description = "Derived from the content: equal on every replica for equal content"))),
        (status = 304, description = "The client's document is current",
            headers(("ETag" = String, description = "The current document's ETag"))),
    )
)]
pub async fn list_client_features(
    State(api): State<Arc<ClientApi>>,
    req: Request,
) -> Response<Body> {
    let admitted = api.admit_with(
        &req,
        LimitGroup::ClientFeatures,
        |caller| match answer_from_built(
            &api,
            req.uri().query().unwrap_or(""),
            req.headers(),
            caller,
        ) {
            Some(response) => Admitted::Answered(response),
            None => Admitted::Caller(caller.owned()),
        },
    );
    let caller = match admitted {
        Ok(Admitted::Caller(caller)) => caller,
        Ok(Admitted::Answered(response)) => return response,
        Err(e) => return e.into_response(),
    };
    let query = req.uri().query().map(str::to_string);
    let headers = req.headers();
    let snapshot = &api.snapshot;
    if !snapshot.is_ready() {
        return ApiError::Unavailable("The configuration has not been loaded yet".into())
            .into_response();
    }
    let query = query.as_deref().unwrap_or("");
    let state = snapshot.state();
    let form = DocumentForm::requested(
        &environment_of(&caller, query),
        inlines_segments(headers),
        &state,
    );
    let Some(documents) = snapshot.client().documents(&form) else {
        return ApiError::Unavailable("Too many client document forms are served".into())
            .into_response();
    };
    // spec §4.1 allows only 20x/304 here: a malformed filter matches no toggle.
    let filter = FeatureFilter::of_poll_query(query);
    // A token scoped to projects sees only theirs: its document is the filtered one (so its
    // cache entry and ETag are those of the filter it amounts to).
    let filter = match &caller.scope {
        Some(projects) => filter.and_then(|f| f.within(projects)),
        None => filter,
    };
    let response = match filter {
        Some(filter) => match documents.response(&filter).await {
            Some(response) => response,
            None => {
                return ApiError::Unavailable("The client features are not built yet".into())
                    .into_response()
            }
        },
        None => no_match(),
    };
    if form == DocumentForm::default() {
        record_poll(&api, headers, query, &response);
    } else {
        record_poll(&api, headers, &poll_query(&form, query), &response);
    }
    advertise(
        &api,
        respond(&response, headers, &api.metrics.client_counts),
    )
}

/// A caller admitted to the client features: answered already, or to be answered by the
/// general path.
enum Admitted {
    Answered(Response<Body>),
    Caller(ClientCaller),
}

/// The answer of the common cases, borrowed from a built document with no state read, form,
/// filter or lock: no query, every project, segments by reference (or none to serve), and
/// `default` (no environment token) or the token's environment once its form was asked for
/// and is built. `None` for every other request.
fn answer_from_built(
    api: &ClientApi,
    query: &str,
    headers: &HeaderMap,
    caller: ClientCallerRef<'_>,
) -> Option<Response<Body>> {
    let snapshot = &api.snapshot;
    if !snapshot.is_ready()
        || caller.scope.is_some()
        || !query.is_empty()
        || (snapshot.has_segments() && inlines_segments(headers))
    {
        return None;
    }
    let Some(environment) = caller.environment else {
        let response = &*snapshot.client().unfiltered();
        let response = response.as_deref()?;
        record_poll(api, headers, "", response);
        return Some(advertise(
            api,
            respond(response, headers, &api.metrics.client_counts),
        ));
    };
    let response = snapshot
        .client()
        .answer_unfiltered_of(environment, |response, recorded| {
            record_poll(api, headers, recorded, response);
            respond(response, headers, &api.metrics.client_counts)
        })?;
    Some(advertise(api, response))
}

/// The header that moves Node SDKs (6.7 and later) between polling and streaming.
const FETCH_MODE: HeaderName = HeaderName::from_static("fetch-mode");

/// Adds `fetch-mode: streaming` to a 200 when the operator asked for it
/// (`--fetch-mode-header`): every Node SDK that sees it switches to streaming, so it is never
/// sent otherwise — nor while this replica holds its maximum of streams, since an SDK refused
/// a stream polls again and would be sent straight back to be refused.
fn advertise(api: &ClientApi, mut response: Response<Body>) -> Response<Body> {
    if api.fetch_mode_header && response.status() == StatusCode::OK && api.streams.has_room() {
        response
            .headers_mut()
            .insert(FETCH_MODE, HeaderValue::from_static("streaming"));
    }
    response
}

/// The header in which SDKs name the client specification they implement.
const CLIENT_SPEC: HeaderName = HeaderName::from_static("unleash-client-spec");
/// The first client specification whose SDKs take segments by reference.
const SEGMENTS_BY_REFERENCE: semver::Version = semver::Version::new(4, 2, 0);

/// Whether the request gets segments inlined into its strategies: no `Unleash-Client-Spec`,
/// or one older than 4.2.0 (MODERN-MODEL §1). A value that is not strict semver counts as
/// absent (Unleash 7 answers 400).
fn inlines_segments(headers: &HeaderMap) -> bool {
    headers
        .get(CLIENT_SPEC)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| semver::Version::parse(value).ok())
        .is_none_or(|version| version < SEGMENTS_BY_REFERENCE)
}

/// The query parameter that picks an environment.
#[derive(Deserialize, Default)]
struct EnvironmentParam {
    #[serde(default)]
    environment: Vec<String>,
}

/// The environment a caller is served: its token's, else the first `?environment=` (admin
/// tokens and open client access, as Unleash 7), else `default`.
pub(super) fn environment_of(caller: &ClientCaller, query: &str) -> String {
    if let Some(environment) = &caller.environment {
        return environment.clone();
    }
    serde_html_form::from_str::<EnvironmentParam>(query)
        .ok()
        .and_then(|param| param.environment.into_iter().next())
        .unwrap_or_else(|| DEFAULT_ENVIRONMENT.to_string())
}

/// What a poll of a form other than the default is recorded under: the query with the form
/// in front (`environment=E`, `inlineSegmentConstraints=true` as Unleash's `query` names
/// them), so the usage views can tell which document the instance holds.
fn poll_query(form: &DocumentForm, query: &str) -> String {
    let mut recorded = form.recorded_query();
    if !query.is_empty() {
        if !recorded.is_empty() {
            recorded.push('&');
        }
        recorded.push_str(query);
    }
    recorded
}

/// Longest query string whose poll is recorded (filters longer than this are not from SDKs).
const MAX_RECORDED_QUERY: usize = 1024;

/// Records which configuration the polling instance now holds (the one it is sent or
/// confirmed), when the SDK headers name it.
fn record_poll(api: &ClientApi, headers: &HeaderMap, query: &str, response: &ClientResponse) {
    if let (Some(app), Some(instance)) = super::usage::client_identity(headers) {
        // Headers may be long; what the registry keeps is bounded as reports are.
        if app.len() <= REPORT_NAME_MAX
            && instance.len() <= REPORT_NAME_MAX
            && query.len() <= MAX_RECORDED_QUERY
        {
            // The shared no-match document belongs to no version: it is the newest one's.
            let version = match response.version {
                0 => api.snapshot.client().built_version(),
                version => version,
            };
            api.usage
                .record_poll(app, instance, query, &response.etag, version);
        }
    }
}

/// One active toggle in the client format, without `version`; for debugging.
#[utoipa::path(
    get,
    path = "/api/client/features/{name}",
    tag = "client",
    params(
        ToggleNamePath,
        ("environment" = Option<String>, Query, description = "As for `/api/client/features`"),
        ("Unleash-Client-Spec" = Option<String>, Header, description = "As for `/api/client/features`"),
    ),
    responses(
        (status = 200, description = "The toggle", body = ClientToggle),
        (status = 404, description = "No such active toggle (or not in the token's projects)", body = ErrorBody),
    )
)]
pub async fn get_client_feature(
    State(api): State<Arc<ClientApi>>,
    AppPath(ToggleNamePath { name }): AppPath<ToggleNamePath>,
    req: Request,
) -> ApiResult<Response<Body>> {
    let caller = api.admit(&req, LimitGroup::ClientFeatures)?;
    if !api.snapshot.is_ready() {
        return Err(ApiError::Unavailable(
            "The configuration has not been loaded yet".into(),
        ));
    }
    let state = api.snapshot.state();
    let form = DocumentForm::requested(
        &environment_of(&caller, req.uri().query().unwrap_or("")),
        inlines_segments(req.headers()),
        &state,
    );
    let toggle = state
        .features
        .get(&name)
        .filter(|t| {
            caller
                .scope
                .as_ref()
                .is_none_or(|projects| projects.iter().any(|p| *p == t.project))
        })
        .ok_or_else(|| ApiError::NotFound(format!("Could not find feature \"{name}\"")))?;
    let segments = match form.inline_segments {
        true => SegmentForm::Inline(&state.segments),
        false => SegmentForm::ByReference,
    };
    Ok(Json(ClientToggle::in_environment(
        toggle,
        &form.environment,
        segments,
    ))
    .into_response())
}
