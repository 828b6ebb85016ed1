//! Prometheus metrics of the SSE streams (`streaming`): open streams and groups, streams
//! opened, refused and ended by the replica, and frames queued.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of the ended-streams counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    /// `slow` (the reader fell behind), `lifetime`, `token` (deleted or expired) or `shutdown`.
    reason: &'static str,
}

/// Stream metrics; cheap to clone (the values are shared).
#[derive(Clone, Default)]
pub struct StreamMetrics {
    /// Open streams.
    pub open: Gauge,
    /// Groups (distinct views) of the open streams.
    pub groups: Gauge,
    /// Streams opened.
    pub opened: Counter,
    /// Streams refused at the connection cap (429).
    pub refused: Counter,
    ended: Family<EndLabels, Counter>,
    /// Event frames queued to streams (heartbeats not counted).
    pub frames: Counter,
}

impl StreamMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register("streams_open", "Open SSE streams", metrics.open.clone());
        registry.register(
            "stream_groups",
            "Groups of open streams (distinct environment and filter)",
            metrics.groups.clone(),
        );
        registry.register(
            "streams_opened",
            "SSE streams opened",
            metrics.opened.clone(),
        );
        registry.register(
            "streams_refused",
            "SSE streams refused at --streaming-max-connections (429)",
            metrics.refused.clone(),
        );
        registry.register(
            "streams_ended",
            "SSE streams the replica ended, by reason (slow, lifetime, token, shutdown)",
            metrics.ended.clone(),
        );
        registry.register(
            "stream_frames",
            "Event frames queued to SSE streams",
            metrics.frames.clone(),
        );
        metrics
    }

    /// Counts a stream the replica ended for `reason` (`slow`, `lifetime`, `token`, `shutdown`).
    pub fn ended(&self, reason: &'static str) -> u64 {
        self.ended.get_or_create(&EndLabels { reason }).inc()
    }

    /// How many streams the replica ended for `reason`.
    pub fn ended_count(&self, reason: &'static str) -> u64 {
        self.ended.get_or_create(&EndLabels { reason }).get()
    }
}
