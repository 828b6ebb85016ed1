//! The client API: what SDKs poll. These routes are the hot path: they carry only the
//! snapshot as state and none of the per-request layers of the rest of the API (each layer
//! and the nesting of routers cost measurable CPU per request; see loadtest/README.md), and
//! `GET /api/client/features` itself is answered before routing (`http::PollsFirst`).

mod features;
mod streaming;
mod streams_first;
mod usage;

pub(super) use features::list_client_features;
pub use streams_first::StreamsFirst;
pub(crate) use usage::{client_identity, ClientMetrics, ClientRegistration};

use std::sync::Arc;

use axum::Router;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::rate_limit::{LimitGroup, RateLimiter};
use crate::auth::{Authenticator, ClientCaller, ClientCallerRef};
use crate::error::ApiError;
use crate::snapshot::Snapshot;
use crate::telemetry::metrics::Metrics;
use crate::usage::UsageRecorder;

/// What the client routes need: the snapshot, the response counters, the usage aggregate and
/// the authenticator.
pub struct ClientApi {
    pub snapshot: Arc<Snapshot>,
    pub metrics: Arc<Metrics>,
    pub usage: Arc<UsageRecorder>,
    /// Whether `X-Forwarded-For` names the client (`--trust-proxy`).
    pub trust_proxy: bool,
    /// Asks for client tokens (`--auth token`), and tells a token's projects.
    pub auth: Arc<Authenticator>,
    /// Per-caller rate limits.
    pub limiter: Arc<RateLimiter>,
    /// Longest a client may take to send a report's body (`--request-timeout-ms`).
    pub body_timeout: std::time::Duration,
    /// The SSE streams of this replica.
    pub streams: Arc<crate::streaming::StreamHub>,
    /// Whether `GET /api/client/features` answers carry `fetch-mode: streaming`.
    pub fetch_mode_header: bool,
}

impl ClientApi {
    /// The client API of the application `state` describes.
    pub fn from_state(state: &crate::state::AppState) -> Self {
        Self {
            snapshot: state.snapshot.clone(),
            metrics: state.metrics.clone(),
            usage: state.usage.clone(),
            trust_proxy: state.trust_proxy,
            auth: state.auth.clone(),
            limiter: state.limiter.clone(),
            body_timeout: state.edge.request_timeout,
            streams: state.streams.clone(),
            fetch_mode_header: state.fetch_mode_header,
        }
    }

    /// The caller (its scope and environment), once it is identified (when tokens are
    /// required) and within its rate limit for `group`.
    pub fn admit(
        &self,
        req: &axum::extract::Request,
        group: LimitGroup,
    ) -> Result<ClientCaller, ApiError> {
        self.admit_with(req, group, |caller| caller.owned())
    }

    /// Runs `use_caller` on the caller, borrowed, once it is admitted (see `admit`).
    pub fn admit_with<R>(
        &self,
        req: &axum::extract::Request,
        group: LimitGroup,
        use_caller: impl FnOnce(ClientCallerRef<'_>) -> R,
    ) -> Result<R, ApiError> {
        self.auth.client_with(req.headers(), |caller| {
            self.limiter
                .check_caller(group, caller.token_hash, req, self.trust_proxy)
                .map_err(ApiError::TooManyRequests)?;
            Ok(use_caller(caller))
        })?
    }
}

/// The client routes, with their own state and no per-request layers, and their part of the
/// OpenAPI document.
pub fn router(api: Arc<ClientApi>) -> (Router, utoipa::openapi::OpenApi) {
    let (router, document) = OpenApiRouter::<Arc<ClientApi>>::default()
        .routes(routes!(features::list_client_features))
        .routes(routes!(features::get_client_feature))
        .routes(routes!(streaming::stream_client_features))
        .routes(routes!(streaming::delta_client_features))
        .routes(routes!(usage::register_client))
        .routes(routes!(usage::record_client_metrics))
        .split_for_parts();
    let router = router
        .method_not_allowed_fallback(super::method_not_allowed)
        .with_state(api);
    (router, document)
}
