//! Prometheus metrics of configuration writes (commits, lost races, writes given up) and of
//! the client documents built from the versions they make.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::snapshot::client_document::BuildTotals;
use crate::snapshot::{Snapshot, UpdateCounts};

/// Write and client document metrics.
pub struct WriteMetrics {
    conflicts: Counter,
    rebased: Counter,
    checked_from_snapshot: Counter,
    carried_over: Counter,
    gave_up: Counter,
    attempts: Histogram,
    builds: Counter,
    build_seconds: Counter<f64, AtomicU64>,
    lag: Gauge,
    snapshot_updates: Family<UpdateSource, Counter>,
    forwarded: Family<ForwardOutcome, Counter>,
    /// The build totals and snapshot update counts already added into the exported counters.
    exported: Mutex<(BuildTotals, UpdateCounts)>,
}

/// What became of an admin write this replica could forward to the committing replica.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ForwardOutcome {
    outcome: &'static str,
}

/// Where a snapshot update read other replicas' writes.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpdateSource {
    source: &'static str,
}

impl WriteMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            conflicts: Counter::default(),
            rebased: Counter::default(),
            checked_from_snapshot: Counter::default(),
            carried_over: Counter::default(),
            gave_up: Counter::default(),
            attempts: Histogram::new([1.0, 2.0, 3.0, 4.0, 6.0, 8.0]),
            builds: Counter::default(),
            build_seconds: Counter::default(),
            lag: Gauge::default(),
            snapshot_updates: Family::default(),
            forwarded: Family::default(),
            exported: Mutex::default(),
        };
        registry.register(
            "write_conflicts",
            "Decisions made again: their batch (or the one before it) lost the race with another replica, or failed",
            metrics.conflicts.clone(),
        );
        registry.register(
            "write_rebased_commits",
            "Batches committed on top of other replicas' writes that touched none of their toggles, without deciding again",
            metrics.rebased.clone(),
        );
        registry.register(
            "write_snapshot_checked_commits",
            "Batches checked from the replica's snapshot rather than the older state they were decided on, which agreed with it on what they read",
            metrics.checked_from_snapshot.clone(),
        );
        registry.register(
            "write_carried_over_batches",
            "Batches decided on top of one that lost a race that went on from the refreshed snapshot instead of being decided again",
            metrics.carried_over.clone(),
        );
        registry.register(
            "write_contention_failures",
            "Writes answered 503 after every attempt (lost races, or a full batch)",
            metrics.gave_up.clone(),
        );
        registry.register(
            "write_attempts",
            "Attempts a committed write took (1 when it won the first race)",
            metrics.attempts.clone(),
        );
        registry.register(
            "client_document_builds",
            "Builds of the client documents (each covers every version since the last)",
            metrics.builds.clone(),
        );
        registry.register_with_unit(
            "client_document_build",
            "Time spent building client documents",
            Unit::Seconds,
            metrics.build_seconds.clone(),
        );
        registry.register(
            "client_document_lag_versions",
            "Versions the client API is behind this replica's configuration",
            metrics.lag.clone(),
        );
        registry.register(
            "snapshot_updates",
            "Snapshot updates from the store (other replicas' writes, with this replica's rebased commits when the writes under them had to be read; the first load), by where they were read: announcement (the change sets version announcements carry, no round trip), change_log, reload (every record)",
            metrics.snapshot_updates.clone(),
        );
        registry.register(
            "forwarded_writes",
            "Admin writes sent on to the replica holding the committer lease, by outcome: forwarded (answered by it), local (it could not be reached, or the body was large: committed here), unanswered (sent, no answer: 503)",
            metrics.forwarded.clone(),
        );
        metrics
    }

    /// An admin write that could go to the committing replica had `outcome` (`forwarded`,
    /// `local` or `unanswered`).
    pub fn forward(&self, outcome: &'static str) {
        self.forwarded
            .get_or_create(&ForwardOutcome { outcome })
            .inc();
    }

    /// A commit lost the race with another writer.
    pub fn conflict(&self) {
        self.conflicts.inc();
    }

    /// A batch was committed on top of other replicas' writes.
    pub fn rebased(&self) {
        self.rebased.inc();
    }

    /// A batch was committed after a check from the snapshot.
    pub fn checked_from_snapshot(&self) {
        self.checked_from_snapshot.inc();
    }

    /// A batch decided on top of a lost one went on from the snapshot.
    pub fn carried_over(&self) {
        self.carried_over.inc();
    }

    /// A write gave up after losing every attempt.
    pub fn gave_up(&self) {
        self.gave_up.inc();
    }

    /// A write committed on its `attempts`-th attempt.
    pub fn committed(&self, attempts: usize) {
        self.attempts.observe(attempts as f64);
    }

    /// Brings the build and snapshot update counters and the lag gauge up to `snapshot`.
    pub fn observe(&self, snapshot: &Snapshot) {
        let totals = snapshot.client().build_totals();
        let updates = snapshot.update_counts();
        let mut exported = match self.exported.lock() {
            Ok(exported) => exported,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (exported_totals, exported_updates) = &mut *exported;
        self.builds
            .inc_by(totals.builds.saturating_sub(exported_totals.builds));
        self.build_seconds
            .inc_by((totals.seconds - exported_totals.seconds).max(0.0));
        for (source, now, before) in [
            (
                "announcement",
                updates.announced,
                exported_updates.announced,
            ),
            (
                "change_log",
                updates.change_log,
                exported_updates.change_log,
            ),
            ("reload", updates.reloads, exported_updates.reloads),
        ] {
            self.snapshot_updates
                .get_or_create(&UpdateSource { source })
                .inc_by(now.saturating_sub(before));
        }
        *exported = (totals, updates);
        let lag = snapshot
            .state()
            .version
            .saturating_sub(snapshot.client().settled_version());
        self.lag.set(lag as i64);
    }
}
