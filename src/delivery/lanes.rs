//! How much delivery work one replica takes on: jobs held (taken and not yet settled), overall
//! and per addon, and attempts in flight, overall and per addon. A job whose addon has no room
//! is put back for about as long as the addon needs to catch up — milliseconds for a fast
//! receiver, seconds for one that hangs — so a slow receiver never holds the room other addons
//! need, and a fast one is not held back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// Jobs one replica holds, per attempt it may make at once.
const HELD_PER_ATTEMPT: usize = 4;
/// Jobs of one addon one replica holds, per attempt it may make to it at once (and at most
/// half of all it holds).
const ADDON_HELD_PER_ATTEMPT: usize = 8;
/// The assumed duration of an attempt to an addon not attempted yet.
const FIRST_GUESS: Duration = Duration::from_millis(100);
/// Bounds of the time a job is put back for.
const PUT_BACK_MIN: Duration = Duration::from_millis(50);
const PUT_BACK_MAX: Duration = Duration::from_secs(5);

/// One addon's share.
struct Lane {
    slots: Arc<Semaphore>,
    held: AtomicUsize,
    /// Moving average of its attempts' durations, in microseconds.
    typical_us: AtomicU64,
}

/// The bounds of one replica's delivery work.
pub struct Lanes {
    held: Arc<Semaphore>,
    in_flight: Arc<Semaphore>,
    per_addon: usize,
    /// Jobs of one addon held at most: a share of all, so a slow addon leaves room.
    addon_held: usize,
    /// How long a job waits for room before it is put back.
    wait_limit: Duration,
    /// Cancelled when the replica stops: jobs waiting for room are put back at once.
    closing: CancellationToken,
    lanes: Mutex<HashMap<u64, Arc<Lane>>>,
}

/// A job of an addon counted as held; released on drop.
struct LaneHold(Arc<Lane>);

impl Drop for LaneHold {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Room for one attempt; its duration is recorded when dropped.
pub struct Admission {
    hold: LaneHold,
    _slot: OwnedSemaphorePermit,
    _in_flight: OwnedSemaphorePermit,
    started: Instant,
}

impl Admission {
    /// The attempt's requests start now (what came before, such as reading the event, is not
    /// part of the addon's typical attempt time).
    pub fn sending(&mut self) {
        self.started = Instant::now();
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let took = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let typical = &self.hold.0.typical_us;
        let before = typical.load(Ordering::Relaxed);
        // An exponential moving average (1/4 weight to the newest); races only blur it.
        let next = if before == 0 {
            took
        } else {
            before - before / 4 + took / 4
        };
        typical.store(next.max(1), Ordering::Relaxed);
    }
}

impl Lanes {
    /// At most `concurrency` attempts at once, `per_addon` to one addon; a job waits at most
    /// `wait_limit` for room.
    pub fn new(concurrency: usize, per_addon: usize, wait_limit: Duration) -> Self {
        let held = concurrency * HELD_PER_ATTEMPT;
        Self {
            held: Arc::new(Semaphore::new(held)),
            in_flight: Arc::new(Semaphore::new(concurrency)),
            per_addon,
            closing: CancellationToken::new(),
            addon_held: (per_addon * ADDON_HELD_PER_ATTEMPT)
                .min(held / 2)
                .max(per_addon),
            wait_limit,
            lanes: Mutex::new(HashMap::new()),
        }
    }

    /// Puts back, from now on, every job that waits for room (the replica stops).
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// Waits for room to hold one more job.
    pub async fn hold(&self) -> Option<OwnedSemaphorePermit> {
        self.held.clone().acquire_owned().await.ok()
    }

    /// Room to hold one more job, if there is some now.
    pub fn try_hold(&self) -> Option<OwnedSemaphorePermit> {
        self.held.clone().try_acquire_owned().ok()
    }

    /// How many more jobs may be held now.
    pub fn room(&self) -> usize {
        self.held.available_permits()
    }

