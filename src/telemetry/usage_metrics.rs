//! Prometheus metrics of client usage ingestion and of store operations. Every label set is
//! bounded: endpoints, results and operations are fixed names; per-toggle usage counters are
//! opt-in and capped (beyond the cap, counts go to the `_other` series).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::store::usage::UsageBatch;
use crate::store::StoreError;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReportLabels {
    /// `register` or `metrics`.
    endpoint: &'static str,
    /// `accepted` or `rejected`.
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    operation: &'static str,
    /// `unavailable`, `uncertain` or `corrupt`.
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToggleUsageLabels {
    toggle: String,
    app_name: String,
    /// `true` for yes, `false` for no (as the reference's `feature_toggle_usage_total`).
    active: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    app_name: String,
    /// `current`, `behind` or `not_seen_recently`.
    state: &'static str,
}

/// Per-toggle usage counters, capped in series.
struct ToggleUsage {
    family: Family<ToggleUsageLabels, Counter>,
    max_series: usize,
    series: AtomicUsize,
}

/// The usage and store metrics.
pub struct UsageMetrics {
    reports: Family<ReportLabels, Counter>,
    /// Polls not recorded because the poll log was full.
    pub polls_dropped: Counter,
    flush_duration: Histogram,
    flush_entries: Histogram,
    operations: Family<OperationLabels, Histogram>,
    errors: Family<ErrorLabels, Counter>,
    toggle_usage: Option<ToggleUsage>,
    instances: Family<InstanceLabels, Gauge>,
    oldest_version: Gauge,
}

/// Most applications given their own `client_instances` series; the rest share `_other`.
pub const MAX_APP_SERIES: usize = 50;

fn seconds_histogram() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    ])
}

fn error_kind(e: &StoreError) -> &'static str {
    match e {
        StoreError::Unavailable(_) => "unavailable",
        StoreError::Uncertain(_) => "uncertain",
        StoreError::Corrupt(_) => "corrupt",
    }
}

impl UsageMetrics {
    /// Runs a store operation, recording its duration and failure under `operation`.
    pub async fn timed<T>(
        &self,
        operation: &'static str,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = std::time::Instant::now();
        let result = work.await;
        self.operation(operation, started.elapsed(), result.as_ref().err());
        result
    }

    /// Registers the metrics; `toggle_usage_series` enables per-toggle counters with that cap.
    pub fn register(registry: &mut Registry, toggle_usage_series: Option<usize>) -> Self {
        let metrics = Self {
            reports: Family::default(),
            polls_dropped: Counter::default(),
            flush_duration: seconds_histogram(),
            flush_entries: Histogram::new([
                1.0,
                10.0,
                100.0,
                1_000.0,
                10_000.0,
                100_000.0,
                1_000_000.0,
            ]),
            operations: Family::new_with_constructor(seconds_histogram as fn() -> Histogram),
            errors: Family::default(),
            toggle_usage: toggle_usage_series.map(|max_series| ToggleUsage {
                family: Family::default(),
                max_series,
                series: AtomicUsize::new(0),
            }),
            instances: Family::default(),
            oldest_version: Gauge::default(),
        };
        registry.register(
            "client_reports",
            "Client registrations and metrics reports received, by result",
            metrics.reports.clone(),
        );
        registry.register(
            "client_polls_unrecorded",
            "Client polls whose configuration was not recorded because the poll log was full",
            metrics.polls_dropped.clone(),
        );
        registry.register_with_unit(
            "usage_flush_duration",
            "Duration of writing the replica's usage aggregate to the store",
            Unit::Seconds,
            metrics.flush_duration.clone(),
        );
        registry.register(
            "usage_flush_entries",
            "Entries (counters, instances, applications) written per usage flush",
            metrics.flush_entries.clone(),
        );
        registry.register_with_unit(
            "store_operation_duration",
            "Duration of store (Redis or embedded) operations by kind",
            Unit::Seconds,
            metrics.operations.clone(),
        );
        registry.register(
            "store_errors",
            "Failed store operations by kind and failure",
            metrics.errors.clone(),
        );
        if let Some(usage) = &metrics.toggle_usage {
            registry.register(
                "feature_toggle_usage",
                "Evaluations reported by clients per toggle and application (opt-in, capped)",
                usage.family.clone(),
            );
        }
        registry.register(
            "client_instances",
            "Client instances by application and whether they hold the newest configuration",
            metrics.instances.clone(),
        );
        registry.register(
            "client_oldest_config_version",
            "The oldest configuration version an instance seen recently still holds",
            metrics.oldest_version.clone(),
        );
        metrics
    }

