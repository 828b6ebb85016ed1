//! The usage loops: the flush (writes the replica's usage aggregate every interval, and once
//! more when the replica stops), the trim (forgets what retention no longer covers) and the
//! coarse clock of the hot path.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{now_ms, UsageRecorder};

/// How often the coarse clock of the hot path advances.
pub const CLOCK_TICK: Duration = Duration::from_millis(100);

/// Keeps the hot path's coarse clock (`usage::coarse_now_ms`) running until `stop`.
pub async fn run_clock(stop: CancellationToken) {
    loop {
        super::tick_coarse_clock();
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(CLOCK_TICK) => {}
        }
    }
}

/// How often one replica trims the registry (any replica's trim serves all).
const TRIM_EVERY: Duration = Duration::from_secs(600);

/// The longest wait between flush attempts while the store fails.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// Trims the registry every `TRIM_EVERY` until `stop` (apart from the flushes, so a long trim
/// never delays them).
pub async fn run_trim(recorder: Arc<UsageRecorder>, stop: CancellationToken) {
    let mut wait = Duration::from_secs(5);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = TRIM_EVERY;
        if let Err(e) = recorder.store().trim(now_ms()).await {
            tracing::warn!(error = %e, "usage trim failed");
        }
    }
}

/// Flushes `recorder` every `interval` until `stop`, then once more. `stop` must be cancelled
/// only after the server has answered its last request, so nothing accepted is left behind.
pub async fn run(recorder: Arc<UsageRecorder>, interval: Duration, stop: CancellationToken) {
    let mut failing = false;
    let mut wait = interval;
    let mut next_full = tokio::time::Instant::now() + interval;
    loop {
        // While the store fails, retries back off; otherwise the regular full flush is due at
        // `next_full`, and an early one may come before it.
        let due = if failing {
            tokio::time::Instant::now() + wait
        } else {
            next_full
        };
        let early = tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep_until(due) => false,
            _ = recorder.flush_requested(), if !failing => true,
        };
        // An early flush writes the instances only; counters wait for the interval (unless
        // made-up names have piled up).
        let result = if early && !recorder.counters_pending_over_limit() {
            recorder.flush_instances().await
        } else {
            next_full = tokio::time::Instant::now() + interval;
            recorder.flush().await
        };
        match result {
            Ok(()) => {
                if failing {
                    tracing::info!("usage flush succeeded again");
                }
                failing = false;
                wait = interval;
            }
            // Logged once per outage; the counts are kept for the next attempt, which backs
            // off up to a minute.
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "usage flush failed; keeping the counts for the next one");
                }
                failing = true;
                wait = (wait * 2).min(MAX_RETRY_WAIT.max(interval));
            }
        }
    }
    // A few attempts: one slow answer (another replica's flush, a blip) must not lose what
    // this replica holds; each attempt settles the previous one's part in doubt first.
    for attempt in 1..=SHUTDOWN_ATTEMPTS {
        match recorder.flush().await {
            Ok(()) => {
                tracing::info!("usage flushed at shutdown");
                return;
            }
            Err(e) if attempt == SHUTDOWN_ATTEMPTS => {
                tracing::error!(error = %e, "usage flush at shutdown failed; these counts are lost");
            }
            Err(e) => {
                tracing::warn!(error = %e, attempt, "usage flush at shutdown failed; retrying");
                tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
            }
        }
    }
}

/// Flush attempts when the replica stops.
const SHUTDOWN_ATTEMPTS: u32 = 3;
