//! `Followers`: builders besides the client documents that follow the configuration and that a
//! writer waits for before it is answered — the evaluation engines of the environments this
//! replica answers frontend and OFREP requests for — so that a write is served by every
//! interface of the replica once it is acknowledged (read-your-writes).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// How long a writer waits for the followers before it is answered anyway (only a builder
/// that stopped, at shutdown, takes that long).
const REACH_WAIT: Duration = Duration::from_secs(5);

/// The configuration version the followers are current at.
pub struct Followers {
    /// Whether anything follows yet (nobody waits for builders that have nothing to build).
    engaged: AtomicBool,
    current: watch::Sender<u64>,
}

impl Default for Followers {
    fn default() -> Self {
        Self {
            engaged: AtomicBool::new(false),
            current: watch::Sender::new(0),
        }
    }
}

impl Followers {
    /// From now on writers wait for the followers.
    pub fn engage(&self) {
        self.engaged.store(true, Ordering::Release);
    }

    /// The followers are current at `version`.
    pub fn reached(&self, version: u64) {
        self.current.send_if_modified(|current| {
            let moved = version > *current;
            *current = (*current).max(version);
            moved
        });
    }

    /// Waits until the followers are current at `version` or later (at once when nothing
    /// follows).
    pub async fn reach(&self, version: u64) {
        if !self.engaged.load(Ordering::Acquire) {
            return;
        }
        let mut current = self.current.subscribe();
        if tokio::time::timeout(REACH_WAIT, current.wait_for(|v| *v >= version))
            .await
            .is_err()
        {
            tracing::warn!(
                version,
                "the evaluation engines did not follow a write in time"
            );
        }
    }
}
