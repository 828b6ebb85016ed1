//! `AppState`, shared by every handler, and the sub-states handlers take.

use std::sync::Arc;

use axum::extract::FromRef;

use crate::auth::Authenticator;
use crate::service::Service;
use crate::snapshot::Snapshot;
use crate::telemetry::metrics::Metrics;
use crate::usage::UsageRecorder;

/// Everything the HTTP layer needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub service: Service,
    pub snapshot: Arc<Snapshot>,
    /// Identifies admin and client callers.
    pub auth: Arc<Authenticator>,
    pub metrics: Arc<Metrics>,
    pub usage: Arc<UsageRecorder>,
    /// Whether `X-Forwarded-For` names the client (`--trust-proxy`).
    pub trust_proxy: bool,
    /// Largest state import body, in bytes (`--import-body-limit-mib`).
    pub import_body_limit: usize,
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
