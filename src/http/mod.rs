//! The HTTP edge: one router per resource, merged here with the layers they share.

pub mod admin;
mod backstage;
pub mod client;
mod docs;
pub mod evaluation;
pub mod extract;
mod forward;
pub mod frontend;
mod hardening;
mod index;
pub mod listener;
pub mod ofrep;
pub mod openapi;
mod polls_first;
pub use polls_first::{ConnectedPolls, PollsFirst};
mod request_docs;
pub mod response;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::response::IntoResponse;
use axum::{middleware, Router};
use tower::Layer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::normalize_path::{NormalizePath, NormalizePathLayer};
use tower_http::sensitive_headers::{
    SetSensitiveRequestHeadersLayer, SetSensitiveResponseHeadersLayer,
};
use tower_http::trace::{DefaultOnResponse, OnResponse, TraceLayer};
use utoipa_axum::router::OpenApiRouter;

use crate::error::ApiError;
use crate::state::AppState;
use crate::telemetry::metrics::{is_operational, track_requests};

/// The whole application. `NormalizePath` wraps the router (as a router layer it would run
/// after routing) so that `POST /api/admin/features/` reaches the same handler; what SDKs
/// poll is answered before both (`PollsFirst`).
pub fn app(state: AppState) -> PollsFirst<NormalizePath<Router>> {
    let edge = state.edge.clone();
    let authenticate = middleware::from_fn_with_state(state.clone(), extract::authenticate_admin);
    // Every admin route: identified (except login and logout), bounded in body and time.
    let protect = |router: OpenApiRouter<AppState>| {
        router
            .layer(DefaultBodyLimit::max(edge.admin_body_limit))
            .layer(middleware::from_fn_with_state(
                edge.request_timeout,
                hardening::time_limit,
            ))
    };
    // Writes go on to the committing replica once their caller is identified.
    let forward = middleware::from_fn_with_state(state.clone(), forward::forward_writes);
    let admin = protect(
        admin::router(edge.import_body_limit)
            .route_layer(forward.clone())
            .route_layer(authenticate.clone()),
    );
    let admin_spec_paths = protect(
        admin::spec_paths_router()
            .route_layer(forward)
            .route_layer(authenticate),
    );
    let admin_open = protect(admin::open_router());
    let client = Arc::new(client::ClientApi::from_state(&state));
    let (routes, mut api) = OpenApiRouter::with_openapi(openapi::base())
        .merge(index::router())
        .merge(backstage::router())
        .merge(docs::router())
        .nest("/api/admin", admin)
        .merge(admin_spec_paths)
        .merge(admin_open)
        .split_for_parts();
    let (client_routes, client_api) = client::router(client.clone());
    api.merge(client_api);
    let evaluation = Arc::new(evaluation::EvaluationApi {
        evaluator: state.evaluator.clone(),
        auth: state.auth.clone(),
        limiter: state.limiter.clone(),
        usage: state.usage.clone(),
        metrics: state.metrics.clone(),
        trust_proxy: state.trust_proxy,
        body_timeout: state.edge.request_timeout,
    });
    let (evaluation_routes, evaluation_api) = OpenApiRouter::default()
        .merge(frontend::router())
        .merge(ofrep::router())
        .split_for_parts();
    api.merge(evaluation_api);
    // Their own CORS (`--frontend-origin`), outside the API's; no other layer (a hot path).
    let evaluation_routes = evaluation_routes
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(evaluation.clone())
        .layer(frontend::cors(&edge.frontend_origins));
    let client_routes = match edge.trace_client_every {
        Some(every) => client_routes.layer(
            TraceLayer::new_for_http()
                .make_span_with(sampled_request_span(every))
                .on_response(record_status),
        ),
        None => client_routes,
    };
    let document = match openapi::finish(api) {
        Ok(document) => document,
        // Serialising plain data cannot fail; if it ever does, the API still serves.
        Err(e) => {
            tracing::error!(error = %e, "the OpenAPI document could not be serialised");
            Default::default()
        }
    };
    let metrics = state.metrics.clone();
    let router = routes
        .merge(openapi::router(document))
        // The admin UI (`/` for browsers, `/ui/*`): pages, not API routes.
        .merge(crate::ui::router(&state))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal("handler panicked".into()).into_response()
        }))
        .layer(middleware::from_fn_with_state(metrics, track_requests))
        // Every response but the client API's (the hot path has no layers).
        .layer(middleware::from_fn(hardening::security_headers))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(record_status),
        )
        // Tokens, basic-auth passwords and sessions never reach a log line.
        .layer(SetSensitiveResponseHeadersLayer::new([
            axum::http::header::SET_COOKIE,
        ]))
        .layer(SetSensitiveRequestHeadersLayer::new([
            axum::http::header::AUTHORIZATION,
            axum::http::header::COOKIE,
            axum::http::HeaderName::from_static(crate::forwarding::FORWARDED_HEADER),
        ]))
        .with_state(state)
        .merge(client_routes);
    // Only when configured: it would cost the client path a layer.
    let cors = hardening::cors(&edge.cors_origins);
    // What SDKs poll is answered before routing only while no layer applies to it.
    let unlayered = edge.client_routes_unlayered();
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    let router = router.merge(evaluation_routes);
    PollsFirst::new(
        unlayered.then_some(client),
        evaluation,
        frontend::cors(&edge.frontend_origins),
        NormalizePathLayer::trim_trailing_slash().layer(router),
    )
}

/// Paths that carry a secret in their last segment (`/api/admin/api-tokens/:secret`).
const SECRET_PATHS: [&str; 1] = ["/api/admin/api-tokens/"];

/// The span of a request: its method and route (what OpenTelemetry names it by), its path with
/// secrets masked, and its status once answered; a child of the caller's trace when the
/// request carries a W3C `traceparent`.
fn request_span(req: &Request) -> tracing::Span {
    let path = req.uri().path();
    let shown = match SECRET_PATHS.iter().find(|p| path.starts_with(*p)) {
        Some(prefix) => format!("{prefix}*****"),
        None => path.to_string(),
    };
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    if is_operational(route) {
        return tracing::Span::none();
    }
    // DEBUG, like tower-http's: log lines at the default level keep no span prefix; the
    // OpenTelemetry layer takes this crate's spans at every level.
    let span = tracing::debug_span!(
        "request",
        otel.name = %format_args!("{} {route}", req.method()),
        otel.kind = "server",
        http.request.method = %req.method(),
        http.route = route,
        url.path = %shown,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    crate::telemetry::traces::continue_trace(&span, req.headers());
    span
}

/// The request span of one client request in `every` (the others get none).
fn sampled_request_span(every: u64) -> impl Fn(&Request) -> tracing::Span + Clone {
    let seen = Arc::new(AtomicU64::new(0));
    move |req: &Request| {
        if seen.fetch_add(1, Ordering::Relaxed).is_multiple_of(every) {
            request_span(req)
        } else {
            tracing::Span::none()
        }
    }
}

/// Records the status on the request's span (5xx marks the span as failed) and logs the
/// response as tower-http does (at DEBUG: `RUST_LOG=tower_http=debug` is an access log).
fn record_status(response: &axum::response::Response, latency: Duration, span: &tracing::Span) {
    DefaultOnResponse::new().on_response(response, latency, span);
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
}

async fn unknown_route(req: Request) -> ApiError {
    ApiError::NotFound(format!(
        "No route for {} {}",
        req.method(),
        req.uri().path()
    ))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
