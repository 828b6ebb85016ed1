//! `AppState`, shared by every handler, and the sub-states handlers take.

use std::sync::Arc;

use axum::extract::FromRef;

use crate::auth::rate_limit::RateLimiter;
use crate::auth::Authenticator;
use crate::health::Readiness;
use crate::service::Service;
use crate::snapshot::Snapshot;
use crate::telemetry::metrics::Metrics;
use crate::usage::UsageRecorder;

/// Everything the HTTP layer needs. One pointer: axum clones the state for every request.
#[derive(Clone)]
pub struct AppState(Arc<AppStateParts>);

impl AppState {
    /// The state of a router serving `parts`.
    pub fn new(parts: AppStateParts) -> Self {
        Self(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateParts;

    fn deref(&self) -> &AppStateParts {
        &self.0
    }
}

/// What an `AppState` holds.
pub struct AppStateParts {
    pub service: Service,
    pub snapshot: Arc<Snapshot>,
    /// What `/health/ready` reports (fails while the replica drains before stopping).
    pub readiness: Arc<Readiness>,
    /// Identifies admin and client callers.
    pub auth: Arc<Authenticator>,
    /// Per-caller rate limits.
    pub limiter: Arc<RateLimiter>,
    pub metrics: Arc<Metrics>,
    pub usage: Arc<UsageRecorder>,
    /// Where admin writes go to be committed (Redis store; `None` with the embedded one).
    pub forwarding: Option<Arc<crate::forwarding::WriteForwarding>>,
    /// The SSE streams of this replica.
    pub streams: Arc<crate::streaming::StreamHub>,
    /// Whether polling responses carry `fetch-mode: streaming` (`--fetch-mode-header`).
    pub fetch_mode_header: bool,
    /// Whether `X-Forwarded-For` names the client (`--trust-proxy`).
    pub trust_proxy: bool,
    /// Body and time limits, CORS.
    pub edge: EdgeSettings,
    /// The evaluation engines (frontend API, OFREP, playground).
    pub evaluator: Arc<crate::evaluation::Evaluator>,
}

/// The limits and CORS origins of the HTTP edge.
#[derive(Clone, Debug)]
pub struct EdgeSettings {
    /// Largest state import body, in bytes (`--import-body-limit-mib`).
    pub import_body_limit: usize,
    /// Largest other admin body, in bytes (`--admin-body-limit-kib`).
    pub admin_body_limit: usize,
    /// Longest an admin request may take (`--request-timeout-ms`).
    pub request_timeout: std::time::Duration,
    /// Origins allowed by CORS (`--cors-origin`); empty: no CORS.
    pub cors_origins: Vec<axum::http::HeaderValue>,
    /// Origins allowed to call the frontend API and OFREP (`--frontend-origin`; `*`: any).
    pub frontend_origins: Vec<axum::http::HeaderValue>,
    /// One client API request in this many is traced (`--trace-client-one-in`, with export
    /// on); `None`: none, and the client routes get no tracing layer at all.
    pub trace_client_every: Option<u64>,
}

impl EdgeSettings {
    /// Whether no layer applies to the client routes (no CORS, no sampled client traces): only
    /// then are they answered before routing (`PollsFirst`) and streams served outside hyper
    /// (`StreamsFirst`), so that the answers are the same either way.
    pub fn client_routes_unlayered(&self) -> bool {
        self.cors_origins.is_empty() && self.trace_client_every.is_none()
    }

    /// The edge settings among the server's, with client tracing from `telemetry`.
    pub fn from_settings(
        server: &crate::config::ServerSettings,
        telemetry: &crate::config::TelemetrySettings,
    ) -> Self {
        let bytes = |n: u64, shift: u32| usize::try_from(n << shift).unwrap_or(usize::MAX);
        Self {
            import_body_limit: bytes(server.import_body_limit_mib, 20),
            admin_body_limit: bytes(server.admin_body_limit_kib, 10),
            request_timeout: std::time::Duration::from_millis(server.request_timeout_ms),
            cors_origins: server.cors_origin.clone(),
            frontend_origins: server.frontend_origin.clone(),
            trace_client_every: (telemetry.traces_exported && telemetry.trace_client_one_in > 0)
                .then_some(telemetry.trace_client_one_in),
        }
    }
}

impl FromRef<AppState> for Service {
    fn from_ref(state: &AppState) -> Self {
        state.service.clone()
    }
}

impl FromRef<AppState> for Arc<Snapshot> {
    fn from_ref(state: &AppState) -> Self {
        state.snapshot.clone()
    }
}

impl FromRef<AppState> for Arc<Readiness> {
    fn from_ref(state: &AppState) -> Self {
        state.readiness.clone()
    }
}

impl FromRef<AppState> for Arc<Authenticator> {
    fn from_ref(state: &AppState) -> Self {
        state.auth.clone()
    }
}

impl FromRef<AppState> for Arc<Metrics> {
    fn from_ref(state: &AppState) -> Self {
        state.metrics.clone()
    }
}

impl FromRef<AppState> for Arc<UsageRecorder> {
    fn from_ref(state: &AppState) -> Self {
        state.usage.clone()
    }
}
