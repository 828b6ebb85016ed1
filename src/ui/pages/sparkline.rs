//! The usage sparkline of each row of the toggle list: evaluations (yes + no, every
//! application) in the last hour, in twelve 5-minute buckets, as inline SVG.
//!
//! Read from the per-minute counters (kept 65 minutes; the hourly ones are too coarse for
//! 5-minute buckets and are kept per toggle, for its own page). Reading an hour of counters
//! (every toggle of every application) is far too slow for each list page at 10,000 toggles
//! in use, so the sum is kept (per running service, in [`Sparklines`]) and made again in the
//! background when it is 15 s old: a sparkline may be that much (and one sum) behind, and the
//! first list shows none yet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use maud::{html, Markup};

use crate::store::usage::{minute_of, CountKey, Counts, Minute};
use crate::usage::{now_ms, UsageRecorder};

/// Buckets of a sparkline.
pub const BUCKETS: usize = 12;
/// Minutes per bucket (the buckets cover the last hour).
const BUCKET_MINUTES: u64 = 5;

/// Evaluations per toggle per bucket, oldest bucket first.
pub type Buckets = HashMap<String, [u64; BUCKETS]>;

/// How long a summed hour is shown before it is summed again (client SDKs report every 60 s
/// by default).
const FRESH_MS: i64 = 15_000;
/// How long after a failed read of the usage store the next is tried.
const RETRY_MS: i64 = 5_000;

/// The kept hour of usage of one running service's UI (made with its router, so services
/// running in one process, as tests do, keep theirs apart).
#[derive(Default)]
pub struct Sparklines {
    kept: Mutex<Kept>,
}

/// What is kept: the last sum, whether a new one is under way, when a read last failed.
#[derive(Default)]
struct Kept {
    summed: Option<(i64, Arc<Buckets>)>,
    refreshing: bool,
    failed_at_ms: Option<i64>,
}

impl Kept {
    /// Whether a new sum is due at `now` (none under way, the last one old or missing, the
    /// last failure not too recent).
    fn due(&self, now: i64) -> bool {
        let stale = self
            .summed
            .as_ref()
            .is_none_or(|(at, _)| now - at >= FRESH_MS);
        let retry = self.failed_at_ms.is_none_or(|at| now - at >= RETRY_MS);
        !self.refreshing && stale && retry
    }
}

/// The bucket of `minute` in the hour ending with `now` (the current minute is the newest).
fn bucket_of(minute: Minute, now: Minute) -> Option<usize> {
    let age = now.checked_sub(minute)?;
    let from_newest = usize::try_from(age / BUCKET_MINUTES).ok()?;
    (from_newest < BUCKETS).then(|| BUCKETS - 1 - from_newest)
}

/// The counters of minutes `rows` summed per toggle and bucket of the hour ending with `now`.
fn buckets_of(rows: &[(Minute, HashMap<CountKey, Counts>)], now: Minute) -> Buckets {
    let mut buckets = Buckets::new();
    for (minute, counts) in rows {
        let Some(b) = bucket_of(*minute, now) else {
            continue;
        };
        for (k, c) in counts {
            let slot = buckets.entry(k.toggle.clone()).or_insert([0; BUCKETS]);
            slot[b] = slot[b].saturating_add(c.yes.saturating_add(c.no));
        }
    }
    buckets
}

/// Sums the last hour's counters per toggle and keeps the sum in `kept` (the summing runs
/// off the runtime's threads, without the lock); a failed read is kept with its time.
async fn refresh(sparklines: Arc<Sparklines>, usage: Arc<UsageRecorder>) {
    let at_ms = now_ms();
    let now = minute_of(at_ms);
    let first = now.saturating_sub(BUCKETS as u64 * BUCKET_MINUTES - 1);
    let summed = match usage.store().counts(first, now).await {
        Ok(rows) => tokio::task::spawn_blocking(move || buckets_of(&rows, now))
            .await
            .ok(),
        Err(_) => None,
    };
    let Ok(mut kept) = sparklines.kept.lock() else {
        return;
    };
    kept.refreshing = false;
    match summed {
        Some(buckets) => {
            kept.summed = Some((at_ms, Arc::new(buckets)));
            kept.failed_at_ms = None;
        }
        None => kept.failed_at_ms = Some(now_ms()),
    }
}