    fn lane(&self, addon: u64) -> Arc<Lane> {
        let mut lanes = match self.lanes.lock() {
            Ok(lanes) => lanes,
            Err(poisoned) => poisoned.into_inner(),
        };
        lanes
            .entry(addon)
            .or_insert_with(|| {
                Arc::new(Lane {
                    slots: Arc::new(Semaphore::new(self.per_addon)),
                    held: AtomicUsize::new(0),
                    typical_us: AtomicU64::new(0),
                })
            })
            .clone()
    }

    /// Room for an attempt to `addon`, waiting up to the wait limit; otherwise how long to put
    /// the job back for.
    pub async fn admit(&self, addon: u64) -> Result<Admission, Duration> {
        let lane = self.lane(addon);
        let held = lane.held.fetch_add(1, Ordering::AcqRel) + 1;
        let hold = LaneHold(lane.clone());
        let put_back = || put_back_for(&lane, self.per_addon);
        if held > self.addon_held {
            return Err(put_back());
        }
        let wait = tokio::time::timeout(self.wait_limit, async {
            let slot = lane.slots.clone().acquire_owned().await.ok()?;
            let in_flight = self.in_flight.clone().acquire_owned().await.ok()?;
            Some((slot, in_flight))
        });
        let waited = tokio::select! {
            _ = self.closing.cancelled() => return Err(PUT_BACK_MIN),
            waited = wait => waited,
        };
        match waited {
            Ok(Some((slot, in_flight))) => Ok(Admission {
                hold,
                _slot: slot,
                _in_flight: in_flight,
                started: Instant::now(),
            }),
            _ => Err(put_back()),
        }
    }
}

/// About the time the addon needs for the jobs it holds: held ÷ slots × a typical attempt.
fn put_back_for(lane: &Lane, per_addon: usize) -> Duration {
    let typical = match lane.typical_us.load(Ordering::Relaxed) {
        0 => FIRST_GUESS,
        us => Duration::from_micros(us),
    };
    let rounds =
        u32::try_from(lane.held.load(Ordering::Acquire) / per_addon.max(1) + 1).unwrap_or(u32::MAX);
    typical
        .saturating_mul(rounds)
        .clamp(PUT_BACK_MIN, PUT_BACK_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_addon_gets_its_slots_and_no_more_and_a_slow_one_is_put_back_longer() {
        let lanes = Lanes::new(8, 2, Duration::from_millis(20));
        let a = lanes.admit(1).await.expect("room");
        let b = lanes.admit(1).await.expect("room");
        let waited = lanes.admit(1).await.err().expect("no third slot");
        // Nothing finished yet: the first guess, for the held job's round and its own.
        assert_eq!(waited, FIRST_GUESS * 2);
        assert!(lanes.admit(2).await.is_ok(), "another addon has room");
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(a);
        drop(b);
        // Attempts of 300 ms: two rounds of them for a held job and the one asking.
        let c = lanes.admit(1).await.expect("room again");
        let d = lanes.admit(1).await.expect("room again");
        let slow = lanes.admit(1).await.err().expect("full");
        assert!(slow >= Duration::from_millis(300), "{slow:?}");
        drop((c, d));
    }

    #[tokio::test]
    async fn an_addon_holds_a_bounded_share_of_the_jobs() {
        let lanes = Lanes::new(4, 1, Duration::from_secs(60));
        let _first = lanes.admit(7).await.expect("room");
        let mut waiting = Vec::new();
        for _ in 0..(ADDON_HELD_PER_ATTEMPT - 1) {
            let lanes = &lanes;
            waiting.push(async move { lanes.admit(7).await.is_ok() });
        }
        let waiters = futures_util::future::join_all(waiting);
        tokio::pin!(waiters);
        // The held jobs wait for the slot; one more is put back at once.
        tokio::select! {
            biased;
            _ = &mut waiters => panic!("nobody should get the slot"),
            refused = lanes.admit(7) => assert!(refused.is_err()),
        }
    }
}
