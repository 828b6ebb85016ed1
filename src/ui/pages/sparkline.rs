//! The usage sparkline of each row of the toggle list: evaluations (yes + no, every
//! application) in the last hour, in twelve 5-minute buckets, as inline SVG.
//!
//! The usage store keeps per-minute counters for 65 minutes only (no hourly buckets), so an
//! hour is what there is. Reading an hour of counters (every toggle of every application) is
//! far too slow for each list page at 10,000 toggles in use, so the sum is kept and made again
//! in the background when it is 15 s old: a sparkline may be that much (and one sum) behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use maud::{html, Markup};

use crate::store::usage::{minute_of, Minute};
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

/// An hour of usage summed at `at_ms`, and whether a new sum is under way.
struct Summed {
    at_ms: i64,
    buckets: Arc<Buckets>,
    refreshing: bool,
}

/// The sums per usage recorder (one per running service; tests run several in one process),
/// by the recorder's address.
static SUMMED: Mutex<Option<HashMap<usize, Summed>>> = Mutex::new(None);

/// The bucket of `minute` in the hour ending with `now` (the current minute is the newest).
fn bucket_of(minute: Minute, now: Minute) -> Option<usize> {
    let age = now.checked_sub(minute)?;
    let from_newest = usize::try_from(age / BUCKET_MINUTES).ok()?;
    (from_newest < BUCKETS).then(|| BUCKETS - 1 - from_newest)
}

/// Sums the last hour's counters per toggle and keeps the sum for `usage`.
async fn sum(usage: Arc<UsageRecorder>) -> Option<Arc<Buckets>> {
    let key = Arc::as_ptr(&usage) as usize;
    let at_ms = now_ms();
    let now = minute_of(at_ms);
    let first = now.saturating_sub(BUCKETS as u64 * BUCKET_MINUTES - 1);
    let rows = usage.store().counts(first, now).await;
    let mut sums = SUMMED.lock().ok()?;
    let sums = sums.get_or_insert_with(HashMap::new);
    let Ok(rows) = rows else {
        if let Some(entry) = sums.get_mut(&key) {
            entry.refreshing = false;
        }
        return None;
    };
    let mut buckets = Buckets::new();
    for (minute, counts) in &rows {
        let Some(b) = bucket_of(*minute, now) else {
            continue;
        };
        for (k, c) in counts {
            let slot = buckets.entry(k.toggle.clone()).or_insert([0; BUCKETS]);
            slot[b] = slot[b].saturating_add(c.yes.saturating_add(c.no));
        }
    }
    let buckets = Arc::new(buckets);
    sums.retain(|_, s| at_ms - s.at_ms < 10 * FRESH_MS);
    sums.insert(
        key,
        Summed {
            at_ms,
            buckets: buckets.clone(),
            refreshing: false,
        },
    );
    Some(buckets)
}

/// The last hour's usage per toggle, at most `FRESH_MS` old plus the time a new sum takes:
/// a page is never held up by summing but the first one (a sum that is due runs in the
/// background while the previous one is shown). `None` when the store cannot be read just
/// now (the list is shown without it).
pub async fn last_hour(usage: &Arc<UsageRecorder>) -> Option<Arc<Buckets>> {
    let key = Arc::as_ptr(usage) as usize;
    let now = now_ms();
    let kept = {
        let mut sums = SUMMED.lock().ok()?;
        match sums.get_or_insert_with(HashMap::new).get_mut(&key) {
            Some(entry) => {
                let due = now - entry.at_ms >= FRESH_MS && !entry.refreshing;
                if due {
                    entry.refreshing = true;
                }
                Some((entry.buckets.clone(), due))
            }
            None => None,
        }
    };
    match kept {
        Some((buckets, due)) => {
            if due {
                tokio::spawn(sum(usage.clone()));
            }
            Some(buckets)
        }
        None => sum(usage.clone()).await,
    }
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
