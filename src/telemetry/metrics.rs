//! Prometheus metrics, served at `/internal-backstage/prometheus` (see `exposition` for the
//! formats). Request durations are recorded per route template for the admin API; the client
//! features route, the hot path, only bumps a per-thread counter (no clock reads, no locks).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::delivery_metrics::DeliveryMetrics;
use super::evaluation_metrics::EvaluationMetrics;
use super::usage_metrics::UsageMetrics;
use super::write_metrics::WriteMetrics;
use crate::snapshot::Snapshot;

/// Labels of the HTTP request histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub http_request_method: String,
    /// The route template (`/api/admin/features/{name}`), or `unmatched`.
    pub http_route: String,
    pub http_response_status_code: u16,
}

/// Labels of the client features counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabels {
    /// `200`, `200-gzip` or `304`.
    response: &'static str,
}

/// How client features requests were answered: the three counters of the family, counted
/// per thread on the hot path and added into the exported counters at each scrape.
pub struct ClientFeatureCounts {
    pub plain: HotCounter,
    pub gzip: HotCounter,
    pub not_modified: HotCounter,
}

/// Slots of a `HotCounter` (threads share a slot only beyond this many).
const HOT_SLOTS: usize = 8;

/// One cache line of its own per slot, so threads counting at once do not contend.
#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicU64);

thread_local! {
    /// This thread's slot in every `HotCounter`.
    static HOT_SLOT: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % HOT_SLOTS
    };
}

/// A counter bumped on the hot path by many threads at once: each thread adds to its own slot
/// (a single shared atomic would bounce between the cores on every request); `sync` adds the
/// total into the exported Prometheus counter.
pub struct HotCounter {
    slots: [Slot; HOT_SLOTS],
    exported: Counter,
    synced: AtomicU64,
}

impl HotCounter {
    pub(super) fn new(exported: Counter) -> Self {
        Self {
            slots: Default::default(),
            exported,
            synced: AtomicU64::new(0),
        }
    }

    /// Adds one.
    pub fn inc(&self) {
        HOT_SLOT.with(|slot| self.slots[*slot].0.fetch_add(1, Ordering::Relaxed));
    }

    /// Brings the exported counter up to the slots' total.
    pub(super) fn sync(&self) {
        let total: u64 = self.slots.iter().map(|s| s.0.load(Ordering::Relaxed)).sum();
        // fetch_max: of two concurrent scrapes, only the one that raises the mark adds.
        let before = self.synced.fetch_max(total, Ordering::Relaxed);
        if total > before {
            self.exported.inc_by(total - before);
        }
    }
}

/// The service's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    http: Family<HttpLabels, Histogram>,
    pub client_counts: ClientFeatureCounts,
    snapshot_version: Gauge,
    active_toggles: Gauge,
    archived_toggles: Gauge,
    store_reachable: Gauge,
    ready: Gauge,
    snapshot_staleness: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Client usage ingestion and store operations.
    pub usage: UsageMetrics,
    /// Configuration writes and client document builds.
    pub writes: WriteMetrics,
    /// Addon deliveries.
    pub deliveries: DeliveryMetrics,
    /// SSE streams.
    pub streams: super::stream_metrics::StreamMetrics,
    /// Frontend API and OFREP answers.
    pub evaluation: EvaluationMetrics,
}

fn http_histogram() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    ])
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Metrics {
    /// A registry with every metric registered; `toggle_usage_series` enables per-toggle usage
    /// counters with that many series at most.
    pub fn new(toggle_usage_series: Option<usize>) -> Self {
        let mut registry = Registry::with_prefix("flagpole");
        registry.register(
            "build",
            "Build information",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        let http = Family::<HttpLabels, Histogram>::new_with_constructor(
            http_histogram as fn() -> Histogram,
        );
        let client = Family::<ClientLabels, Counter>::default();
        let count =
            |response| HotCounter::new(client.get_or_create(&ClientLabels { response }).clone());
        let client_counts = ClientFeatureCounts {
            plain: count("200"),
            gzip: count("200-gzip"),
            not_modified: count("304"),
        };
        let snapshot_version = Gauge::default();
        let active_toggles = Gauge::default();
        let archived_toggles = Gauge::default();
        let store_reachable = Gauge::default();
        let ready = Gauge::default();
        // Named after the OpenTelemetry HTTP semantic conventions, in base units.
        registry.register_with_unit(
            "http_server_request_duration",
            "Duration of HTTP requests except GET /api/client/features",
            prometheus_client::registry::Unit::Seconds,
            http.clone(),
        );
        registry.register(
            "client_features_responses",
            "Responses to GET /api/client/features by kind",
            client.clone(),
        );
        registry.register(
            "snapshot_version",
            "Configuration version this replica serves",
            snapshot_version.clone(),
        );
        registry.register(
            "active_toggles",
            "Active toggles in the snapshot",
            active_toggles.clone(),
        );
        registry.register(
            "archived_toggles",
            "Archived toggles in the snapshot",
            archived_toggles.clone(),
        );
        registry.register(
            "store_reachable",
            "1 when the last contact with the store succeeded",
            store_reachable.clone(),
        );
        registry.register(
            "ready",
            "1 when the configuration is loaded and requests are served",
            ready.clone(),
        );
        let snapshot_staleness = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register_with_unit(
            "snapshot_staleness",
            "Time since the snapshot last confirmed it matches the store (refresh lag)",
            prometheus_client::registry::Unit::Seconds,
            snapshot_staleness.clone(),
        );
        let usage = UsageMetrics::register(&mut registry, toggle_usage_series);
        let writes = WriteMetrics::register(&mut registry);
        let deliveries = DeliveryMetrics::register(&mut registry);
        let streams = super::stream_metrics::StreamMetrics::register(&mut registry);
        let evaluation = EvaluationMetrics::register(&mut registry);
        Self {
            evaluation,
            registry,
            streams,
            writes,
            deliveries,
            snapshot_staleness,
            usage,
            http,
            client_counts,
            snapshot_version,
            active_toggles,
            archived_toggles,
            store_reachable,
            ready,
        }
    }

    /// The exposition text, with gauges read from `snapshot` now.
    pub fn render(&self, snapshot: &Snapshot) -> String {
        for counter in [
            &self.client_counts.plain,
            &self.client_counts.gzip,
            &self.client_counts.not_modified,
        ] {
            counter.sync();
        }
        self.evaluation.sync();
        let state = snapshot.state();
        self.snapshot_version.set(state.version as i64);
        self.active_toggles.set(state.features.len() as i64);
        self.archived_toggles.set(state.archive.len() as i64);
        self.store_reachable.set(snapshot.store_reachable() as i64);
        self.ready.set(snapshot.is_ready() as i64);
        self.snapshot_staleness
            .set(snapshot.since_confirmed().as_secs_f64());
        self.writes.observe(snapshot);
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        text
    }
}

/// Whether `route` serves probes or scrapes, which would drown the signal of request metrics
/// and traces.
pub fn is_operational(route: &str) -> bool {
    route.starts_with("/health") || route.starts_with("/internal-backstage")
}

/// Middleware recording every request's duration by route template.
pub async fn track_requests(
    State(metrics): State<Arc<Metrics>>,
    req: Request,
    next: Next,
) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    if is_operational(&route) {
        return next.run(req).await;
    }
    let method = req.method().to_string();
    let start = Instant::now();
    let response = next.run(req).await;
    metrics
        .http
        .get_or_create(&HttpLabels {
            http_request_method: method,
            http_route: route,
            http_response_status_code: response.status().as_u16(),
        })
        .observe(start.elapsed().as_secs_f64());
    response
}