/// The last hour's usage per toggle, at most `FRESH_MS` old plus the time a new sum takes.
/// A page is never held up by summing: a sum that is due is made in the background while
/// the previous one is shown, and while there is none yet (or the store cannot be read) the
/// list is shown without sparklines (`None`).
pub fn last_hour(sparklines: &Arc<Sparklines>, usage: &Arc<UsageRecorder>) -> Option<Arc<Buckets>> {
    let now = now_ms();
    let (buckets, due) = {
        let mut kept = sparklines.kept.lock().ok()?;
        let due = kept.due(now);
        if due {
            kept.refreshing = true;
        }
        (kept.summed.as_ref().map(|(_, b)| b.clone()), due)
    };
    if due {
        tokio::spawn(refresh(sparklines.clone(), usage.clone()));
    }
    buckets
}

/// The sparkline of one toggle (a flat line when it was not evaluated).
pub fn sparkline(name: &str, counts: Option<&[u64; BUCKETS]>) -> Markup {
    let zero = [0; BUCKETS];
    let counts = counts.unwrap_or(&zero);
    let total: u64 = counts.iter().sum();
    let highest = counts.iter().copied().max().unwrap_or(0).max(1);
    let (width, height) = (60.0, 16.0);
    let step = width / (BUCKETS - 1) as f64;
    let points: Vec<String> = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let y = height - 1.0 - (n as f64 / highest as f64) * (height - 2.0);
            format!("{:.1},{:.1}", i as f64 * step, y)
        })
        .collect();
    html! {
        svg.sparkline width="60" height="16" viewBox="0 0 60 16" role="img"
            aria-label={ (name) ": " (total) " evaluations in the last hour" } {
            polyline points=(points.join(" ")) fill="none" stroke="currentColor" stroke-width="1.5" {}
        }
        " " small { (total) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sum_is_due_once_and_a_failure_waits_before_the_next() {
        let mut kept = Kept::default();
        assert!(kept.due(1_000), "nothing summed yet");
        kept.refreshing = true;
        assert!(!kept.due(1_000), "one sum at a time");
        kept.refreshing = false;
        kept.failed_at_ms = Some(1_000);
        assert!(!kept.due(2_000), "a failure is not retried at once");
        assert!(kept.due(1_000 + RETRY_MS));
        kept.failed_at_ms = None;
        kept.summed = Some((1_000, Arc::new(Buckets::new())));
        assert!(!kept.due(2_000));
        assert!(kept.due(1_000 + FRESH_MS));
    }

    #[test]
    fn minutes_fall_in_five_minute_buckets_ending_with_the_current_one() {
        assert_eq!(bucket_of(100, 100), Some(BUCKETS - 1));
        assert_eq!(bucket_of(96, 100), Some(BUCKETS - 1));
        assert_eq!(bucket_of(95, 100), Some(BUCKETS - 2));
        assert_eq!(bucket_of(41, 100), Some(0));
        assert_eq!(bucket_of(40, 100), None);
        assert_eq!(bucket_of(101, 100), None);
    }

    #[test]
    fn the_sparkline_names_the_toggle_and_its_total() {
        let mut counts = [0; BUCKETS];
        counts[BUCKETS - 1] = 7;
        counts[0] = 3;
        let html = sparkline("a<b", Some(&counts)).into_string();
        assert!(html.contains("aria-label=\"a&lt;b: 10 evaluations in the last hour\""));
        assert!(html.contains("<polyline"));
    }
}
