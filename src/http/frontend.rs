//! The Unleash frontend API for browsers and mobile apps (Unleash 7's `/api/frontend`, and the
//! `/api/proxy` alias of the old Unleash proxy): the toggles that are on for a context, and
//! the frontend SDKs' usage reports, counted as backend SDKs' are. CORS for the origins
//! `--frontend-origin` allows (every origin by default, as Unleash's frontend API origins).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, Method, Response, StatusCode};
use axum::response::IntoResponse;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::evaluation::{if_none_match, json_with_etag, not_modified, read_body, EvaluationApi};
use crate::auth::rate_limit::LimitGroup;
use crate::domain::usage::{ClientHeaders, MetricsReport, Registration};
use crate::error::{ApiError, ApiResult};
use crate::evaluation::frontend::{self, AnswerKind, FrontendToggles, Scope};
use crate::evaluation::{ContextError, EvaluationContext};

impl From<ContextError> for ApiError {
    fn from(e: ContextError) -> Self {
        ApiError::bad_request("context", e.to_string())
    }
}

/// Where the context comes from.
#[derive(Clone, Copy)]
enum ContextSource {
    Query,
    Body,
}

/// Answers a frontend evaluation: the caller, its context (query string or body, with the
/// caller's address as `remoteAddress` when it has none), then the ETag — a 304 before
/// anything is evaluated when `If-None-Match` names it — else the toggles that are on.
async fn evaluate(api: &EvaluationApi, req: Request, source: ContextSource) -> Response<Body> {
    match try_evaluate(api, req, source).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn try_evaluate(
    api: &EvaluationApi,
    req: Request,
    source: ContextSource,
) -> ApiResult<Response<Body>> {
    let caller = api.admit(&req, false, LimitGroup::ClientFeatures)?;
    api.ready()?;
    let address = crate::http::extract::client_addr(&req, api.trust_proxy);
    let inm = if_none_match(req.headers());
    // A query's context borrows its texts from the request (only hashed on a re-poll).
    let mut context = match source {
        ContextSource::Query => EvaluationContext::from_query(req.uri().query().unwrap_or(""))?,
        ContextSource::Body => {
            let bytes = read_body(req.into_body(), api.body_timeout).await?;
            EvaluationContext::from_json_body(&bytes)?
        }
    };
    let engine = api
        .evaluator
        .engine(&caller.environment)
        .await
        .ok_or_else(|| ApiError::Unavailable("The evaluation engine is not built yet".into()))?;
    // The caller's address as text only where an answer can depend on it.
    if engine.reads_remote_address && !context.has_remote_address() {
        context.default_remote_address(address.map(|ip| ip.to_string()).as_deref());
    }
    let scope = Scope {
        environment: &caller.environment,
        projects: caller.scope.as_deref(),
    };
    // Before evaluating unless the clock or chance may change the answer for this context.
    let before = (!engine.volatility.varies_for(&context))
        .then(|| frontend::etag(AnswerKind::Frontend, &engine, &scope, &context));
    let counts = &api.metrics.evaluation.frontend;
    if let Some(response) = before.and_then(|etag| not_modified(inm.as_ref(), &etag)) {
        counts.not_modified.inc();
        return Ok(response);
    }
    counts.evaluated.inc();
    let answer = frontend::answer_json(&engine, &scope, &context.to_engine());
    let etag = before.unwrap_or_else(|| frontend::body_etag(AnswerKind::Frontend, &answer));
    if let Some(response) = not_modified(inm.as_ref(), &etag) {
        return Ok(response);
    }
    Ok(json_with_etag(answer, &etag))
}

/// The toggles that are on for the context in the query string (`appName`, `environment`,
/// `userId`, `sessionId`, `remoteAddress`, `currentTime`, `properties[<name>]=<value>`; any
/// other parameter is a property), for the environment and projects of the caller's frontend
/// token. Only toggles that are on are listed, each with its variant.
#[utoipa::path(
    get,
    path = "/api/frontend",
    tag = "frontend",
    params(
        ("userId" = Option<String>, Query, description = "A context field; so are appName, environment, sessionId, remoteAddress (the caller's address when absent) and currentTime"),
        ("properties" = Option<std::collections::BTreeMap<String, String>>, Query, style = DeepObject, explode, description = "Custom context fields as `properties[<name>]=<value>`"),
        ("If-None-Match" = Option<String>, Header, description = "The ETag of the answer the caller holds"),
    ),
    responses(
        (status = 200, description = "The toggles that are on", body = FrontendToggles,
            headers(("ETag" = String, description = "Names the configuration, the token's scope and the context"))),
        (status = 304, description = "The answer the caller holds is current (nothing was evaluated)"),
        (status = 400, description = "A context field is not a string, number or boolean, or the context is too large", body = crate::error::ErrorBody),
    )
)]
pub async fn get_frontend(State(api): State<Arc<EvaluationApi>>, req: Request) -> Response<Body> {
    evaluate(&api, req, ContextSource::Query).await
}

