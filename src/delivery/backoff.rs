//! When a failed delivery is tried again: exponential backoff with jitter, or later when the
//! receiver's `Retry-After` asks for it.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The longest `Retry-After` honoured.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(3600);

/// The delay after `attempts` failed attempts: `base`·2^(attempts−1), at most `max`, drawn at
/// random from its upper half (so receivers that come back are not hit by every retry at
/// once).
pub fn backoff(attempts: u32, base: Duration, max: Duration) -> Duration {
    let doubling = 2u32.saturating_pow(attempts.saturating_sub(1).min(30));
    let ceiling = base.saturating_mul(doubling).min(max);
    let half = ceiling / 2;
    let spread = u64::try_from((ceiling - half).as_millis()).unwrap_or(u64::MAX);
    half + Duration::from_millis(crate::store::random_id() % (spread + 1))
}

/// A `Retry-After` value (seconds, or an HTTP date) as a delay from `now`, at most
/// `RETRY_AFTER_MAX`; `None` when it does not parse.
pub fn retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    let delay = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => {
            let at = DateTime::parse_from_rfc2822(value)
                .ok()?
                .with_timezone(&Utc);
            (at - now).to_std().unwrap_or(Duration::ZERO)
        }
    };
    Some(delay.min(RETRY_AFTER_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_jitter_and_stops_at_the_cap() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        for _ in 0..200 {
            let first = backoff(1, base, max);
            assert!(
                first >= Duration::from_millis(50) && first <= base,
                "{first:?}"
            );
            let third = backoff(3, base, max);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            let late = backoff(40, base, max);
            assert!(late >= Duration::from_secs(1) && late <= max, "{late:?}");
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        assert_eq!(retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            retry_after("Mon, 23 Nov 2026 10:00:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after("Mon, 23 Nov 2026 09:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("999999", now), Some(RETRY_AFTER_MAX));
        assert_eq!(retry_after("soon", now), None);
    }
}