    /// Counts one registration or metrics report.
    pub fn report(&self, endpoint: &'static str, accepted: bool) {
        let result = if accepted { "accepted" } else { "rejected" };
        self.reports
            .get_or_create(&ReportLabels { endpoint, result })
            .inc();
    }

    /// Records the duration and outcome of a store operation.
    pub fn operation(
        &self,
        operation: &'static str,
        elapsed: Duration,
        error: Option<&StoreError>,
    ) {
        self.operations
            .get_or_create(&OperationLabels { operation })
            .observe(elapsed.as_secs_f64());
        if let Some(e) = error {
            self.errors
                .get_or_create(&ErrorLabels {
                    operation,
                    kind: error_kind(e),
                })
                .inc();
        }
    }

    /// Records one flush: its duration, size, outcome and (opt-in) per-toggle counts.
    pub fn record_flush(&self, batch: &UsageBatch, elapsed: Duration, error: Option<&StoreError>) {
        self.operation("usage_flush", elapsed, error);
        if error.is_some() {
            return;
        }
        self.flush_duration.observe(elapsed.as_secs_f64());
        let counters: usize = batch
            .counts
            .values()
            .flat_map(|apps| apps.values())
            .map(|toggles| toggles.len())
            .sum();
        let instances: usize = batch.apps.values().map(|a| a.instances.len()).sum();
        self.flush_entries
            .observe((counters + instances + batch.apps.len()) as f64);
        let Some(usage) = &self.toggle_usage else {
            return;
        };
        for apps in batch.counts.values() {
            for (app, toggles) in apps {
                for (toggle, counts) in toggles {
                    for (active, n) in [("true", counts.yes), ("false", counts.no)] {
                        usage.counter(toggle, app, active).inc_by(n);
                    }
                }
            }
        }
    }

    /// Sets the configuration-holding gauges: (app, current, behind, not seen recently) and
    /// the oldest version still held.
    pub fn set_instances(&self, apps: &[(String, u64, u64, u64)], oldest_version: Option<u64>) {
        self.instances.clear();
        for (i, (app, current, behind, stale)) in apps.iter().enumerate() {
            let app_name = if i < MAX_APP_SERIES {
                app.clone()
            } else {
                "_other".to_string()
            };
            for (state, n) in [
                ("current", current),
                ("behind", behind),
                ("not_seen_recently", stale),
            ] {
                self.instances
                    .get_or_create(&InstanceLabels {
                        app_name: app_name.clone(),
                        state,
                    })
                    .inc_by(*n as i64);
            }
        }
        self.oldest_version
            .set(oldest_version.map_or(0, |v| v as i64));
    }
}

impl ToggleUsage {
    fn counter(&self, toggle: &str, app: &str, active: &'static str) -> Counter {
        let labels = ToggleUsageLabels {
            toggle: toggle.to_string(),
            app_name: app.to_string(),
            active,
        };
        if let Some(counter) = self.family.get(&labels) {
            return counter.clone();
        }
        if self.series.fetch_add(1, Ordering::Relaxed) < self.max_series {
            return self.family.get_or_create(&labels).clone();
        }
        self.series.fetch_sub(1, Ordering::Relaxed);
        self.family
            .get_or_create(&ToggleUsageLabels {
                toggle: "_other".into(),
                app_name: "_other".into(),
                active,
            })
            .clone()
    }
}