/// As `GET /api/frontend`, the context in the body: `{"context": {…}}` or the bare context
/// object (Unleash 6.7.2+; the frontend SDK's `usePOSTrequests`).
#[utoipa::path(
    post,
    path = "/api/frontend",
    tag = "frontend",
    request_body(content = EvaluationRequest, description = "The context, wrapped or bare"),
    params(("If-None-Match" = Option<String>, Header, description = "The ETag of the answer the caller holds")),
    responses(
        (status = 200, description = "The toggles that are on", body = FrontendToggles,
            headers(("ETag" = String, description = "Names the configuration, the token's scope and the context"))),
        (status = 304, description = "The answer the caller holds is current (nothing was evaluated)"),
    )
)]
pub async fn post_frontend(State(api): State<Arc<EvaluationApi>>, req: Request) -> Response<Body> {
    evaluate(&api, req, ContextSource::Body).await
}

/// `GET /api/frontend` under the old Unleash proxy's path.
#[utoipa::path(
    get,
    path = "/api/proxy",
    tag = "frontend",
    params(
        ("userId" = Option<String>, Query, description = "A context field, as for GET /api/frontend"),
        ("If-None-Match" = Option<String>, Header, description = "The ETag of the answer the caller holds"),
    ),
    responses(
        (status = 200, description = "The toggles that are on", body = FrontendToggles),
        (status = 304, description = "The answer the caller holds is current"),
        (status = 400, description = "A bad context", body = crate::error::ErrorBody),
    )
)]
pub async fn get_proxy(State(api): State<Arc<EvaluationApi>>, req: Request) -> Response<Body> {
    evaluate(&api, req, ContextSource::Query).await
}

/// `POST /api/frontend` under the old Unleash proxy's path.
#[utoipa::path(
    post,
    path = "/api/proxy",
    tag = "frontend",
    request_body(content = EvaluationRequest, description = "The context, wrapped or bare"),
    responses(
        (status = 200, description = "The toggles that are on", body = FrontendToggles),
        (status = 304, description = "The answer the caller holds is current"),
    )
)]
pub async fn post_proxy(State(api): State<Arc<EvaluationApi>>, req: Request) -> Response<Body> {
    evaluate(&api, req, ContextSource::Body).await
}

/// An evaluation request's body (documentation only: `evaluation::context` reads it).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct EvaluationRequest {
    /// The context: `userId`, `sessionId`, `remoteAddress`, `environment`, `appName`,
    /// `currentTime` (strings, numbers or booleans), `properties` (an object of them); any
    /// other field is a property. May be absent (the empty context).
    context: Option<super::evaluation::ContextFields>,
}

/// Reads a usage report of a frontend SDK: its bytes and identity headers.
async fn read_report(
    api: &EvaluationApi,
    req: Request,
) -> ApiResult<(bytes::Bytes, ClientHeaders, Option<String>)> {
    api.admit(&req, false, LimitGroup::ClientUsage)?;
    let ip = crate::http::extract::client_ip(&req, api.trust_proxy);
    let (app, instance) = crate::http::client::client_identity(req.headers());
    let headers = ClientHeaders {
        app_name: app.map(str::to_string),
        instance_id: instance.map(str::to_string),
    };
    let bytes = read_body(req.into_body(), api.body_timeout).await?;
    Ok((bytes, headers, ip))
}

async fn record_metrics(api: &EvaluationApi, req: Request) -> ApiResult<StatusCode> {
    let (bytes, headers, ip) = read_report(api, req).await?;
    let report = MetricsReport::parse(&bytes, &headers).inspect_err(|_| {
        api.metrics.usage.report("metrics", false);
    })?;
    api.metrics.usage.report("metrics", true);
    api.usage.record_metrics(report, ip.as_deref());
    Ok(StatusCode::OK)
}

