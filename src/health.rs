//! Liveness and readiness of one replica, and the drain before it stops: what the probes at
//! `/health/live` and `/health/ready` report (`http/backstage.rs` serves them).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::snapshot::Snapshot;

/// Why a replica is not ready: the check that failed and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// The failing check: `snapshot`, `store` or `shutdown`.
    pub check: &'static str,
    /// What is wrong, for the probe's body and a person reading it.
    pub message: String,
}

/// Whether this replica should get traffic from a load balancer.
pub struct Readiness {
    snapshot: Arc<Snapshot>,
    /// How long the store may fail to answer before readiness fails.
    grace: Duration,
    /// Set once the replica was asked to stop: it keeps serving, but takes no new traffic.
    draining: AtomicBool,
}

impl Readiness {
    /// Readiness of the replica serving `snapshot`, tolerating store outages up to `grace`.
    pub fn new(snapshot: Arc<Snapshot>, grace: Duration) -> Self {
        Self {
            snapshot,
            grace,
            draining: AtomicBool::new(false),
        }
    }

    /// Fails readiness from now on (the replica is stopping).
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Every reason the replica is not ready; empty when it is. Reads only what the
    /// background checks recorded, never the store, so probes cannot load it.
    pub fn check(&self) -> Vec<NotReady> {
        let mut failing = Vec::new();
        if self.draining.load(Ordering::Acquire) {
            failing.push(NotReady {
                check: "shutdown",
                message: "the replica is shutting down".into(),
            });
        }
        if !self.snapshot.is_ready() {
            failing.push(NotReady {
                check: "snapshot",
                message: "the configuration has not been loaded (and the start-up import \
                          applied) yet"
                    .into(),
            });
        }
        // The last check may simply be older than the grace when the refresh interval is
        // longer: only a failing store counts.
        let unanswered = self.snapshot.since_confirmed();
        if !self.snapshot.store_reachable() && unanswered > self.grace {
            failing.push(NotReady {
                check: "store",
                message: format!(
                    "the store has not answered for {} ms (grace {} ms)",
                    unanswered.as_millis(),
                    self.grace.as_millis()
                ),
            });
        }
        failing
    }
}

/// Once `requested` is cancelled: fails readiness at once, keeps serving for `drain` (load
/// balancers take time to notice), then cancels `stop`, which stops the server and the
/// workers. Returns early when `stop` is cancelled first (the replica stops on its own).
pub async fn drain_then_stop(
    requested: CancellationToken,
    readiness: Arc<Readiness>,
    drain: Duration,
    stop: CancellationToken,
) {
    tokio::select! {
        _ = requested.cancelled() => {}
        _ = stop.cancelled() => return,
    }
    readiness.start_draining();
    if !drain.is_zero() {
        tracing::info!(
            drain_ms = drain.as_millis() as u64,
            "draining: readiness fails, requests are still served"
        );
        tokio::select! {
            _ = tokio::time::sleep(drain) => {}
            _ = stop.cancelled() => {}
        }
    }
    stop.cancel();
}
