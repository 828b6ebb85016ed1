//! Prometheus metrics of addon deliveries: outcomes and attempts by provider, the latency from
//! the commit of an event to the receiver's 2xx, the backlog and the dead letters.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::store::delivery::QueueDepth;

/// Labels of the delivery outcome counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    provider: String,
    /// `delivered`, `retried`, `dead`, `dropped` or `deferred`.
    outcome: &'static str,
}

/// Labels by provider.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    provider: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
    ])
}

/// Delivery metrics.
pub struct DeliveryMetrics {
    outcomes: Family<OutcomeLabels, Counter>,
    attempts: Family<ProviderLabels, Counter>,
    latency: Family<ProviderLabels, Histogram>,
    backlog: Gauge,
    dead: Gauge,
}

impl DeliveryMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            outcomes: Family::default(),
            attempts: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            backlog: Gauge::default(),
            dead: Gauge::default(),
        };
        registry.register(
            "addon_deliveries",
            "Settled delivery attempts by provider and outcome (delivered, retried, dead, dropped, deferred)",
            metrics.outcomes.clone(),
        );
        registry.register(
            "addon_delivery_attempts",
            "HTTP delivery attempts made by this replica, by provider",
            metrics.attempts.clone(),
        );
        registry.register_with_unit(
            "addon_delivery_latency",
            "From the commit of an event to the receiver's 2xx",
            Unit::Seconds,
            metrics.latency.clone(),
        );
        registry.register(
            "addon_delivery_backlog",
            "Delivery jobs queued, in flight or waiting for a retry (whole store, sampled)",
            metrics.backlog.clone(),
        );
        registry.register(
            "addon_dead_letters",
            "Deliveries that failed for good and wait for a redelivery (whole store, sampled)",
            metrics.dead.clone(),
        );
        metrics
    }

    /// Counts a settled attempt.
    pub fn settled(&self, provider: &str, outcome: &'static str) {
        self.outcomes
            .get_or_create(&OutcomeLabels {
                provider: provider.to_string(),
                outcome,
            })
            .inc();
    }

    /// Counts an HTTP attempt.
    pub fn attempted(&self, provider: &str) {
        self.attempts
            .get_or_create(&ProviderLabels {
                provider: provider.to_string(),
            })
            .inc();
    }

    /// Records the latency of a delivery.
    pub fn delivered_after(&self, provider: &str, seconds: f64) {
        self.latency
            .get_or_create(&ProviderLabels {
                provider: provider.to_string(),
            })
            .observe(seconds);
    }

    /// Records a sample of the queue's depth.
    pub fn depth(&self, depth: QueueDepth) {
        self.backlog
            .set(i64::try_from(depth.backlog).unwrap_or(i64::MAX));
        self.dead.set(i64::try_from(depth.dead).unwrap_or(i64::MAX));
    }
}
