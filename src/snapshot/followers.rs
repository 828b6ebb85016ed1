//! `Followers`: builders besides the client documents that follow the configuration and that a
//! writer waits for before it is answered — the evaluation engines of the environments this
//! replica answers frontend and OFREP requests for — so that a write is served by every
//! interface of the replica once it is acknowledged (read-your-writes).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// How long a writer waits for the followers before it is answered anyway: only a builder
/// that stopped comes near it (the engines are followed only up to 5,000 toggles, where even
/// a segment change, which compiles every toggle again, takes milliseconds).
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

    /// Whether writers wait for the followers.
    pub fn is_engaged(&self) -> bool {
        self.engaged.load(Ordering::Acquire)
    }

    /// Writers no longer wait (the builders stopped, or are too slow to wait for).
    pub fn disengage(&self) {
        self.engaged.store(false, Ordering::Release);
        self.current.send_replace(u64::MAX);
    }

    /// The followers are current at `version` (the newest configuration they were given).
    pub fn reached(&self, version: u64) {
        self.current.send_replace(version);
    }

    /// Waits until the followers are current at `version` or later (at once when nothing
    /// follows). As for the client documents, a version above `newest` does not count: the
    /// store started over, and what was built belongs to the old history.
    pub async fn reach(&self, version: u64, newest: &(dyn Fn() -> u64 + Send + Sync)) {
        if !self.engaged.load(Ordering::Acquire) {
            return;
        }
        let holds =
            |current: u64| current == u64::MAX || (version <= current && current <= newest());
        let mut current = self.current.subscribe();
        if tokio::time::timeout(REACH_WAIT, current.wait_for(|v| holds(*v)))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `reach(version)` returns within 50 ms while the newest version is `newest`.
    async fn reaches(followers: &Followers, version: u64, newest: u64) -> bool {
        let newest = move || newest;
        tokio::time::timeout(Duration::from_millis(50), followers.reach(version, &newest))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn writers_wait_only_for_engaged_followers_behind_them() {
        let followers = Followers::default();
        assert!(reaches(&followers, 3, 3).await, "nothing follows yet");
        followers.engage();
        assert!(!reaches(&followers, 3, 3).await);
        followers.reached(3);
        assert!(reaches(&followers, 3, 3).await);
        assert!(reaches(&followers, 2, 3).await);
        // The store started over: what was built at 3 is not version 1 of the new history.
        assert!(!reaches(&followers, 1, 1).await);
        followers.reached(1);
        assert!(reaches(&followers, 1, 1).await);
        followers.disengage();
        assert!(reaches(&followers, 9, 9).await, "the builders stopped");
    }
}
