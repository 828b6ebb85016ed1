//! Keeping a replica's snapshot fresh: on every version announcement that names a position the
//! snapshot does not hold, and with a periodic position check besides. The loop reports to the
//! replica around it through [`RefreshHooks`], so the snapshot imports neither the use-cases
//! (which re-seed a store found empty) nor the metrics (which read the snapshot).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Snapshot;
use crate::store::{Announcement, StoreError};

/// What the refresh loop tells the replica it runs in.
pub trait RefreshHooks: Send + Sync + 'static {
    /// A check of the store took `elapsed` and failed with `error`, if it did.
    fn checked(&self, elapsed: Duration, error: Option<&StoreError>);
    /// After every check that succeeded (a store found empty again gets its built-ins back).
    fn refreshed(&self) -> impl Future<Output = ()> + Send;
}

impl Snapshot {
    /// Keeps the snapshot fresh until `shutdown`: on every version announcement (Redis pub/sub)
    /// naming a position the snapshot does not hold, and with a position check every `interval`
    /// (the fallback when announcements are lost, and what finds a store that started another
    /// history).
    pub async fn keep_fresh(
        self: Arc<Self>,
        hooks: impl RefreshHooks,
        mut announcements: watch::Receiver<Announcement>,
        interval: Duration,
        shutdown: CancellationToken,
    ) {
        let mut failing = false;
        // Announcements keep coming under writes: the periodic check must not wait for a lull.
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The embedded store has no listener (nothing is ever announced); once the Redis
        // listener ends (at shutdown), only the periodic check runs.
        let mut listening = true;
        loop {
            let announced = tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = announcements.changed(), if listening => match changed {
                    Ok(()) => *announcements.borrow_and_update(),
                    Err(_) => {
                        listening = false;
                        continue;
                    }
                },
                _ = ticks.tick() => Announcement::Unknown,
            };
            let started = std::time::Instant::now();
            let checked = match announced {
                // A version a refresh or a commit of this replica already brought.
                Announcement::At(position) if self.holds(position) => continue,
                // Announced, so the store moved: no need to ask it first.
                Announcement::At(position) => self.refresh_to(position).await,
                Announcement::Unknown => self.check().await,
            };
            hooks.checked(started.elapsed(), checked.as_ref().err());
            // Logged once per outage, not on every check.
            match checked {
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "snapshot refresh failed; serving the last snapshot");
                    }
                    failing = true;
                    continue;
                }
                Ok(()) if failing => {
                    tracing::info!(version = self.state().version, "store reachable again");
                    failing = false;
                }
                Ok(()) => {}
            }
            hooks.refreshed().await;
        }
    }
}