async fn record_registration(api: &EvaluationApi, req: Request) -> ApiResult<StatusCode> {
    let (bytes, headers, ip) = read_report(api, req).await?;
    let registration = Registration::parse(&bytes, &headers).inspect_err(|_| {
        api.metrics.usage.report("register", false);
    })?;
    api.metrics.usage.report("register", true);
    api.usage.record_registration(registration, ip.as_deref());
    Ok(StatusCode::OK)
}

/// A frontend SDK's usage report (`unleash-proxy-client`'s body, `impactMetrics` included),
/// counted into the usage views as a backend SDK's `POST /api/client/metrics` is.
#[utoipa::path(
    post,
    path = "/api/frontend/client/metrics",
    tag = "frontend",
    request_body = crate::http::client::ClientMetrics,
    responses((status = 200, description = "Counted"))
)]
pub async fn frontend_metrics(
    State(api): State<Arc<EvaluationApi>>,
    req: Request,
) -> ApiResult<StatusCode> {
    record_metrics(&api, req).await
}

/// `POST /api/frontend/client/metrics` under the old Unleash proxy's path.
#[utoipa::path(
    post,
    path = "/api/proxy/client/metrics",
    tag = "frontend",
    request_body = crate::http::client::ClientMetrics,
    responses((status = 200, description = "Counted"))
)]
pub async fn proxy_metrics(
    State(api): State<Arc<EvaluationApi>>,
    req: Request,
) -> ApiResult<StatusCode> {
    record_metrics(&api, req).await
}

/// A frontend SDK's registration, recorded as a backend SDK's `POST /api/client/register`.
#[utoipa::path(
    post,
    path = "/api/frontend/client/register",
    tag = "frontend",
    request_body = crate::http::client::ClientRegistration,
    responses((status = 200, description = "Registered"))
)]
pub async fn frontend_register(
    State(api): State<Arc<EvaluationApi>>,
    req: Request,
) -> ApiResult<StatusCode> {
    record_registration(&api, req).await
}

/// `POST /api/frontend/client/register` under the old Unleash proxy's path.
#[utoipa::path(
    post,
    path = "/api/proxy/client/register",
    tag = "frontend",
    request_body = crate::http::client::ClientRegistration,
    responses((status = 200, description = "Registered"))
)]
pub async fn proxy_register(
    State(api): State<Arc<EvaluationApi>>,
    req: Request,
) -> ApiResult<StatusCode> {
    record_registration(&api, req).await
}

/// The headers browsers may send cross-origin: the frontend SDK's and OFREP providers'.
fn allowed_headers() -> [HeaderName; 9] {
    [
        header::AUTHORIZATION,
        header::CONTENT_TYPE,
        header::IF_NONE_MATCH,
        header::ACCEPT,
        HeaderName::from_static("unleash-appname"),
        HeaderName::from_static("unleash-instanceid"),
        HeaderName::from_static("unleash-connection-id"),
        HeaderName::from_static("unleash-sdk"),
        HeaderName::from_static("x-api-key"),
    ]
}

/// CORS of the frontend API and OFREP: `origins` (`*`: any), preflight answered, the ETag
/// readable by scripts.
pub fn cors(origins: &[HeaderValue]) -> CorsLayer {
    let any = origins.is_empty() || origins.iter().any(|o| o.as_bytes() == b"*");
    let allow = match any {
        true => AllowOrigin::any(),
        false => AllowOrigin::list(origins.iter().cloned()),
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
        .allow_headers(allowed_headers())
        .expose_headers([header::ETAG, header::RETRY_AFTER])
        .max_age(std::time::Duration::from_secs(86_400))
}

/// The frontend routes.
pub fn router() -> OpenApiRouter<Arc<EvaluationApi>> {
    OpenApiRouter::default()
        .routes(routes!(get_frontend, post_frontend))
        .routes(routes!(get_proxy, post_proxy))
        .routes(routes!(frontend_metrics))
        .routes(routes!(proxy_metrics))
        .routes(routes!(frontend_register))
        .routes(routes!(proxy_register))
}
